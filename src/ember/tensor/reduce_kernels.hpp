// Internal: the per-device halves of reduce.hpp. reduce.cpp validates, handles empty inputs and
// resolves the stream; these trust their arguments.
#pragma once

#include "ember/core/device.hpp"
#include "ember/tensor/reduce.hpp"

namespace ember::ops::detail {

// `out` has in's shape without `dim` (any strides) and at least one element; in.size(dim) > 0.
void reduce_dim_cpu(ReduceOp op, const Tensor& out, const Tensor& in, int dim);
// `out` is rank 0; `in` has at least one element.
void reduce_all_cpu(ReduceOp op, const Tensor& out, const Tensor& in);

#if EMBER_WITH_CUDA
void reduce_dim_cuda(ReduceOp op, const Tensor& out, const Tensor& in, int dim,
                     StreamHandle stream);
void reduce_all_cuda(ReduceOp op, const Tensor& out, const Tensor& in, StreamHandle stream);
#endif

}  // namespace ember::ops::detail
