// What the dot interaction's kernels share (interaction.cu: CUDA cores and the generic kernels;
// interaction_tensor_core.cu: 16-bit tensor cores; interaction_tf32.cu: f32 on TF32 tensor
// cores): the pair order, the staging of a sample's rows into shared memory (asynchronous 16-byte
// global-to-shared copies, or 16-bit rows widened to f32 through registers), the backward's
// construction of G from the output gradient's pair entries, where a row's input gradient goes,
// the TF32 forward's wmma loop over X X^T's lower-triangle tiles, and the launch of the
// one-warp-per-sample kernels (a persistent grid, more than 48 KB of shared memory where a block
// needs it).
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ember/core/device.hpp"
#include "ember/core/dtype.hpp"
#include "ember/core/error.hpp"
#include "ember/core/half.hpp"
#include "ember/tensor/cuda_launch.hpp"
#include "ember/tensor/row_gather.hpp"

namespace ember::network::cuda::detail {

// The fast kernels hold at most this many rows (F1 = embeddings + 1) per sample.
inline constexpr int kInteractionMaxRows = 32;
// Warps (samples in flight) per block of the fast kernels, when shared memory allows.
inline constexpr int kInteractionWarps = 4;

// Pair index p = i (i - 1) / 2 + j (j < i) back to i.
__device__ __forceinline__ int pair_row(int p) {
  int i = static_cast<int>((1.0f + sqrtf(1.0f + 8.0f * static_cast<float>(p))) * 0.5f);
  while (i * (i - 1) / 2 > p)
    --i;
  while ((i + 1) * i / 2 <= p)
    ++i;
  return i;
}

// The block's table of pairs in output order: entry p = i | j << 8 (pair (i, j), j < i).
// Bytes it takes at the start of the dynamic shared memory (a multiple of 128, so what follows
// stays aligned for 16-byte copies and tensor-core loads).
inline std::size_t pair_table_bytes(std::int64_t f1) {
  const std::size_t pairs = static_cast<std::size_t>(f1 * (f1 - 1) / 2);
  return (pairs * sizeof(std::uint16_t) + 127) / 128 * 128;
}
__device__ __forceinline__ void build_pair_table(std::uint16_t* table, int npairs) {
  for (int p = static_cast<int>(threadIdx.x); p < npairs; p += static_cast<int>(blockDim.x)) {
    const int i = pair_row(p), j = p - i * (i - 1) / 2;
    table[p] = static_cast<std::uint16_t>(i | (j << 8));
  }
}

// Where a warp of a one-warp-per-sample kernel works: its lane, the block's pair table (built
// here, at the start of the dynamic shared memory, table_bytes long) and the warp's own
// warp_bytes of shared memory after it. The caller syncs the block before reading the table.
struct WarpPlace {
  int warp;
  int lane;
  int npairs;
  std::uint16_t* table;
  unsigned char* mine;
};
__device__ __forceinline__ WarpPlace warp_place(unsigned char* smem, int f1, int table_bytes,
                                                int warp_bytes) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int npairs = f1 * (f1 - 1) / 2;
  auto* table = reinterpret_cast<std::uint16_t*>(smem);
  build_pair_table(table, npairs);
  return {warp, lane, npairs, table, smem + table_bytes + warp * warp_bytes};
}

// 16 bytes global -> shared without passing through registers (sm_80+), so a lane has all of
// its copies in flight at once; wait_async_copies() then __syncwarp() publishes them to the warp.
__device__ __forceinline__ void copy16_async(void* shared, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global) : "memory");
#else
  *static_cast<uint4*>(shared) = *static_cast<const uint4*>(global);
