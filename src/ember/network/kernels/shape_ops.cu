// Layout kernels of the network layer: strided block copies (Concat, Slice, Reshape, ...),
// row gathers, reductions along an axis, softmax.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::cuda {

// The shared launch sizing, conversions and reductions (device_utils.cuh).
using namespace detail;

namespace {

// a + b, each value added in f32 and rounded once to T: for E = T one value, for E = uint4 the
// 16 / sizeof(T) values it holds (the same per value, so both give the same bits).
template <class T, class E>
__device__ __forceinline__ E add_elements(E a, E b) {
  if constexpr (std::is_same_v<E, T>) {
    return from_f<T>(to_f(a) + to_f(b));
  } else {
    T* x = reinterpret_cast<T*>(&a);
    const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
    for (int k = 0; k < static_cast<int>(sizeof(E) / sizeof(T)); ++k)
      x[k] = from_f<T>(to_f(x[k]) + to_f(y[k]));
    return a;
  }
}

// Elements each thread has in flight: one load at a time per thread leaves too few bytes in
// flight to cover the memory's latency (2-byte copies of DCN's 429-wide rows ran at a third of
// the bandwidth with one), so each thread loads kUnroll elements before it stores them.
constexpr int kUnroll = 4;

// A group of `lanes` threads (a power of two up to a warp, the row's width rounded up) per piece
// of a (b, r) row: the piece's start is worked out once, with a few divisions, instead of two
// 64-bit divisions per element (which made the copy compute-bound), and the group's lanes take
// consecutive columns, so its accesses are coalesced. Rows longer than a piece are cut into
// pieces so that one long row still spreads over the grid. T is the activation type, E the
// element moved: T, or 16 bytes (uint4) where the layout allows.
template <class T, class E>
__global__ void copy_rows_kernel(std::int64_t row_count, std::int64_t rows, std::int64_t cols,
                                 std::int64_t piece, int lanes, const E* src, std::int64_t src_bs,
                                 std::int64_t src_rs, E* dst, std::int64_t dst_bs,
                                 std::int64_t dst_rs, bool accumulate) {
  const std::int64_t groups = global_stride() / lanes;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  const std::int64_t pieces = (cols + piece - 1) / piece, items = row_count * pieces;
  for (std::int64_t item = global_thread() / lanes; item < items; item += groups) {
    // Rows of one piece and (b, r) layouts of one row each are the common cases (Concat and
    // Slice): there the item is the row and the row is b, with no division at all, which
    // matters for narrow rows (DeepFM's Slice of 11-wide rows into 10 and 1).
    const std::int64_t row = pieces == 1 ? item : item / pieces;
    const std::int64_t begin = pieces == 1 ? 0 : (item - row * pieces) * piece;
    const std::int64_t end = begin + piece < cols ? begin + piece : cols;
    const std::int64_t b = rows == 1 ? row : row / rows, r = row - b * rows;
    const E* from = src + b * src_bs + r * src_rs;
    E* to = dst + b * dst_bs + r * dst_rs;
    std::int64_t c = begin + lane;
    for (; c + (kUnroll - 1) * lanes < end; c += kUnroll * lanes) {
      E v[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        v[k] = from[c + k * lanes];
      if (accumulate) {
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
          v[k] = add_elements<T>(to[c + k * lanes], v[k]);
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        to[c + k * lanes] = v[k];
    }
    for (; c < end; c += lanes) {
      E v = from[c];
      if (accumulate) v = add_elements<T>(to[c], v);
      to[c] = v;
    }
  }
}

// Narrow rows (DeepFM's Slice of 11-wide rows into 10 and 1): a thread per element, kUnroll
// elements in flight per thread, instead of a group of lanes per row, most of them idle (a 10-wide
// row took 16 lanes with one 2-byte load each, a 1-wide row one thread). Consecutive threads
// take consecutive elements of consecutive rows, so the accesses stay coalesced; the index math
// is 32-bit (the caller checks that count fits), which keeps the divisions cheap.
template <class T, class E>
__global__ void copy_narrow_kernel(std::uint32_t count, std::uint32_t rows, std::uint32_t cols,
                                   const E* src, std::int64_t src_bs, std::int64_t src_rs, E* dst,
                                   std::int64_t dst_bs, std::int64_t dst_rs, bool accumulate) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t first = blockIdx.x * blockDim.x + threadIdx.x; first < count;
       first += kUnroll * stride) {
    E v[kUnroll];
    std::int64_t to[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::uint32_t i = first + static_cast<std::uint32_t>(k) * stride;
      to[k] = -1;
      if (i < count) {
        const std::uint32_t row = i / cols, c = i - row * cols;
        const std::uint32_t b = rows == 1 ? row : row / rows, r = row - b * rows;
        v[k] = src[b * src_bs + r * src_rs + c];
        to[k] = b * dst_bs + r * dst_rs + c;
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (to[k] < 0) continue;
      dst[to[k]] = accumulate ? add_elements<T>(dst[to[k]], v[k]) : v[k];
    }
  }
}

// Rows of at most this many elements (moved units) take copy_narrow_kernel.
constexpr std::int64_t kNarrowRow = 16;

// A group of `lanes` threads per destination row, kUnroll elements in flight each, as
// copy_rows_kernel; narrow rows a thread per element (copy_narrow_kernel).
template <class T>
__global__ void pad_copy_2d_kernel(std::int64_t src_rows, std::int64_t src_cols, const T* src,
                                   std::int64_t src_ld, std::int64_t dst_rows,
                                   std::int64_t dst_cols, int lanes, T* dst) {
  const std::int64_t groups = global_stride() / lanes;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  for (std::int64_t r = global_thread() / lanes; r < dst_rows; r += groups) {
    const T* from = src + r * src_ld;
    T* to = dst + r * dst_cols;
    const std::int64_t kept = r < src_rows ? src_cols : 0;
    std::int64_t c = lane;
    for (; c + (kUnroll - 1) * lanes < dst_cols; c += kUnroll * lanes) {
      T v[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const std::int64_t at = c + k * lanes;
        v[k] = at < kept ? from[at] : from_f<T>(0.0f);
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        to[c + k * lanes] = v[k];
    }
    for (; c < dst_cols; c += lanes)
      to[c] = c < kept ? from[c] : from_f<T>(0.0f);
  }
}

// Column pieces (join_columns, split_columns) as kernel parameters: up to N of them, with
// begin and width in the kernel's index type I (unsigned: c - begin < width tests both ends).
template <class T, class I, int N>
struct PieceTable {
  using Index = I;
  static constexpr int kN = N;
  T* data[N];
  I begin[N], width[N];
  I start[N];  // split_columns: the piece's first unit of the grid's index space
  int count;
};

// The element type a thread moves in one access: a Pack of V elements, or one element.
template <class T, int V>
using Moved = std::conditional_t<V == 1, T, Pack<T>>;

// A thread per V consecutive elements of the joined matrix [rows, cols] (flat index `first`):
// its row and column are worked out once, then stepped; each element sums the pieces that
// cover its column and the V results go out in one 16-byte store (V > 1: dst is aligned).
// Consecutive threads take consecutive elements, so reads of every piece stay coalesced even
// for pieces one column wide (DeepFM's Slice of 11-wide rows into 10 and 1).
template <class T, class I, int N, int V>
__global__ void join_columns_kernel(I total, I cols, PieceTable<T, I, N> p, T* dst,
                                    bool accumulate) {
  const I stride = static_cast<I>(gridDim.x) * blockDim.x * V;
  for (I first = (static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x) * V; first < total;
       first += stride) {
    I row = first / cols, c = first - row * cols;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float sum = 0.0f;
      if (first + j < total) {
#pragma unroll
        for (int q = 0; q < N; ++q) {
          const I at = c - p.begin[q];
          if (q < p.count && at < p.width[q]) sum += to_f(p.data[q][row * p.width[q] + at]);
        }
      }
      v[j] = sum;
      if (++c == cols) {
        c = 0;
        ++row;
      }
    }
    if (V > 1 && first + V <= total) {
      auto* to = reinterpret_cast<Moved<T, V>*>(dst + first);
      Moved<T, V> out;
      T* o = reinterpret_cast<T*>(&out);
      if (accumulate) {
        out = *to;
#pragma unroll
        for (int j = 0; j < V; ++j)
          o[j] = from_f<T>(to_f(o[j]) + v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          o[j] = from_f<T>(v[j]);
      }
      *to = out;
    } else {
      for (int j = 0; j < V && first + j < total; ++j)
        dst[first + j] = from_f<T>(accumulate ? to_f(dst[first + j]) + v[j] : v[j]);
    }
  }
}

// The inverse, written piece by piece: a thread per V consecutive elements of one piece (the
// pieces follow each other in the grid's index space, each in whole units of V, from
// p.start[q]), which reads them out of src's rows element by element (consecutive threads read
// neighbouring elements: coalesced) and stores them in one 16-byte access (V > 1: every piece is
// 16-byte aligned). A thread per element of src instead, storing into the pieces, measured
// 2x slower than the copies it replaced: a warp's 2-byte stores at a 16-byte stride each touch
// a sector of their own.
template <class T, class I, int N, int V>
__global__ void split_columns_kernel(I rows, I cols, const T* src, PieceTable<T, I, N> p, I units) {
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I u = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    int q = 0;
#pragma unroll
    for (int k = 1; k < N; ++k) {
      if (k < p.count && u >= p.start[k]) q = k;
    }
    const I width = p.width[q], size = rows * width, first = (u - p.start[q]) * V;
    const T* from = src + p.begin[q];
    I row = first / width, c = first - row * width;
    Moved<T, V> pack;
    T* v = reinterpret_cast<T*>(&pack);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (first + j < size) v[j] = from[row * cols + c];
      if (++c == width) {
        c = 0;
        ++row;
      }
    }
    T* to = p.data[q] + first;
    if (V > 1 && first + V <= size) {
      *reinterpret_cast<Moved<T, V>*>(to) = pack;
    } else {
      for (int j = 0; j < V && first + j < size; ++j)
        to[j] = v[j];
    }
  }
}

template <class T>
__global__ void gather_rows_kernel(std::int64_t n_out, std::int64_t row_len,
                                   const std::int64_t* indices, const T* in, T* out) {
  const std::int64_t n = n_out * row_len;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t j = i / row_len, c = i % row_len;
    out[i] = in[indices[j] * row_len + c];
  }
}

