// CPU halves of unary, binary and binary_scalar (see ops_kernels.hpp): one instantiation of the
// element loop per (op, dtype), through the same functors as the CUDA kernels.
#include "ember/tensor/cpu_pointwise.hpp"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_unary_op<T>(op, [&](auto f) { cpu_pointwise<T, T>(f, out, {&in}); });
  });
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (is_comparison(op)) {
    dispatch_dtype(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      cpu_pointwise<bool, T, T>(CompareFn<T>{op}, out, {&a, &b});
    });
    return;
  }
  dispatch_numeric(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_arithmetic_op<T>(op, [&](auto f) { cpu_pointwise<T, T, T>(f, out, {&a, &b}); });
  });
}

void binary_scalar_cpu(BinaryOp op, const Tensor& out, const Tensor& a, double scalar) {
  if (is_comparison(op)) {
    dispatch_dtype(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = OpMath<T>;
      const C s = static_cast<C>(scalar);
      const CompareFn<T> f{op};
      cpu_pointwise<bool, T>([f, s](C x) { return f(x, s); }, out, {&a});
    });
    return;
  }
  dispatch_numeric(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = OpMath<T>;
    const C s = static_cast<C>(scalar);
    dispatch_arithmetic_op<T>(
        op, [&](auto f) { cpu_pointwise<T, T>([f, s](C x) { return f(x, s); }, out, {&a}); });
  });
}

}  // namespace ember::ops::detail
