// CPU halves of fill, copy, axpy, clamp and where (see ops_kernels.hpp).
#include <cstring>

#include "ember/tensor/cpu_pointwise.hpp"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

void fill_cpu(const Tensor& out, double value) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = BitsOf<T>;
    cpu_pointwise<U>(ConstantFn<U>{value_bits<T>(value)}, out, {});
  });
}

void copy_cpu(const Tensor& out, const Tensor& in) {
  if (out.dtype() == in.dtype()) {
    const auto plan = make_iteration_plan<2>(out.shape(), {out.strides(), in.strides()});
    if (plan.contiguous()) {
      std::memmove(out.data(), in.data(), out.nbytes());
      return;
    }
    dispatch_bits(out.dtype(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      cpu_pointwise<U, U>(IdentityFn<U>{}, out, {&in});
    });
    return;
  }
  dispatch_dtype(out.dtype(), [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    dispatch_dtype(in.dtype(), [&](auto in_tag) {
      using I = typename decltype(in_tag)::type;
      cpu_pointwise<O, I>(CastFn<O, I>{}, out, {&in});
    });
  });
}

void axpy_cpu(const Tensor& y, double alpha, const Tensor& x) {
  dispatch_numeric(y.dtype(), "axpy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_pointwise<T, T, T>(AxpyFn<T>{static_cast<OpMath<T>>(alpha)}, y, {&y, &x});
  });
}

void clamp_cpu(const Tensor& out, const Tensor& in, double low, double high) {
  dispatch_numeric(out.dtype(), "clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = OpMath<T>;
    cpu_pointwise<T, T>(ClampFn<T>{static_cast<C>(low), static_cast<C>(high)}, out, {&in});
  });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_bits(out.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    cpu_pointwise<U, bool, U, U>(WhereFn<U>{}, out, {&cond, &a, &b});
  });
}

}  // namespace ember::ops::detail