#endif
}
__device__ __forceinline__ void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// A lane's walk over the 16-byte chunks (r, c) of rows of `chunks_per_row` chunks each, 32 chunks
// (one per lane) a step, without a division per step.
struct ChunkWalk {
  int r, c, chunks, dr, dc;
  __device__ ChunkWalk(int lane, int chunks_per_row)
      : r(lane / chunks_per_row),
        c(lane % chunks_per_row),
        chunks(chunks_per_row),
        dr(32 / chunks_per_row),
        dc(32 % chunks_per_row) {}
  __device__ void next() {
    r += dr;
    c += dc;
    if (c >= chunks) {
      c -= chunks;
      ++r;
    }
  }
};

// Starts copying sample b's rows (row 0 the MLP vector, rows 1..f1-1 its embeddings, `w` values
// each) into X (row stride `ld` values) with 16-byte copies; w * sizeof(T) must be a multiple of
// 16, the pointers and ld * sizeof(T) 16-byte aligned. The caller waits (wait_async_copies).
template <class T>
__device__ __forceinline__ void stage_rows_async(T* X, int ld, const T* mlp, const T* emb,
                                                 std::int64_t b, int f1, int w, int lane) {
  constexpr int kPer = 16 / sizeof(T);
  const T* m = mlp + b * w;
  const T* e = emb + b * static_cast<std::int64_t>(f1 - 1) * w;
  for (ChunkWalk k(lane, w / kPer); k.r < f1; k.next()) {
    const int c = k.c * kPer;
    copy16_async(X + k.r * ld + c,
                 k.r == 0 ? m + c : e + static_cast<std::int64_t>(k.r - 1) * w + c);
  }
}

// Sample b's index codes (row_gather.hpp), lane l holding embedding l's (l < f1 - 1; zeros
// elsewhere and past the batch), loaded a sample ahead of their use so that the load is in
// flight while the warp works on the sample before.
__device__ __forceinline__ std::int32_t load_gather_codes(const std::int32_t* index, std::int64_t b,
                                                          std::int64_t batch, int f1, int lane) {
  if (b >= batch || lane >= f1 - 1) return kGatherZeroRow;
  return __ldg(index + b * (f1 - 1) + lane);
}

// stage_rows_async with the embeddings read where their codes say (row_gather.hpp; lane l's
// `codes` is embedding l's): a table row, zeros, or a row of `emb` (a bag pooled there). The
// walk runs the same number of steps in every lane, so that every lane takes part in each
// shuffle.
template <class T>
__device__ __forceinline__ void stage_rows_gather_async(T* X, int ld, const T* mlp, const T* emb,
                                                        const T* table, std::int32_t codes,
                                                        std::int64_t b, int f1, int w, int lane) {
  constexpr int kPer = 16 / sizeof(T);
  const int chunks = w / kPer, steps = (f1 * chunks + 31) / 32;
  const T* m = mlp + b * w;
  ChunkWalk k(lane, chunks);
  for (int s = 0; s < steps; ++s, k.next()) {
    const std::int32_t code = __shfl_sync(0xffffffffu, codes, (k.r - 1) & 31);
    if (k.r >= f1) continue;
    const int c = k.c * kPer;
    T* dst = X + k.r * ld + c;
    if (k.r == 0) {
      copy16_async(dst, m + c);
    } else if (code >= 0) {
      copy16_async(dst, table + static_cast<std::int64_t>(code) * w + c);
    } else if (code == kGatherZeroRow) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    } else {
      copy16_async(dst, emb + gather_dense_row(code) * w + c);
    }
  }
}

// Where a one-warp-per-sample kernel stages its samples' rows from: the dense emb, or (GATHER)
// where the codes say, each sample's codes loaded while the warp works on the sample before.
template <class T, bool GATHER>
struct SampleRows {
  const T *mlp, *emb, *table;
  const std::int32_t* index;
  std::int64_t batch, step;  // step: the warp's stride over the samples
  int f1, w, lane;
  std::int32_t codes = 0;  // GATHER: the next sample's

