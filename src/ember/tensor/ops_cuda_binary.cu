// CUDA halves of binary, binary_scalar and axpy (see ops_kernels.hpp). A scalar operand is an
// immediate input of the same kernels that take two tensors, so binary_scalar adds no
// instantiations.
#include "ember/core/device.hpp"
#include "ember/tensor/cuda_apply.cuh"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

namespace {

using cuda_apply::Arg;

// out = a op b, with b a tensor or an immediate.
template <class T>
void binary_on(BinaryOp op, const Tensor& out, const Tensor& a, const Arg<T>& b,
               StreamHandle stream) {
  if (is_comparison(op)) {
    cuda_apply::pointwise<bool, T, T>(CompareFn<T>{op}, out, stream, cuda_apply::tensor_arg<T>(a),
                                      b);
    return;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    dispatch_arithmetic_op<T>(op, [&](auto f) {
      cuda_apply::pointwise<T, T, T>(f, out, stream, cuda_apply::tensor_arg<T>(a), b);
    });
  } else {
    EMBER_THROW("internal: arithmetic on bool");
  }
}

}  // namespace

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                 StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_on<T>(op, out, a, cuda_apply::tensor_arg<T>(b), stream);
  });
}

void binary_scalar_cuda(BinaryOp op, const Tensor& out, const Tensor& a, double scalar,
                        StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_on<T>(op, out, a, cuda_apply::immediate_arg<T>(static_cast<OpMath<T>>(scalar)), stream);
  });
}

void axpy_cuda(const Tensor& y, double alpha, const Tensor& x, StreamHandle stream) {
  DeviceGuard guard(y.place().device());
  dispatch_numeric(y.dtype(), "axpy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda_apply::pointwise<T, T, T>(AxpyFn<T>{static_cast<OpMath<T>>(alpha)}, y, stream,
                                   cuda_apply::tensor_arg<T>(y), cuda_apply::tensor_arg<T>(x));
  });
}

}  // namespace ember::ops::detail
