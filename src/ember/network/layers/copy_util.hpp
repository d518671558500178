// Internal: strided block copies on either device, the building block of the shape layers.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/dtype.hpp"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::detail {

// For b < batch, r < rows, c < cols:
//   dst[b * dst_bs + r * dst_rs + c] (=|+=) src[b * src_bs + r * src_rs + c]
// Pointers are to elements of `dtype`; CUDA pointers when `cuda`.
void copy_3d(bool cuda, DType dtype, std::int64_t batch, std::int64_t rows, std::int64_t cols,
             const void* src, std::int64_t src_bs, std::int64_t src_rs, void* dst,
             std::int64_t dst_bs, std::int64_t dst_rs, bool accumulate, StreamHandle stream);
void fill_zero(bool cuda, DType dtype, std::int64_t n, void* dst, StreamHandle stream);

// Pieces of the columns of a dense [rows, cols] matrix (launchers.hpp): piece p is a dense
// [rows, width] matrix standing for columns [begin, begin + width).
using ColumnPiece = cuda::ColumnPiece;
// dst[r, c] (=|+=) the sum of piece[r, c - begin] over the pieces covering column c, in piece
// order (0 where none does): one pass over dst, whatever the pieces.
void join_columns(bool cuda, DType dtype, std::int64_t rows, std::int64_t cols,
                  const std::vector<ColumnPiece>& pieces, void* dst, bool accumulate,
                  StreamHandle stream);
// piece[r, c - begin] = src[r, c] for every piece: one pass over src.
void split_columns(bool cuda, DType dtype, std::int64_t rows, std::int64_t cols, const void* src,
                   const std::vector<ColumnPiece>& pieces, StreamHandle stream);

// Element `i` of a buffer of `dtype`.
inline const void* element(const void* base, DType dtype, std::int64_t i) {
  return static_cast<const char*>(base) + i * static_cast<std::int64_t>(dtype_size(dtype));
}
inline void* element(void* base, DType dtype, std::int64_t i) {
  return static_cast<char*>(base) + i * static_cast<std::int64_t>(dtype_size(dtype));
}

}  // namespace ember::network::detail
