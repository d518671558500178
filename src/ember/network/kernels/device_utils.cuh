// Internal helpers shared by the network layer's .cu files: dtype dispatch for the activation
// types, conversions, launch sizing, warp/block reductions and the deterministic column
// reduction.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ember/core/dtype.hpp"
#include "ember/core/error.hpp"
#include "ember/core/half.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/tensor/cuda_launch.hpp"

namespace ember::network::cuda::detail {

inline constexpr int kThreads = 256;

// Calls f(TypeTag<T>{}) for T = float, Half or BFloat16: the types the CUDA kernels compute in.
template <class F>
void dispatch_act(DType t, const char* what, F&& f) {
  dispatch_among<TypeList<float, Half, BFloat16>>(t, what, f);
}

template <class T>
__device__ __forceinline__ float to_f(T v) {
  return static_cast<float>(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v) {
  return T(v);
}

// The grid of a grid-stride kernel with n items: the tensor layer's one-item-per-thread grid, at
// most 8 waves of 132 SMs' worth (the loops cover the rest).
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
  constexpr unsigned kMaxBlocks = 132 * 32;
  return std::min(::ember::pointwise_grid(n, threads), kMaxBlocks);
}

// 16 bytes of T: vectorised kernels move these with one 128-bit access per thread (scalar
// 2-byte accesses over [batch, width] activations leave much of the memory bandwidth unused).
template <class T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};

inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Calls launch(TypeTag<I>{}, std::integral_constant<int, V>{}) for a grid-stride kernel over
// `count` elements: I = uint32 where count < 2^31 (so the grid's last step stays below 2^32),
// else uint64; V = Pack<T>::kSize elements a thread where `packed` (16-byte aligned), else 1.
template <class T, class F>
void with_index_and_pack(std::int64_t count, bool packed, F&& launch) {
  const bool small = count < (std::int64_t{1} << 31);
  if (packed) {
    constexpr int V = Pack<T>::kSize;
    if (small) {
      launch(TypeTag<std::uint32_t>{}, std::integral_constant<int, V>{});
    } else {
      launch(TypeTag<std::uint64_t>{}, std::integral_constant<int, V>{});
    }
  } else if (small) {
    launch(TypeTag<std::uint32_t>{}, std::integral_constant<int, 1>{});
  } else {
    launch(TypeTag<std::uint64_t>{}, std::integral_constant<int, 1>{});
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t global_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// ---- deterministic column reduction ------------------------------------------------------------
// out_k[c] = sum over rows r of f(r, c)[k] for k < N. Rows are cut into column_chunks(rows)
// chunks; a (32 x 8)-thread block sums one chunk of 32 columns (threads along x read consecutive
// columns: coalesced), the chunks' partial sums then go through a second kernel in a fixed order.

inline constexpr int kColumnRowsInFlight = 8;

template <int N, class F>
__global__ void column_partial_kernel(std::int64_t rows, std::int64_t cols, std::int64_t chunk_rows,
                                      F f, float* partial, float* o0, float* o1) {
  __shared__ float red[N][8][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk_rows;
  std::int64_t r1 = r0 + chunk_rows;
  if (r1 > rows) r1 = rows;
  float acc[N];
#pragma unroll
  for (int k = 0; k < N; ++k)
    acc[k] = 0.0f;
  if (c < cols) {
    // kColumnRowsInFlight rows' terms are read before any is added (in the same order as one
    // at a time, so the same bits): one row per round trip left each thread waiting on memory
    // 32 times a chunk (WeightMultiply's weight gradient ran at a fifth of its bytes' time).
    std::int64_t r = r0 + threadIdx.y;
    for (; r + 8 * (kColumnRowsInFlight - 1) < r1; r += 8 * kColumnRowsInFlight) {
      float v[kColumnRowsInFlight][N];
#pragma unroll
      for (int u = 0; u < kColumnRowsInFlight; ++u)
        f(r + 8 * u, c, v[u]);
#pragma unroll
      for (int u = 0; u < kColumnRowsInFlight; ++u) {
#pragma unroll
        for (int k = 0; k < N; ++k)
          acc[k] += v[u][k];
      }
    }
    for (; r < r1; r += 8) {
      float v[N];
      f(r, c, v);
#pragma unroll
      for (int k = 0; k < N; ++k)
        acc[k] += v[k];
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k)
    red[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float s = 0.0f;
#pragma unroll
      for (int y = 0; y < 8; ++y)
        s += red[k][y][threadIdx.x];
      if (gridDim.y == 1) {
        (k == 0 ? o0 : o1)[c] = s;
      } else {
        partial[(static_cast<std::int64_t>(k) * gridDim.y + blockIdx.y) * cols + c] = s;
      }
    }
  }
}

// p[0] + p[ld] + p[2 ld] + ... (n terms), added in that order. kColumnRowsInFlight terms are
// loaded before they are added: one load per add made a column of chunk partials a chain of 256
// dependent L2 round trips (about 30 us, whatever the size of the reduction: most of a one-output
// layer's weight gradient).
__device__ inline float sum_in_order(const float* p, std::int64_t n, std::int64_t ld) {
  float s = 0.0f;
  std::int64_t i = 0;
  for (; i + kColumnRowsInFlight <= n; i += kColumnRowsInFlight) {
    float v[kColumnRowsInFlight];
#pragma unroll
    for (int u = 0; u < kColumnRowsInFlight; ++u)
      v[u] = p[(i + u) * ld];
#pragma unroll
    for (int u = 0; u < kColumnRowsInFlight; ++u)
      s += v[u];
  }
  for (; i < n; ++i)
    s += p[i * ld];
  return s;
}

// The chunks' partial sums of `cols` columns, added in a fixed order: store(k, c, total) with
// total = sum over chunks j of partial[(k chunks + j) ld + c], k < N. A (32 x kChunkTotalWarps)
// block takes 32 columns; warp w adds chunks w, w + kChunkTotalWarps, ... and the warps' sums
// are then added in warp order. One thread per column added all 256 chunks in sequence before:
// 8-15 us for a few blocks on an otherwise idle GPU, on the step's path after every bias
// gradient's column sum.
inline constexpr int kChunkTotalWarps = 8;

template <int N, class Store>
__global__ void __launch_bounds__(32 * kChunkTotalWarps)
    chunk_totals_kernel(std::int64_t chunks, std::int64_t cols, std::int64_t ld,
                        const float* partial, Store store) {
  __shared__ float red[N][kChunkTotalWarps][33];
  const int lane = static_cast<int>(threadIdx.x), warp = static_cast<int>(threadIdx.y);
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + lane;
  const std::int64_t terms =
      chunks > warp ? (chunks - warp + kChunkTotalWarps - 1) / kChunkTotalWarps : 0;
#pragma unroll
  for (int k = 0; k < N; ++k)
    red[k][warp][lane] = c < cols ? sum_in_order(partial + (k * chunks + warp) * ld + c, terms,
                                                 kChunkTotalWarps * ld)
                                  : 0.0f;
  __syncthreads();
  if (warp != 0 || c >= cols) return;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kChunkTotalWarps; ++w)
      s += red[k][w][lane];
    store(k, c, s);
  }
}

template <int N, class Store>
void launch_chunk_totals(std::int64_t chunks, std::int64_t cols, std::int64_t ld,
                         const float* partial, Store store, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32)), block(32, kChunkTotalWarps);
  chunk_totals_kernel<N, Store><<<grid, block, 0, stream>>>(chunks, cols, ld, partial, store);
  EMBER_CUDA_CHECK_LAUNCH();
}