template <class T>
__global__ void gather_rows_backward_kernel(std::int64_t n_in, std::int64_t row_len,
                                            const std::int64_t* offsets,
                                            const std::int64_t* inverse, const T* dout, T* din) {
  const std::int64_t n = n_in * row_len;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t r = i / row_len, c = i % row_len;
    float s = 0.0f;
    for (std::int64_t k = offsets[r]; k < offsets[r + 1]; ++k)
      s += to_f(dout[inverse[k] * row_len + c]);
    din[i] = from_f<T>(s);
  }
}

template <class T>
__global__ void reduce_axis_kernel(std::int64_t outer, std::int64_t axis, std::int64_t inner,
                                   float scale, const T* in, T* out) {
  const std::int64_t n = outer * inner;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t o = i / inner, k = i % inner;
    float s = 0.0f;
    for (std::int64_t a = 0; a < axis; ++a)
      s += to_f(in[(o * axis + a) * inner + k]);
    out[i] = from_f<T>(s * scale);
  }
}

template <class T>
__global__ void reduce_axis_backward_kernel(std::int64_t outer, std::int64_t axis,
                                            std::int64_t inner, float scale, const T* dout,
                                            T* din) {
  const std::int64_t n = outer * axis * inner;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t k = i % inner, o = i / (axis * inner);
    din[i] = from_f<T>(to_f(dout[o * inner + k]) * scale);
  }
}

