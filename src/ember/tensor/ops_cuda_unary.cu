// CUDA halves of unary and clamp (see ops_kernels.hpp).
#include "ember/core/device.hpp"
#include "ember/tensor/cuda_apply.cuh"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in, StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  dispatch_numeric(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_unary_op<T>(op, [&](auto f) {
      cuda_apply::pointwise<T, T>(f, out, stream, cuda_apply::tensor_arg<T>(in));
    });
  });
}

void clamp_cuda(const Tensor& out, const Tensor& in, double low, double high, StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  dispatch_numeric(out.dtype(), "clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = OpMath<T>;
    cuda_apply::pointwise<T, T>(ClampFn<T>{static_cast<C>(low), static_cast<C>(high)}, out, stream,
                                cuda_apply::tensor_arg<T>(in));
  });
}

}  // namespace ember::ops::detail
