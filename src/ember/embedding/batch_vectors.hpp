// A batch's vectors (forward outputs, output gradients: f32, f16 or bf16) as the kernels and the
// collectives take them: the kernels' name of their dtype, and a contiguous tensor of them as
// 32-bit words with its element counts as word counts, for collectives that move 32-bit
// elements (SparseEmbedding::exchange_dtype keeps 16-bit rows even, so they fill whole words).
#pragma once

#include <cstdint>
#include <vector>

#include "ember/embedding/embedding_kernels.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::embedding {

inline kernels::ValueType vector_type(DType dtype) {
  return dtype == DType::F16    ? kernels::ValueType::F16
         : dtype == DType::BF16 ? kernels::ValueType::BF16
                                : kernels::ValueType::F32;
}

inline Tensor as_words(const Tensor& t) {
  return t.element_size() == 4 ? t.reshape({-1}) : t.reshape({-1}).view_as(DType::U32);
}

inline std::vector<std::int64_t> word_counts(std::vector<std::int64_t> counts, const Tensor& t) {
  for (auto& c : counts)
    c = c * static_cast<std::int64_t>(t.element_size()) / 4;
  return counts;
}

}  // namespace ember::embedding