// One warp per row.
template <class T>
__global__ void softmax_kernel(std::int64_t rows, std::int64_t cols, const T* x, T* y) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_thread() / 32; r < rows; r += warps) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float m = -INFINITY;
    for (std::int64_t c = lane; c < cols; c += 32)
      m = fmaxf(m, to_f(xr[c]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32)
      s += expf(to_f(xr[c]) - m);
    s = warp_sum(s);
    const float inv = 1.0f / s;
    for (std::int64_t c = lane; c < cols; c += 32)
      yr[c] = from_f<T>(expf(to_f(xr[c]) - m) * inv);
  }
}

template <class T>
__global__ void softmax_backward_kernel(std::int64_t rows, std::int64_t cols, const T* y,
                                        const T* dy, T* dx) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_thread() / 32; r < rows; r += warps) {
    float dot = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32)
      dot += to_f(dy[r * cols + c]) * to_f(y[r * cols + c]);
    dot = warp_sum(dot);
    for (std::int64_t c = lane; c < cols; c += 32) {
      const std::int64_t i = r * cols + c;
      dx[i] = from_f<T>(to_f(y[i]) * (to_f(dy[i]) - dot));
    }
  }
}

// Threads per row for a row of `cols` elements: the width rounded up to a power of two, at most
// a warp (narrow rows share a warp instead of leaving most of its lanes idle).
int row_lanes(std::int64_t cols) {
  int lanes = 1;
  while (lanes < 32 && lanes < cols)
    lanes *= 2;
  return lanes;
}

}  // namespace

