// What the CUDA files of the embedding steps (embedding_cuda_*.cu, embedding_kernels_cuda.cu)
// share, and nothing outside them uses: launch geometry, thread and warp indices,
// stream-ordered temporaries, and the declarations of the steps that table() collects.
// CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ember/core/error.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/tensor/cuda_launch.hpp"

namespace ember::embedding::kernels::cuda {

// ---- launch geometry --------------------------------------------------------------------------

inline constexpr int kThreads = 256;
// Grid-stride kernels loop past this many blocks (32 per SM of a 132-SM GPU).
inline constexpr std::int64_t kMaxBlocks = 132 * 32;

// The grid of a grid-stride kernel with a thread per item (the tensor layer's
// one-item-per-thread grid, at most kMaxBlocks) or a warp per item.
inline int blocks_for_threads(std::int64_t n) {
  return static_cast<int>(std::min<std::int64_t>(::ember::pointwise_grid(n, kThreads), kMaxBlocks));
}
inline int blocks_for_warps(std::int64_t warps) {
  return blocks_for_threads(warps * 32);
}

// The grid of a persistent kernel with a warp per item: at most the blocks of `kernel` that the
// current device holds at once, so that its items are taken in order, a round of resident warps
// at a time.
template <class Kernel>
int persistent_blocks(Kernel kernel, std::int64_t warps) {
  const unsigned resident =
      ::ember::grid_for(reinterpret_cast<const void*>(kernel), kThreads, warps * 32);
  return std::min(blocks_for_warps(warps), static_cast<int>(resident));
}

__device__ inline std::int64_t global_thread() {
  return blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
}
__device__ inline std::int64_t thread_count() {
  return std::int64_t(gridDim.x) * blockDim.x;
}
__device__ inline std::int64_t global_warp() {
  return global_thread() / 32;
}
__device__ inline std::int64_t warp_count() {
  return thread_count() / 32;
}

// Row `row` of a [rows, vec_size] state, or null when the optimizer has no such state.
__device__ inline float* row_ptr(float* base, std::int64_t row, std::int64_t vec_size) {
  return base == nullptr ? nullptr : base + row * vec_size;
}

// ---- table values of any value type (embedding_values.hpp), widened to f32 ----------------------

// Four consecutive values (16 bytes of f32, 8 of a 16-bit type; aligned to that) as f32.
template <class V>
__device__ inline float4 widen4(const uint2& raw) {
  return make_float4(static_cast<float>(V::from_bits(raw.x & 0xffffu)),
                     static_cast<float>(V::from_bits(raw.x >> 16)),
                     static_cast<float>(V::from_bits(raw.y & 0xffffu)),
                     static_cast<float>(V::from_bits(raw.y >> 16)));
}
template <class V>
__device__ inline float4 load4(const V* p) {
  if constexpr (sizeof(V) == 4) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    return widen4<V>(*reinterpret_cast<const uint2*>(p));
  }
}
// The same through the read-only cache (values no thread of the kernel writes).
template <class V>
__device__ inline float4 ldg4(const V* p) {
  if constexpr (sizeof(V) == 4) {
    return __ldg(reinterpret_cast<const float4*>(p));
  } else {
    return widen4<V>(__ldg(reinterpret_cast<const uint2*>(p)));
  }
}
template <class V>
__device__ inline float ldg1(const V* p) {
  if constexpr (sizeof(V) == 4) {
    return __ldg(p);
  } else {
    return static_cast<float>(V::from_bits(__ldg(reinterpret_cast<const unsigned short*>(p))));
  }
}
// One value through L2 only (no L1 line allocated): for gathers that read each value once.
template <class V>
__device__ inline float ldcg1(const V* p) {
  if constexpr (sizeof(V) == 4) {
    return __ldcg(p);
  } else {
    return static_cast<float>(V::from_bits(__ldcg(reinterpret_cast<const unsigned short*>(p))));
  }
}
template <class V>
__device__ inline void store4(V* p, const V (&v)[4]) {
  if constexpr (sizeof(V) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *reinterpret_cast<uint2*>(p) = make_uint2(v[0].bits | (static_cast<unsigned>(v[1].bits) << 16),
                                              v[2].bits | (static_cast<unsigned>(v[3].bits) << 16));
  }
}
// Whether p suits 4-value accesses.
template <class V>
inline bool aligned4(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(V)) == 0;
}

// ---- temporaries ------------------------------------------------------------------------------

// Keeps freed pool memory cached instead of returning it to the driver at every sync.
void keep_pool_memory();

// A stream-ordered temporary (cudaMallocAsync), freed on the stream when it goes.
class Temp {
 public:
  Temp(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    keep_pool_memory();
    if (bytes > 0) EMBER_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream));
  }
  ~Temp() {
    if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
  }
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

template <class T>
T read_back(const T* device_value, cudaStream_t stream) {
  T host{};
  EMBER_CUDA_CHECK(cudaMemcpyAsync(&host, device_value, sizeof(T), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// ---- the steps, each declared with its table entry's signature --------------------------------

template <class Entry>
using Step = std::remove_pointer_t<Entry>;

// embedding_cuda_keys.cu: select_local, onehot_rows, init_rows, init_new_rows, init_rows_at.
template <class Key>
KeyKernels<Key> key_kernels();
// embedding_cuda_hybrid.cu
template <class Key>
void hybrid_rows(const HybridArgs& a, const Key* keys, const HybridRows& out, StreamHandle stream);
Step<decltype(KernelTable::select_items)> select_items;
Step<decltype(KernelTable::flagged_rows)> flagged_rows;
// embedding_cuda_pool.cu
Step<decltype(KernelTable::pool)> pool;
Step<decltype(KernelTable::gather_codes)> gather_codes;
// embedding_cuda_segments.cu
Step<decltype(KernelTable::segments)> segments;
// embedding_cuda_catch_up.cu
Step<decltype(KernelTable::catch_up_rows)> catch_up_rows;
// embedding_cuda_update.cu
Step<decltype(KernelTable::update_rows)> update_rows;
Step<decltype(KernelTable::update_untouched)> update_untouched;
Step<decltype(KernelTable::replay_steps)> replay_steps;
// embedding_cuda_rows.cu
Step<decltype(KernelTable::gather_rows)> gather_rows;
Step<decltype(KernelTable::scatter_rows)> scatter_rows;
Step<decltype(KernelTable::gather_values)> gather_values;
Step<decltype(KernelTable::scatter_values)> scatter_values;
Step<decltype(KernelTable::fill_steps)> fill_steps;
Step<decltype(KernelTable::record_row_slots)> record_row_slots;
Step<decltype(KernelTable::move_rows)> move_rows;
Step<decltype(KernelTable::map_rows)> map_rows;

}  // namespace ember::embedding::kernels::cuda
