// CUDA conversions between two different dtypes (copy_cuda with out.dtype() != in.dtype()): one
// element loop per ordered pair of dtypes (110 pairs), the biggest set of instantiations of the op
// layer, hence a file of its own that compiles in parallel with the others. Only the pairs that
// training moves in bulk get the vectorised kernel too: between floating types, and between f32
// and anything (labels and dense features arrive as integers). The rest use the strided kernel
// alone, which still coalesces on dense tensors.
#include "ember/tensor/cuda_apply.cuh"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

void cast_cuda(const Tensor& out, const Tensor& in, StreamHandle stream) {
  dispatch_dtype(out.dtype(), [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    dispatch_dtype(in.dtype(), [&](auto in_tag) {
      using I = typename decltype(in_tag)::type;
      if constexpr (std::is_same_v<O, I>) {
        EMBER_THROW("internal: cast_cuda between equal dtypes ", dtype_name(out.dtype()));
      } else {
        constexpr bool hot = (kIsFloatingType<O> && kIsFloatingType<I>) ||
                             std::is_same_v<O, float> || std::is_same_v<I, float>;
        if constexpr (hot) {
          cuda_apply::pointwise<O, I>(CastFn<O, I>{}, out, stream, cuda_apply::tensor_arg<I>(in));
        } else {
          cuda_apply::pointwise_unvectorised<O, I>(CastFn<O, I>{}, out, stream,
                                                   cuda_apply::tensor_arg<I>(in));
        }
      }
    });
  });
}

}  // namespace ember::ops::detail