void copy_3d(DType dtype, std::int64_t batch, std::int64_t rows, std::int64_t cols, const void* src,
             std::int64_t src_bs, std::int64_t src_rs, void* dst, std::int64_t dst_bs,
             std::int64_t dst_rs, bool accumulate, StreamHandle stream) {
  if (batch * rows * cols <= 0) return;
  // Rows that follow each other in both layouts are one longer row.
  if (rows > 1 && src_rs == cols && dst_rs == cols) {
    cols *= rows;
    rows = 1;
  }
  if (rows == 1) src_rs = dst_rs = 0;
  // So are batch entries that follow each other (pieces spread one long row over the grid).
  if (rows == 1 && batch > 1 && src_bs == cols && dst_bs == cols) {
    cols *= batch;
    batch = 1;
  }
  if (batch == 1) src_bs = dst_bs = 0;
  const std::int64_t bytes = static_cast<std::int64_t>(dtype_size(dtype));
  if (!accumulate && rows == 1 && batch == 1) {
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(batch * cols * bytes),
                                     cudaMemcpyDeviceToDevice, stream));
    return;
  }
  auto launch = [&](auto type, auto element, std::int64_t per) {
    using T = typename decltype(type)::type;
    using E = typename decltype(element)::type;
    const std::int64_t n = cols / per;
    // Up to 2^31 elements the narrow kernel's 32-bit indices also hold its last pass's (the grid
    // is at most a few million threads).
    const std::int64_t count = batch * rows * n;
    if (n <= kNarrowRow && count <= INT32_MAX) {
      copy_narrow_kernel<T, E><<<grid_for((count + kUnroll - 1) / kUnroll), kThreads, 0, stream>>>(
          static_cast<std::uint32_t>(count), static_cast<std::uint32_t>(rows),
          static_cast<std::uint32_t>(n), static_cast<const E*>(src), src_bs / per, src_rs / per,
          static_cast<E*>(dst), dst_bs / per, dst_rs / per, accumulate);
      EMBER_CUDA_CHECK_LAUNCH();
      return;
    }
    const int lanes = row_lanes(n);
    // Pieces of 32 unrolled passes of the group: a 429-wide row is one piece.
    const std::int64_t piece = static_cast<std::int64_t>(lanes) * kUnroll * 32;
    const std::int64_t items = batch * rows * ((n + piece - 1) / piece);
    copy_rows_kernel<T, E><<<grid_for(items * lanes), kThreads, 0, stream>>>(
        batch * rows, rows, n, piece, lanes, static_cast<const E*>(src), src_bs / per, src_rs / per,
        static_cast<E*>(dst), dst_bs / per, dst_rs / per, accumulate);
    EMBER_CUDA_CHECK_LAUNCH();
  };
  // 16 bytes an access where every row start and width is a multiple of 16 bytes.
  constexpr std::int64_t kVector = 16;
  const bool vector = (cols * bytes) % kVector == 0 && (src_bs * bytes) % kVector == 0 &&
                      (src_rs * bytes) % kVector == 0 && (dst_bs * bytes) % kVector == 0 &&
                      (dst_rs * bytes) % kVector == 0 &&
                      reinterpret_cast<std::uintptr_t>(src) % kVector == 0 &&
                      reinterpret_cast<std::uintptr_t>(dst) % kVector == 0;
  dispatch_act(dtype, "copy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (vector) {
      launch(tag, TypeTag<uint4>{}, kVector / bytes);
    } else {
      launch(tag, tag, 1);
    }
  });
}

