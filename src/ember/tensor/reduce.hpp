// Reductions along one dimension and over all elements, on the CPU (OpenMP) and CUDA (CUB).
#pragma once

#include "ember/core/device.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::ops {

enum class ReduceOp : std::uint8_t { Sum, Mean, Max, Min };
const char* op_name(ReduceOp op);

// Reduces `dim` of `in` into `out` (in's shape without `dim`, or with size 1 there). Floating
// inputs accumulate in at least f32 (f64 for f64); integer sums in 64 bits. Mean of an empty
// dimension is NaN; Max/Min of an empty dimension is an error.
void reduce(ReduceOp op, const Tensor& out, const Tensor& in, int dim,
            StreamHandle stream = nullptr);
Tensor reduce(ReduceOp op, const Tensor& in, int dim, bool keep_dim = false,
              StreamHandle stream = nullptr);
// All elements into a rank-0 tensor of in's dtype.
Tensor reduce_all(ReduceOp op, const Tensor& in, StreamHandle stream = nullptr);

inline Tensor sum(const Tensor& in, int dim, bool keep_dim = false) {
  return reduce(ReduceOp::Sum, in, dim, keep_dim);
}
inline Tensor mean(const Tensor& in, int dim, bool keep_dim = false) {
  return reduce(ReduceOp::Mean, in, dim, keep_dim);
}
inline Tensor sum(const Tensor& in) { return reduce_all(ReduceOp::Sum, in); }
inline Tensor mean(const Tensor& in) { return reduce_all(ReduceOp::Mean, in); }

}  // namespace ember::ops
