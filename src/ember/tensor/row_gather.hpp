// Vectors read through an index instead of from a dense tensor: how one layer lets another read
// its rows in place. A one-rank embedding hands the dot interaction its table and, per (sample,
// slot), where that slot's vector is, instead of pooling a copy of every row first (a copy the
// interaction reads once forward and once backward; docs/training.md, "The interaction reads the
// table").
//
// Index code i of vector v:
//   i >= 0   row i of `table` (vec_size values of the reader's dtype);
//   i == -1  zeros (a bag without entries);
//   i <= -2  row -2 - i of `dense` (a bag of several entries, pooled there by the writer).
#pragma once

#include <cstdint>

namespace ember {

struct RowGather {
  const void* table = nullptr;          // rows of the reader's width and dtype
  const std::int32_t* index = nullptr;  // one code per vector (see above)
  bool defined() const { return index != nullptr; }
};

inline constexpr std::int32_t kGatherZeroRow = -1;

// The code of row `r` of the dense tensor, and back (r < 2^31 - 2).
constexpr std::int32_t gather_dense_code(std::int64_t r) {
  return static_cast<std::int32_t>(-2 - r);
}
constexpr std::int64_t gather_dense_row(std::int32_t code) {
  return -2 - static_cast<std::int64_t>(code);
}

}  // namespace ember