struct StoreColumnTotals {
  float* o0;
  float* o1;
  __device__ void operator()(int k, std::int64_t c, float v) const { (k == 0 ? o0 : o1)[c] = v; }
};

// `workspace` holds N * column_sum_workspace(rows, cols) floats.
// With several chunks, their partial sums (`partial`, chunks x N x cols) added in a fixed order
// into the outputs; with one, the partial kernel wrote the outputs itself.
template <int N>
void finish_column_chunks(std::int64_t chunks, std::int64_t cols, const float* partial, float* o0,
                          float* o1, cudaStream_t stream) {
  if (chunks <= 1 || cols <= 0) return;
  launch_chunk_totals<N>(chunks, cols, cols, partial, StoreColumnTotals{o0, o1}, stream);
}

template <int N, class F>
void column_reduce(std::int64_t rows, std::int64_t cols, F f, float* o0, float* o1,
                   float* workspace, cudaStream_t stream) {
  static_assert(N == 1 || N == 2, "column_reduce: one or two outputs");
  if (cols <= 0) return;
  const std::int64_t chunks = column_chunks(rows);
  EMBER_CHECK(chunks <= 65535, "column_reduce: too many chunks");
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
  const dim3 block(32, 8);
  column_partial_kernel<N, F>
      <<<grid, block, 0, stream>>>(rows, cols, column_chunk_rows(rows), f, workspace, o0, o1);
  EMBER_CUDA_CHECK_LAUNCH();
  finish_column_chunks<N>(chunks, cols, workspace, o0, o1, stream);
}

// ---- deterministic scalar reduction -------------------------------------------------------------
// *out = scale * sum_i f(i) + (extra ? *extra : 0) over i < n, through kReduceBlocks partials.

template <class F>
__global__ void scalar_partial_kernel(std::int64_t n, F f, float* partial) {
  __shared__ float warp_sums[32];
  float acc = 0.0f;
  for (std::int64_t i = global_thread(); i < n; i += global_stride())
    acc += f(i);
  acc = warp_sum(acc);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    float v = lane < static_cast<int>(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) partial[blockIdx.x] = v;
  }
}

// A template so each .cu file that reduces gets its own instance (no cross-file kernels).
// One warp: lane l adds partials l, l + 32, ... in order, then the lanes' sums go through
// warp_sum's fixed butterfly (lane 0's result is the same bits every run). One thread adding
// all the partials in sequence took 4 us on the step's path.
template <int Unused = 0>
__global__ void scalar_final_kernel(int parts, const float* partial, float scale,
                                    const float* extra, float* out) {
  const int lane = static_cast<int>(threadIdx.x);
  const float s =
      warp_sum(lane < parts ? sum_in_order(partial + lane, (parts - lane + 31) / 32, 32) : 0.0f);
  if (lane == 0) *out = s * scale + (extra != nullptr ? *extra : 0.0f);
}

template <class F>
void scalar_reduce(std::int64_t n, F f, float scale, const float* extra, float* out,
                   float* workspace, cudaStream_t stream) {
  scalar_partial_kernel<F>
      <<<static_cast<unsigned>(kReduceBlocks), kThreads, 0, stream>>>(n, f, workspace);
  EMBER_CUDA_CHECK_LAUNCH();
  scalar_final_kernel<0>
      <<<1, 32, 0, stream>>>(static_cast<int>(kReduceBlocks), workspace, scale, extra, out);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::network::cuda::detail
