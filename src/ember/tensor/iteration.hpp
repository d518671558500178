// How N operands of one (broadcast) shape are walked: dimensions of size 1 dropped, adjacent
// dimensions merged wherever every operand's strides allow it, so that the common cases become
// one flat loop (all contiguous) or a short loop nest. Shared by the CPU and CUDA apply code.
#pragma once

#include <array>
#include <cstdint>

#include "ember/tensor/shape.hpp"

namespace ember {

template <int N>
struct IterationPlan {
  int rank = 0;                                        // after coalescing; 0 means a scalar
  std::array<std::int64_t, kMaxRank> sizes{};          // innermost dimension last
  std::array<std::array<std::int64_t, kMaxRank>, N> strides{};  // per operand, in elements
  std::int64_t numel = 1;

  // Every operand dense and in the same row-major order: one flat index serves all.
  bool contiguous() const {
    if (rank == 0) return true;
    if (rank != 1) return false;
    for (int k = 0; k < N; ++k) {
      if (strides[k][0] != 1) return false;
    }
    return true;
  }
};

// `operand_strides[k]` are operand k's strides over `shape` (0 for broadcast dimensions).
template <int N>
IterationPlan<N> make_iteration_plan(const Shape& shape,
                                     const std::array<Strides, N>& operand_strides) {
  IterationPlan<N> plan;
  plan.numel = shape.numel();
  // Drop size-1 dimensions: their strides never matter.
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    plan.sizes[plan.rank] = shape[d];
    for (int k = 0; k < N; ++k) plan.strides[k][plan.rank] = operand_strides[k][d];
    ++plan.rank;
  }
  if (plan.numel == 0) {
    plan.rank = 1;
    plan.sizes[0] = 0;
    for (int k = 0; k < N; ++k) plan.strides[k][0] = 1;
    return plan;
  }
  // Merge dimension d into d+1 (its inner neighbour) when, for every operand, stepping once
  // along d equals stepping size[d+1] times along d+1.
  int out = 0;
  for (int d = 1; d < plan.rank; ++d) {
    bool mergeable = true;
    for (int k = 0; k < N; ++k) {
      if (plan.strides[k][out] != plan.strides[k][d] * plan.sizes[d]) {
        mergeable = false;
        break;
      }
    }
    if (mergeable) {
      plan.sizes[out] *= plan.sizes[d];
      for (int k = 0; k < N; ++k) plan.strides[k][out] = plan.strides[k][d];
    } else {
      ++out;
      plan.sizes[out] = plan.sizes[d];
      for (int k = 0; k < N; ++k) plan.strides[k][out] = plan.strides[k][d];
    }
  }
  if (plan.rank > 0) plan.rank = out + 1;
  return plan;
}

}  // namespace ember
