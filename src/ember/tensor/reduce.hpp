// Reductions along one dimension and over all elements, on the CPU (OpenMP) and CUDA (CUB for
// all elements, hand-written kernels along one dimension).
//
// The result has the input's dtype. Floating inputs accumulate in f64 on both devices; integer
// inputs in 64 bits (sums wrap into the dtype at the end; an integer mean is the 64-bit sum
// divided by the count, truncated toward zero). Max and Min propagate NaN. Bool inputs are
// rejected (cast to an integer dtype to count). Over an empty range: Sum is 0, Mean is NaN for
// floating dtypes and an error for integer ones, Max and Min are errors.
#pragma once

#include "ember/core/device.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::ops {

enum class ReduceOp : std::uint8_t { Sum, Mean, Max, Min };
const char* op_name(ReduceOp op);

// Reduces `dim` of `in` into `out` (in's shape without `dim`, or with size 1 there; any strides).
void reduce(ReduceOp op, const Tensor& out, const Tensor& in, int dim,
            StreamHandle stream = nullptr);
Tensor reduce(ReduceOp op, const Tensor& in, int dim, bool keep_dim = false,
              StreamHandle stream = nullptr);
// All elements into a rank-0 tensor of in's dtype at in's place.
Tensor reduce_all(ReduceOp op, const Tensor& in, StreamHandle stream = nullptr);

inline Tensor sum(const Tensor& in, int dim, bool keep_dim = false) {
  return reduce(ReduceOp::Sum, in, dim, keep_dim);
}
inline Tensor mean(const Tensor& in, int dim, bool keep_dim = false) {
  return reduce(ReduceOp::Mean, in, dim, keep_dim);
}
inline Tensor max(const Tensor& in, int dim, bool keep_dim = false) {
  return reduce(ReduceOp::Max, in, dim, keep_dim);
}
inline Tensor min(const Tensor& in, int dim, bool keep_dim = false) {
  return reduce(ReduceOp::Min, in, dim, keep_dim);
}
inline Tensor sum(const Tensor& in) {
  return reduce_all(ReduceOp::Sum, in);
}
inline Tensor mean(const Tensor& in) {
  return reduce_all(ReduceOp::Mean, in);
}
inline Tensor max(const Tensor& in) {
  return reduce_all(ReduceOp::Max, in);
}
inline Tensor min(const Tensor& in) {
  return reduce_all(ReduceOp::Min, in);
}

}  // namespace ember::ops