void pad_copy_2d(DType dtype, std::int64_t src_rows, std::int64_t src_cols, const void* src,
                 std::int64_t src_ld, std::int64_t dst_rows, std::int64_t dst_cols, void* dst,
                 StreamHandle stream) {
  const std::int64_t n = dst_rows * dst_cols;
  if (n <= 0) return;
  const int lanes = row_lanes(dst_cols);
  dispatch_act(dtype, "padded copy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    pad_copy_2d_kernel<T><<<grid_for(dst_rows * lanes), kThreads, 0, stream>>>(
        src_rows, src_cols, static_cast<const T*>(src), src_ld, dst_rows, dst_cols, lanes,
        static_cast<T*>(dst));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void fill_zero(DType dtype, std::int64_t n, void* out, StreamHandle stream) {
  if (n <= 0) return;
  EMBER_CUDA_CHECK(
      cudaMemsetAsync(out, 0, static_cast<std::size_t>(n) * dtype_size(dtype), stream));
}

namespace {

// Runs `launch(table, first)` for each run of up to kMaxColumnPieces pieces (one run, with no
// piece, where there is none), with the kernel's types chosen for the call: 32-bit indices
// where the matrix and the grid's last step fit them, tables of 2 pieces (the common Slice and
// Concat) or kMaxColumnPieces.
template <class T, class F>
void for_piece_tables(std::int64_t rows, std::int64_t cols, const ColumnPiece* pieces, int count,
                      F&& launch) {
  auto run = [&](auto index, auto n, int first, int taken) {
    using I = typename decltype(index)::type;
    PieceTable<T, I, decltype(n)::value> t{};
    t.count = taken;
    for (int q = 0; q < taken; ++q) {
      t.data[q] = static_cast<T*>(pieces[first + q].data);
      t.begin[q] = static_cast<I>(pieces[first + q].begin);
      t.width[q] = static_cast<I>(pieces[first + q].width);
    }
    launch(t, first);
  };
  // The index spaces: the joined matrix, and the pieces one after another (split_columns).
  std::int64_t extent = rows * cols, covered = 0;
  for (int q = 0; q < count; ++q)
    covered += rows * pieces[q].width;
  const bool small = std::max(extent, covered) < (std::int64_t{1} << 31);
  const int runs = std::max(1, (count + kMaxColumnPieces - 1) / kMaxColumnPieces);
  for (int k = 0; k < runs; ++k) {
    const int first = k * kMaxColumnPieces;
    const int taken = std::max(0, std::min(count - first, kMaxColumnPieces));
    if (taken <= 2) {
      if (small) {
        run(TypeTag<std::uint32_t>{}, std::integral_constant<int, 2>{}, first, taken);
      } else {
        run(TypeTag<std::uint64_t>{}, std::integral_constant<int, 2>{}, first, taken);
      }
    } else if (small) {
      run(TypeTag<std::uint32_t>{}, std::integral_constant<int, kMaxColumnPieces>{}, first, taken);
    } else {
      run(TypeTag<std::uint64_t>{}, std::integral_constant<int, kMaxColumnPieces>{}, first, taken);
    }
  }
}

}  // namespace

void join_columns(DType dtype, std::int64_t rows, std::int64_t cols, const ColumnPiece* pieces,
                  int count, void* dst, bool accumulate, StreamHandle stream) {
  const std::int64_t total = rows * cols;
  if (total <= 0) return;
  dispatch_act(dtype, "column join", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = Pack<T>::kSize;
    const bool vector = aligned16(dst);
    for_piece_tables<T>(rows, cols, pieces, count, [&](auto table, int first) {
      using I = typename decltype(table)::Index;
      // Later runs of pieces add to what the first wrote.
      const bool add = accumulate || first > 0;
      if (vector) {
        join_columns_kernel<T, I, decltype(table)::kN, V>
            <<<grid_for(total / V + 1), kThreads, 0, stream>>>(
                static_cast<I>(total), static_cast<I>(cols), table, static_cast<T*>(dst), add);
      } else {
        join_columns_kernel<T, I, decltype(table)::kN, 1><<<grid_for(total), kThreads, 0, stream>>>(
            static_cast<I>(total), static_cast<I>(cols), table, static_cast<T*>(dst), add);
      }
      EMBER_CUDA_CHECK_LAUNCH();
    });
  });
}

