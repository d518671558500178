// What the dot interaction's kernels share (interaction.cu: CUDA cores and the generic kernels;
// interaction_tensor_core.cu: 16-bit tensor cores; interaction_tf32.cu: f32 on TF32 tensor
// cores): the pair order, the asynchronous 16-byte
// global-to-shared copies that stage a sample's rows, and the launch of the one-warp-per-sample
// kernels (a persistent grid, more than 48 KB of shared memory where a block needs it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ember/core/device.hpp"
#include "ember/core/dtype.hpp"
#include "ember/core/error.hpp"
#include "ember/tensor/cuda_launch.hpp"

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

// Starts copying sample b's rows (row 0 the MLP vector, rows 1..f1-1 its embeddings, `w` values
// each) into X (row stride `ld` values) with 16-byte copies; w * sizeof(T) must be a multiple of
// 16, the pointers and ld * sizeof(T) 16-byte aligned. The caller waits (wait_async_copies).
template <class T>
__device__ __forceinline__ void stage_rows_async(T* X, int ld, const T* mlp, const T* emb,
                                                 std::int64_t b, int f1, int w, int lane) {
  constexpr int kPer = 16 / sizeof(T);
  const int chunks = w / kPer;
  const T* m = mlp + b * w;
  const T* e = emb + b * static_cast<std::int64_t>(f1 - 1) * w;
  for (int idx = lane; idx < f1 * chunks; idx += 32) {
    const int r = idx / chunks, c = (idx - r * chunks) * kPer;
    copy16_async(X + r * ld + c, r == 0 ? m + c : e + static_cast<std::int64_t>(r - 1) * w + c);
  }
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

inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

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
// fits and 16-byte aligned pointers (dmlp, demb may be null).
bool interaction_tensor_cores_fit(DType dtype, std::int64_t f1, std::int64_t width, bool backward);
void interaction_forward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                      std::int64_t width, const void* mlp, const void* emb,
                                      void* out, StreamHandle stream);
void interaction_backward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                       std::int64_t width, const void* mlp, const void* emb,
                                       const void* dout, void* dmlp, void* demb,
                                       StreamHandle stream);

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