  __device__ SampleRows(const T* mlp_, const T* emb_, const T* table_, const std::int32_t* index_,
                        std::int64_t batch_, std::int64_t step_, int f1_, int w_, int lane_,
                        std::int64_t first)
      : mlp(mlp_),
        emb(emb_),
        table(table_),
        index(index_),
        batch(batch_),
        step(step_),
        f1(f1_),
        w(w_),
        lane(lane_) {
    if constexpr (GATHER) codes = load_gather_codes(index, first, batch, f1, lane);
  }
  // Starts copying sample b's rows into X (row stride ld; the caller waits: wait_async_copies).
  __device__ void stage(T* X, int ld, std::int64_t b) {
    if constexpr (GATHER) {
      const std::int32_t next = load_gather_codes(index, b + step, batch, f1, lane);
      stage_rows_gather_async(X, ld, mlp, emb, table, codes, b, f1, w, lane);
      codes = next;
    } else {
      stage_rows_async(X, ld, mlp, emb, b, f1, w, lane);
    }
  }
};

// Row r of sample b: the MLP vector for r = 0, embedding r - 1 otherwise.
template <class T>
__device__ __forceinline__ const T* sample_row(const T* mlp, const T* emb, std::int64_t b, int r,
                                               int f1, int w) {
  return r == 0 ? mlp + b * w : emb + (b * (f1 - 1) + r - 1) * static_cast<std::int64_t>(w);
}

// Four 16-bit values (8-byte aligned) as f32.
__device__ __forceinline__ float4 load4(const Half* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  return make_float4(static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(u.x & 0xffffu))),
                     static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(u.x >> 16))),
                     static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(u.y & 0xffffu))),
                     static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(u.y >> 16))));
}
__device__ __forceinline__ float4 load4(const BFloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                     __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u));
}

// Starts staging sample b's rows into X (row stride `ld` values), each kernel's way: rows X holds
// in their own type by stage_rows_async (the caller waits: wait_async_copies); 16-bit rows into
// an f32 X (the CUDA-core kernels) converted through registers, 4 loads in flight per lane (w a
// multiple of 4).
template <class T, class S>
__device__ __forceinline__ void stage_rows(S* X, int ld, const T* mlp, const T* emb, std::int64_t b,
                                           int f1, int w, int lane) {
  if constexpr (std::is_same_v<T, S>) {
    stage_rows_async(X, ld, mlp, emb, b, f1, w, lane);
  } else {
    static_assert(std::is_same_v<S, float>, "16-bit rows are widened to f32");
    const int w4 = w / 4, n = f1 * w4;
    for (int base = lane; base < n; base += 128) {
      float4 v[4] = {};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int idx = base + 32 * u, r = idx / w4, c = (idx - r * w4) * 4;
        if (idx < n) v[u] = load4(sample_row(mlp, emb, b, r, f1, w) + c);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int idx = base + 32 * u, r = idx / w4, c = (idx - r * w4) * 4;
        if (idx < n) *reinterpret_cast<float4*>(X + r * ld + c) = v[u];
      }
    }
  }
}

// Sample b's rows in X (stage_rows), landed and visible to the whole warp.
template <class T, class S>
__device__ __forceinline__ void stage_sample_rows(S* X, int ld, const T* mlp, const T* emb,
                                                  std::int64_t b, int f1, int w, int lane) {
  stage_rows(X, ld, mlp, emb, b, f1, w, lane);
  wait_async_copies();
  __syncwarp();
}