void split_columns(DType dtype, std::int64_t rows, std::int64_t cols, const void* src,
                   const ColumnPiece* pieces, int count, StreamHandle stream) {
  const std::int64_t total = rows * cols;
  if (total <= 0 || count <= 0) return;
  dispatch_act(dtype, "column split", [&](auto tag) {
    using T = typename decltype(tag)::type;
    bool aligned = true;
    for (int q = 0; q < count; ++q)
      aligned = aligned && aligned16(pieces[q].data);
    for_piece_tables<T>(rows, cols, pieces, count, [&](auto table, int) {
      using I = typename decltype(table)::Index;
      auto launch = [&](auto vector) {
        constexpr int V = decltype(vector)::value;
        std::int64_t units = 0;
        for (int q = 0; q < table.count; ++q) {
          table.start[q] = static_cast<I>(units);
          units += (rows * static_cast<std::int64_t>(table.width[q]) + V - 1) / V;
        }
        split_columns_kernel<T, I, decltype(table)::kN, V>
            <<<grid_for(units), kThreads, 0, stream>>>(static_cast<I>(rows), static_cast<I>(cols),
                                                       static_cast<const T*>(src), table,
                                                       static_cast<I>(units));
        EMBER_CUDA_CHECK_LAUNCH();
      };
      if (aligned) {
        launch(std::integral_constant<int, Pack<T>::kSize>{});
      } else {
        launch(std::integral_constant<int, 1>{});
      }
    });
  });
}

void gather_rows(DType dtype, std::int64_t n_out, std::int64_t row_len, const std::int64_t* indices,
                 const void* in, void* out, StreamHandle stream) {
  const std::int64_t n = n_out * row_len;
  if (n <= 0) return;
  dispatch_act(dtype, "Gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather_rows_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        n_out, row_len, indices, static_cast<const T*>(in), static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void gather_rows_backward(DType dtype, std::int64_t n_in, std::int64_t row_len,
                          const std::int64_t* offsets, const std::int64_t* inverse,
                          const void* dout, void* din, StreamHandle stream) {
  const std::int64_t n = n_in * row_len;
  if (n <= 0) return;
  dispatch_act(dtype, "Gather backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather_rows_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        n_in, row_len, offsets, inverse, static_cast<const T*>(dout), static_cast<T*>(din));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void reduce_axis(DType dtype, std::int64_t outer, std::int64_t axis, std::int64_t inner,
                 float scale, const void* in, void* out, StreamHandle stream) {
  const std::int64_t n = outer * inner;
  if (n <= 0) return;
  dispatch_act(dtype, "ReduceSum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_axis_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        outer, axis, inner, scale, static_cast<const T*>(in), static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void reduce_axis_backward(DType dtype, std::int64_t outer, std::int64_t axis, std::int64_t inner,
                          float scale, const void* dout, void* din, StreamHandle stream) {
  const std::int64_t n = outer * axis * inner;
  if (n <= 0) return;
  dispatch_act(dtype, "ReduceSum backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_axis_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        outer, axis, inner, scale, static_cast<const T*>(dout), static_cast<T*>(din));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void softmax(DType dtype, std::int64_t rows, std::int64_t cols, const void* x, void* y,
             StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "Softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_kernel<T><<<grid_for(rows * 32), kThreads, 0, stream>>>(
        rows, cols, static_cast<const T*>(x), static_cast<T*>(y));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void softmax_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                      const void* dy, void* dx, StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "Softmax backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_backward_kernel<T><<<grid_for(rows * 32), kThreads, 0, stream>>>(
        rows, cols, static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ember::network::cuda
