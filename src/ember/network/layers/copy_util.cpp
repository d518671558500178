#include "ember/network/layers/copy_util.hpp"

#include <cstring>

#include "ember/core/error.hpp"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::detail {

namespace {
template <class T>
void cpu_copy(std::int64_t batch, std::int64_t rows, std::int64_t cols, const T* src,
              std::int64_t src_bs, std::int64_t src_rs, T* dst, std::int64_t dst_bs,
              std::int64_t dst_rs, bool accumulate) {
#pragma omp parallel for collapse(2) schedule(static) if (batch * rows * cols >= 65536)
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* s = src + b * src_bs + r * src_rs;
      T* d = dst + b * dst_bs + r * dst_rs;
      if (accumulate) {
        for (std::int64_t c = 0; c < cols; ++c)
          d[c] += s[c];
      } else {
        for (std::int64_t c = 0; c < cols; ++c)
          d[c] = s[c];
      }
    }
  }
}
template <class T>
void cpu_join(std::int64_t rows, std::int64_t cols, const std::vector<ColumnPiece>& pieces, T* dst,
              bool accumulate) {
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
  for (std::int64_t r = 0; r < rows; ++r) {
    T* out = dst + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      T sum = T(0);
      for (const ColumnPiece& p : pieces) {
        if (c >= p.begin && c < p.begin + p.width)
          sum += static_cast<const T*>(p.data)[r * p.width + c - p.begin];
      }
      out[c] = accumulate ? out[c] + sum : sum;
    }
  }
}

template <class T>
void cpu_split(std::int64_t rows, std::int64_t cols, const T* src,
               const std::vector<ColumnPiece>& pieces) {
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
  for (std::int64_t r = 0; r < rows; ++r) {
    for (const ColumnPiece& p : pieces) {
      std::memcpy(static_cast<T*>(p.data) + r * p.width, src + r * cols + p.begin,
                  static_cast<std::size_t>(p.width) * sizeof(T));
    }
  }
}

void check_pieces(std::int64_t cols, const std::vector<ColumnPiece>& pieces) {
  for (const ColumnPiece& p : pieces) {
    EMBER_CHECK(p.begin >= 0 && p.width >= 0 && p.begin + p.width <= cols, "column piece [",
                p.begin, ", ", p.begin + p.width, ") outside [0, ", cols, ")");
  }
}

// f32 and f64 on the CPU: `f(TypeTag<T>{})`.
template <class F>
void dispatch_cpu_copy(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::F32:
      f(TypeTag<float>{});
      return;
    case DType::F64:
      f(TypeTag<double>{});
      return;
    default:
      EMBER_THROW(what, " on the CPU: f32 or f64, not ", dtype_name(dtype));
  }
}

}  // namespace

void join_columns(bool cuda, DType dtype, std::int64_t rows, std::int64_t cols,
                  const std::vector<ColumnPiece>& pieces, void* dst, bool accumulate,
                  StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  check_pieces(cols, pieces);
  if (cuda) {
#if EMBER_WITH_CUDA
    cuda::join_columns(dtype, rows, cols, pieces.data(), static_cast<int>(pieces.size()), dst,
                       accumulate, stream);
#else
    throw_cuda_unavailable("join_columns");
#endif
    return;
  }
  (void)stream;
  dispatch_cpu_copy(dtype, "join_columns", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_join(rows, cols, pieces, static_cast<T*>(dst), accumulate);
  });
}

void split_columns(bool cuda, DType dtype, std::int64_t rows, std::int64_t cols, const void* src,
                   const std::vector<ColumnPiece>& pieces, StreamHandle stream) {
  if (rows <= 0 || cols <= 0 || pieces.empty()) return;
  check_pieces(cols, pieces);
  if (cuda) {
#if EMBER_WITH_CUDA
    cuda::split_columns(dtype, rows, cols, src, pieces.data(), static_cast<int>(pieces.size()),
                        stream);
#else
    throw_cuda_unavailable("split_columns");
#endif
    return;
  }
  (void)stream;
  dispatch_cpu_copy(dtype, "split_columns", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_split(rows, cols, static_cast<const T*>(src), pieces);
  });
}

void copy_3d(bool cuda, DType dtype, std::int64_t batch, std::int64_t rows, std::int64_t cols,
             const void* src, std::int64_t src_bs, std::int64_t src_rs, void* dst,
             std::int64_t dst_bs, std::int64_t dst_rs, bool accumulate, StreamHandle stream) {
  if (batch <= 0 || rows <= 0 || cols <= 0) return;
  if (cuda) {
#if EMBER_WITH_CUDA
    cuda::copy_3d(dtype, batch, rows, cols, src, src_bs, src_rs, dst, dst_bs, dst_rs, accumulate,
                  stream);
#else
    throw_cuda_unavailable("copy_3d");
#endif
    return;
  }
  switch (dtype) {
    case DType::F32:
      cpu_copy(batch, rows, cols, static_cast<const float*>(src), src_bs, src_rs,
               static_cast<float*>(dst), dst_bs, dst_rs, accumulate);
      return;
    case DType::F64:
      cpu_copy(batch, rows, cols, static_cast<const double*>(src), src_bs, src_rs,
               static_cast<double*>(dst), dst_bs, dst_rs, accumulate);
      return;
    default:
      EMBER_THROW("copy_3d on the CPU: f32 or f64, not ", dtype_name(dtype));
  }
}

void fill_zero(bool cuda, DType dtype, std::int64_t n, void* dst, StreamHandle stream) {
  if (n <= 0) return;
  if (cuda) {
#if EMBER_WITH_CUDA
    cuda::fill_zero(dtype, n, dst, stream);
#else
    throw_cuda_unavailable("fill_zero");
#endif
    return;
  }
  std::memset(dst, 0, static_cast<std::size_t>(n) * dtype_size(dtype));
}

}  // namespace ember::network::detail