// Zeroes rows [from, to) of X (w values each, w * sizeof(T) a multiple of 16): the padding rows
// the staging never writes, zeroed once per block.
template <class T>
__device__ __forceinline__ void zero_rows(T* X, int ld, int from, int to, int w, int lane) {
  constexpr int kPer = 16 / sizeof(T);
  const int chunks = w / kPer;
  for (int idx = lane; idx < (to - from) * chunks; idx += 32) {
    const int r = from + idx / chunks, c = (idx % chunks) * kPer;
    *reinterpret_cast<uint4*>(X + r * ld + c) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// Copies the output gradient's first w values (the MLP vector's direct gradient; the row need not
// be aligned) into D as f32 or 16-bit, 4 loads in flight per lane, so the tiles that write the
// MLP row's gradient read them from shared memory instead of waiting on global loads.
template <class T, class D>
__device__ __forceinline__ void stage_direct_gradient(D* dst, const T* g, int w, int lane) {
  for (int c0 = 0; c0 < w; c0 += 128) {
    T v[4] = {};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = c0 + lane + 32 * u;
      if (c < w) v[u] = g[c];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = c0 + lane + 32 * u;
      if (c < w) dst[c] = static_cast<D>(v[u]);
    }
  }
}

// The backward's G (row stride gld) from the output gradient's pair entries gp[0, npairs): the
// gradient of pair (i, j) goes to G[i][j] and G[j][i], converted to G's type (exact where G holds
// the gradient's own type or f32); the diagonal and padding are never written (the kernels zero
// them once). Every load of a lane is issued before its first store, so they are in flight
// together (F1 <= kInteractionMaxRows: at most 16 a lane).
template <class T, class D>
__device__ __forceinline__ void scatter_pair_gradients(D* G, int gld, const T* gp,
                                                       const std::uint16_t* table, int npairs,
                                                       int lane) {
  constexpr int kMaxPairsPerLane = (kInteractionMaxRows * (kInteractionMaxRows - 1) / 2 + 31) / 32;
  const T* own = gp + lane;  // lane + 32 u: one address, constant offsets
  D v[kMaxPairsPerLane] = {};
#pragma unroll
  for (int u = 0; u < kMaxPairsPerLane; ++u) {
    if (lane + 32 * u < npairs) v[u] = static_cast<D>(own[32 * u]);
  }
#pragma unroll
  for (int u = 0; u < kMaxPairsPerLane; ++u) {
    const int p = lane + 32 * u;
    if (p < npairs) {
      const int e = table[p], i = e & 0xff, j = e >> 8;
      G[i * gld + j] = v[u];
      G[j * gld + i] = v[u];
    }
  }
}

// One warp's inputs of sample b's backward, in shared memory once it returns: the rows in X
// (stage_rows), G from the output gradient's pairs (scatter_pair_gradients; loaded while the rows'
// copies are in flight) and, where the MLP vector's gradient is wanted, the output gradient's
// first w values in `direct` as f32 (stage_direct_gradient).
template <class T, class S, class D>
__device__ __forceinline__ void stage_backward_sample(S* X, int ld, D* G, int gld, float* direct,
                                                      const T* mlp, const T* emb, const T* dout,
                                                      bool want_direct, const std::uint16_t* table,
                                                      std::int64_t b, int f1, int w, int lane) {
  const int npairs = f1 * (f1 - 1) / 2;
  stage_rows(X, ld, mlp, emb, b, f1, w, lane);
  const T* g = dout + b * (w + npairs + 1);
  scatter_pair_gradients(G, gld, g + w, table, npairs, lane);
  if (want_direct) stage_direct_gradient(direct, g, w, lane);
  wait_async_copies();
  __syncwarp();
}

// Where row r of sample b's input gradient goes: dmlp's row for r = 0, demb's row r - 1 for
// 0 < r < f1; null where that gradient is not wanted (a null dmlp or demb) or r is padding.
template <class T>
__device__ __forceinline__ T* gradient_row(T* dmlp, T* demb, std::int64_t b, int r, int f1, int w) {
  if (r == 0) return dmlp == nullptr ? nullptr : dmlp + b * w;
  if (r < f1 && demb != nullptr) {
    return demb + (b * (f1 - 1) + r - 1) * static_cast<std::int64_t>(w);
  }
  return nullptr;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// The TF32 forward's X X^T over the lower-triangle 16 x 16 tiles (I, J), J <= I, of a
// TILES x TILES grid, tile (I, J) accumulating in acc[I (I + 1) / 2 + J]: one k step adds
// a[I] bt[J] (a: X's row tiles at this k; bt: the same tiles read as X^T).
template <int TILES, class Acc, class A, class B>
__device__ __forceinline__ void mma_lower_triangle(Acc* acc, const A* a, const B* bt) {
#pragma unroll
  for (int i = 0; i < TILES; ++i) {
#pragma unroll
    for (int j = 0; j <= i; ++j)
      nvcuda::wmma::mma_sync(acc[i * (i + 1) / 2 + j], a[i], bt[j], acc[i * (i + 1) / 2 + j]);
  }
}
// Stores those tiles' f32 accumulators into S (row stride sld): tile (I, J) at row 16 I, column
// 16 J.
template <int TILES, class Acc>
__device__ __forceinline__ void store_lower_triangle(float* S, int sld, const Acc* acc) {
#pragma unroll
  for (int i = 0; i < TILES; ++i) {
#pragma unroll
    for (int j = 0; j <= i; ++j) {
      nvcuda::wmma::store_matrix_sync(S + 16 * i * sld + 16 * j, acc[i * (i + 1) / 2 + j], sld,
                                      nvcuda::wmma::mem_row_major);
    }
  }
}
#endif

// The launch of a one-warp-per-sample kernel with `warps` warps per block and `smem` bytes of
// dynamic shared memory: lifts the 48 KB default where needed, and sizes a grid-stride grid to
// what is resident at once (every block builds its pair table once).
template <class Kernel>
unsigned warp_per_sample_grid(Kernel kernel, std::int64_t batch, int warps, std::size_t smem) {
  const void* k = reinterpret_cast<const void*>(kernel);
  if (smem > 48 * 1024) {
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  }
  return ::ember::grid_for(k, warps * 32, batch * 32, smem);
}

// The most dynamic shared memory one block may opt in to on the current device.
inline std::size_t max_block_shared_bytes() {
  int device = 0, bytes = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(bytes);
}

// The current device's compute capability, major part (tensor-core kernels need 8: sm_80).
inline int compute_capability_major() {
  int device = 0, major = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
}

// The 16-bit tensor-core path (interaction_tensor_core.cu). fit: f16 or bf16, F1 <= 32, width a
// multiple of 16 whose rows fit in shared memory, sm_80 or newer. The launchers need a shape that
// fits and 16-byte aligned pointers (dmlp, demb may be null; a gather's table too).
// The forward and the backward fit the same shapes (one layout).
bool interaction_tensor_cores_fit(DType dtype, std::int64_t f1, std::int64_t width);
// With `gather` defined the embeddings are read where its codes say (row_gather.hpp), emb
// holding only the rows they name.
void interaction_forward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                      std::int64_t width, const void* mlp, const void* emb,
                                      void* out, const RowGather& gather, StreamHandle stream);
void interaction_backward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                       std::int64_t width, const void* mlp, const void* emb,
                                       const void* dout, void* dmlp, void* demb,
                                       const RowGather& gather, StreamHandle stream);

// The TF32 tensor-core path (interaction_tf32.cu), for f32 activations when the network allows
// TF32. fit: f32, F1 <= 32, width a multiple of 8 whose rows fit in shared memory, sm_80 or newer.
// The launchers need a shape that fits and 16-byte aligned pointers (dmlp, demb may be null).
bool interaction_tf32_fit(DType dtype, std::int64_t f1, std::int64_t width, bool backward);
void interaction_forward_tf32(std::int64_t batch, std::int64_t f1, std::int64_t width,
                              const float* mlp, const float* emb, float* out, StreamHandle stream);
void interaction_backward_tf32(std::int64_t batch, std::int64_t f1, std::int64_t width,
                               const float* mlp, const float* emb, const float* dout, float* dmlp,
                               float* demb, StreamHandle stream);

}  // namespace ember::network::cuda::detail
