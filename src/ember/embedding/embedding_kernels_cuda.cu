// CUDA implementations of the embedding steps (see embedding_kernels.hpp). The only file of the
// embedding layer that includes CUB (radix sort, run-length encode, scans).
//
// Pooling is a warp per bag with 16-byte loads (4 floats a lane, 128 columns a warp pass) and
// several rows in flight; the optimizer update is a warp per distinct row that sums the row's
// gradients in entry order and updates weight and state in one pass (each touched row read and
// written once). Temporaries come from the stream-ordered pool (cudaMallocAsync).
#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <cub/cub.cuh>
#include <mutex>

#include "ember/core/error.hpp"
#include "ember/embedding/embedding_kernels.hpp"

namespace ember::embedding::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr std::int64_t kMaxBlocks = 132 * 32;

int blocks_for_threads(std::int64_t n) {
  return static_cast<int>(
      std::max<std::int64_t>(1, std::min<std::int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)));
}
int blocks_for_warps(std::int64_t warps) {
  return static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks)));
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

// Keeps freed pool memory cached instead of returning it to the driver at every sync.
void keep_pool_memory() {
  static std::array<std::once_flag, 64> once;
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= 64) return;
  std::call_once(once[device], [device] {
    cudaMemPool_t pool = nullptr;
    EMBER_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t threshold = UINT64_MAX;
    EMBER_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  });
}

// A stream-ordered temporary, freed on the stream when it goes.
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

// ---- select ---------------------------------------------------------------------------------

__device__ inline std::int64_t bag_global_row(const SelectArgs& a, std::int64_t bag) {
  if (a.sharding == Sharding::Distributed) return bag;
  const std::int64_t b = bag / a.owned_count, j = bag % a.owned_count;
  return b * a.slot_num + a.owned_slots[j];
}

template <class Key>
__device__ inline bool bag_owns(const SelectArgs& a, Key key) {
  if (a.sharding == Sharding::Localized || a.ranks == 1) return true;
  return static_cast<std::uint64_t>(key) % static_cast<std::uint64_t>(a.ranks) ==
         static_cast<std::uint64_t>(a.rank);
}

template <class Key>
__global__ void count_kernel(SelectArgs a, const Key* __restrict__ keys,
                             std::int64_t* __restrict__ counts, float* __restrict__ scale) {
  const std::int64_t bags = a.bags();
  for (std::int64_t bag = global_thread(); bag < bags; bag += thread_count()) {
    const std::int64_t g = bag_global_row(a, bag);
    const std::int64_t begin = a.offsets[g], end = a.offsets[g + 1];
    std::int64_t count = 0;
    for (std::int64_t e = begin; e < end; ++e)
      count += bag_owns(a, keys[e]);
    counts[bag] = count;
    const std::int64_t nnz = end - begin;
    scale[bag] = !a.mean ? 1.0f : (nnz == 0 ? 0.0f : 1.0f / static_cast<float>(nnz));
  }
}

template <class Key>
__global__ void fill_kernel(SelectArgs a, const Key* __restrict__ keys,
                            const std::int64_t* __restrict__ local_offsets,
                            Key* __restrict__ local_keys, std::int64_t* __restrict__ entry_bag) {
  const std::int64_t bags = a.bags();
  for (std::int64_t bag = global_thread(); bag < bags; bag += thread_count()) {
    const std::int64_t g = bag_global_row(a, bag);
    std::int64_t out = local_offsets[bag];
    for (std::int64_t e = a.offsets[g]; e < a.offsets[g + 1]; ++e) {
      const Key key = keys[e];
      if (bag_owns(a, key)) {
        local_keys[out] = key;
        entry_bag[out] = bag;
        ++out;
      }
    }
  }
}

template <class Key>
std::int64_t select_impl(const SelectArgs& a, const Key* keys, std::int64_t* local_offsets,
                         Key* local_keys, std::int64_t* entry_bag, float* scale,
                         cudaStream_t stream) {
  const std::int64_t bags = a.bags();
  EMBER_CUDA_CHECK(cudaMemsetAsync(local_offsets, 0, sizeof(std::int64_t), stream));
  if (bags == 0) return 0;
  Temp counts(bags * sizeof(std::int64_t), stream);
  count_kernel<Key><<<blocks_for_threads(bags), kThreads, 0, stream>>>(
      a, keys, counts.as<std::int64_t>(), scale);
  EMBER_CUDA_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, counts.as<std::int64_t>(),
                                                 local_offsets + 1, bags, stream));
  Temp temp(temp_bytes, stream);
  EMBER_CUDA_CHECK(cub::DeviceScan::InclusiveSum(
      temp.as<void>(), temp_bytes, counts.as<std::int64_t>(), local_offsets + 1, bags, stream));
  fill_kernel<Key><<<blocks_for_threads(bags), kThreads, 0, stream>>>(a, keys, local_offsets,
                                                                      local_keys, entry_bag);
  EMBER_CUDA_CHECK_LAUNCH();
  return read_back(local_offsets + bags, stream);
}

// ---- one-hot rows and initialisation ----------------------------------------------------------

template <class Key>
__global__ void onehot_kernel(OneHotArgs a, const Key* __restrict__ keys,
                              const std::int64_t* __restrict__ entry_bag, std::int64_t n,
                              std::int64_t* __restrict__ rows, unsigned long long* bad) {
  for (std::int64_t e = global_thread(); e < n; e += thread_count()) {
    const std::int64_t j = entry_bag[e] % a.owned_count;
    const auto key = static_cast<std::int64_t>(keys[e]);
    if (key < a.begin[j] || key >= a.begin[j] + a.size[j]) {
      rows[e] = -1;
      atomicMin(bad, static_cast<unsigned long long>(e));
    } else {
      rows[e] = a.local_base[j] + (key - a.begin[j]);
    }
  }
}

template <class Key>
__global__ void init_kernel(float* __restrict__ values, std::int64_t vec_size, std::int64_t first,
                            std::int64_t end, const Key* __restrict__ keys_by_row,
                            std::uint64_t seed, float bound) {
  const std::int64_t n = (end - first) * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    const std::int64_t r = first + i / vec_size, c = i % vec_size;
    values[r * vec_size + c] =
        initial_value(seed, static_cast<std::uint64_t>(keys_by_row[r]), c, bound);
  }
}

// ---- pooling ---------------------------------------------------------------------------------

__device__ inline void add4(float4& acc, const float4& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

__device__ inline float4 load_row4(const float* values, std::int64_t row, std::int64_t vec_size,
                                   std::int64_t c) {
  if (row < 0) return make_float4(0.f, 0.f, 0.f, 0.f);
  return __ldg(reinterpret_cast<const float4*>(values + row * vec_size + c));
}

// A warp per group of kBagsPerWarp bags; lane l covers columns 4l..4l+3 of each 128-column
// pass. The bags' row indices are loaded together (a lane per entry, 32 entries of each bag at a
// time) and shuffled out, so a warp has one 16-byte row load per bag in flight at each step;
// with pooling 1 the chain offsets -> row index -> row is otherwise all latency. Each bag adds
// its rows in entry order (the CPU's order).
constexpr int kBagsPerWarp = 4;

__global__ void pool4_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows,
                             const float* __restrict__ scale, std::int64_t bags,
                             const float* __restrict__ values, std::int64_t vec_size,
                             float* __restrict__ out) {
  constexpr int G = kBagsPerWarp;
  const int lane = threadIdx.x & 31;
  const std::int64_t passes = (vec_size + 127) / 128;  // uniform over the warp (shuffles)
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  for (std::int64_t group = global_warp(); group * G < bags; group += warp_count()) {
    std::int64_t begin[G], count[G];
    float s[G];
#pragma unroll
    for (int q = 0; q < G; ++q) {
      const std::int64_t bag = group * G + q;
      const bool valid = bag < bags;
      begin[q] = valid ? offsets[bag] : 0;
      count[q] = valid ? offsets[bag + 1] - begin[q] : 0;
      s[q] = valid ? scale[bag] : 0.f;
    }
    for (std::int64_t pass = 0; pass < passes; ++pass) {
      const std::int64_t c = 4 * lane + 128 * pass;
      const bool active = c < vec_size;
      float4 acc[G];
#pragma unroll
      for (int q = 0; q < G; ++q) acc[q] = zero;
      for (std::int64_t k = 0;; k += 32) {
        std::int64_t mine[G];
        int n[G];
        int m = 0;
#pragma unroll
        for (int q = 0; q < G; ++q) {
          const std::int64_t left = count[q] - k;
          n[q] = static_cast<int>(left <= 0 ? 0 : (left < 32 ? left : 32));
          m = n[q] > m ? n[q] : m;
          mine[q] = lane < n[q] ? rows[begin[q] + k + lane] : -1;
        }
        if (m == 0) break;
        for (int j = 0; j < m; ++j) {
          float4 v[G];
#pragma unroll
          for (int q = 0; q < G; ++q) {
            const std::int64_t r = __shfl_sync(0xffffffffu, mine[q], j);
            v[q] = (active && j < n[q]) ? load_row4(values, r, vec_size, c) : zero;
          }
#pragma unroll
          for (int q = 0; q < G; ++q) {
            if (j < n[q]) add4(acc[q], v[q]);
          }
        }
      }
      if (active) {
#pragma unroll
        for (int q = 0; q < G; ++q) {
          const std::int64_t bag = group * G + q;
          if (bag < bags) {
            float4 o = acc[q];
            o.x *= s[q];
            o.y *= s[q];
            o.z *= s[q];
            o.w *= s[q];
            *reinterpret_cast<float4*>(out + bag * vec_size + c) = o;
          }
        }
      }
    }
  }
}

// Any vec_size: a lane per column.
__global__ void pool1_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                             std::int64_t bags, const float* __restrict__ values,
                             std::int64_t vec_size, float* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t bag = global_warp(); bag < bags; bag += warp_count()) {
    const std::int64_t begin = offsets[bag], end = offsets[bag + 1];
    const float s = scale[bag];
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float acc = 0.f;
      for (std::int64_t e = begin; e < end; ++e) {
        const std::int64_t r = rows[e];
        if (r >= 0) acc += __ldg(values + r * vec_size + c);
      }
      out[bag * vec_size + c] = acc * s;
    }
  }
}

// ---- segments ----------------------------------------------------------------------------

__global__ void sort_inputs_kernel(const std::int64_t* __restrict__ rows, std::int64_t n,
                                   std::uint64_t* __restrict__ keys,
                                   std::int64_t* __restrict__ entries) {
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    keys[i] = static_cast<std::uint64_t>(rows[i] + 1);  // absent (-1) sorts first as 0
    entries[i] = i;
  }
}

__global__ void segment_outputs_kernel(const std::uint64_t* __restrict__ unique_keys,
                                       const int* __restrict__ num_runs,
                                       std::int64_t* __restrict__ unique_rows,
                                       std::int64_t* __restrict__ offsets, std::int64_t n) {
  const std::int64_t count = *num_runs;
  for (std::int64_t i = global_thread(); i < count; i += thread_count()) {
    unique_rows[i] = static_cast<std::int64_t>(unique_keys[i]) - 1;
  }
  if (global_thread() == 0) offsets[count] = n;
}

// ---- optimizer -----------------------------------------------------------------------------

__device__ inline float* row_ptr(float* base, std::int64_t row, std::int64_t vec_size) {
  return base == nullptr ? nullptr : base + row * vec_size;
}

__global__ void catch_up_kernel(const std::int64_t* __restrict__ rows, std::int64_t count,
                                float* __restrict__ values, std::int64_t vec_size, RowStates st,
                                std::int64_t target, LazyParams lazy) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t i = global_warp(); i < count; i += warp_count()) {
    const std::int64_t r = rows == nullptr ? i : rows[i];
    if (r < 0) continue;
    const std::int64_t from = st.last_step[r];
    if (from >= target) continue;
    float* w = values + r * vec_size;
    float* s0 = row_ptr(st.s0, r, vec_size);
    float* s1 = row_ptr(st.s1, r, vec_size);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float d0 = 0.f, d1 = 0.f;
      catch_up(lazy, w[c], s0 ? s0[c] : d0, s1 ? s1[c] : d1, from, target);
    }
    __syncwarp();
    if (lane == 0) st.last_step[r] = target;
  }
}

// Gradient sums use separately rounded multiply and add (no fused multiply-add), in entry
// order: bitwise the CPU's sums. Optimizers like Adam and AdaGrad divide by the gradient's own
// magnitude, so a last-bit difference in a sum that nearly cancels would otherwise show.
__device__ inline void add_scaled(float4& g, const float4& v, float s) {
  g.x = __fadd_rn(g.x, __fmul_rn(v.x, s));
  g.y = __fadd_rn(g.y, __fmul_rn(v.y, s));
  g.z = __fadd_rn(g.z, __fmul_rn(v.z, s));
  g.w = __fadd_rn(g.w, __fmul_rn(v.w, s));
}

__global__ void update_kernel(Segments seg, const std::int64_t* __restrict__ entry_bag,
                              const float* __restrict__ scale, const float* __restrict__ grad,
                              float* __restrict__ values, std::int64_t vec_size, RowStates st,
                              std::int64_t step, UpdateStep u, LazyParams lazy, bool use_lazy) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t k = global_warp(); k < seg.count; k += warp_count()) {
    const std::int64_t r = seg.unique_rows[k];
    if (r < 0) continue;
    const std::int64_t begin = seg.offsets[k], end = seg.offsets[k + 1];
    const std::int64_t last = st.last_step != nullptr ? st.last_step[r] : step - 1;
    float* w = values + r * vec_size;
    float* s0 = row_ptr(st.s0, r, vec_size);
    float* s1 = row_ptr(st.s1, r, vec_size);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float g = 0.f;
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t bag = entry_bag[seg.sorted_entries[i]];
        g = __fadd_rn(g, __fmul_rn(grad[bag * vec_size + c], scale[bag]));
      }
      float wc = w[c];
      float d0 = s0 ? s0[c] : 0.f, d1 = s1 ? s1[c] : 0.f;
      if (use_lazy && last < step - 1) catch_up(lazy, wc, d0, d1, last, step - 1);
      apply_update(u, wc, g, d0, d1);
      w[c] = wc;
      if (s0) s0[c] = d0;
      if (s1) s1[c] = d1;
    }
    __syncwarp();
    if (lane == 0 && st.last_step != nullptr) st.last_step[r] = step;
  }
}

__device__ inline float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ inline void store4(float* p, const float4& v) {
  *reinterpret_cast<float4*>(p) = v;
}
__device__ inline float& lane_of(float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The fused update for vec_size % 4 == 0: lane l owns columns 4l..4l+3 of each 128-column pass.
// The entries' bags and scales are fetched 32 at a time (a lane each) and shuffled out, so each
// entry costs one 16-byte gradient load per lane; weight and state are loaded before the
// gradient loop so their latency overlaps it. Gradients add in entry order, like the CPU.
__global__ void update4_kernel(Segments seg, const std::int64_t* __restrict__ entry_bag,
                               const float* __restrict__ scale, const float* __restrict__ grad,
                               float* __restrict__ values, std::int64_t vec_size, RowStates st,
                               std::int64_t step, UpdateStep u, LazyParams lazy, bool use_lazy) {
  const int lane = threadIdx.x & 31;
  const std::int64_t passes = (vec_size + 127) / 128;
  for (std::int64_t k = global_warp(); k < seg.count; k += warp_count()) {
    const std::int64_t r = seg.unique_rows[k];
    if (r < 0) continue;
    const std::int64_t begin = seg.offsets[k], end = seg.offsets[k + 1];
    const std::int64_t last = st.last_step != nullptr ? st.last_step[r] : step - 1;
    for (std::int64_t pass = 0; pass < passes; ++pass) {
      const std::int64_t c = 4 * lane + 128 * pass;
      const bool active = c < vec_size;
      const std::int64_t at = r * vec_size + c;
      const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
      float4 w = active ? load4(values + at) : zero;
      float4 s0 = active && st.s0 ? load4(st.s0 + at) : zero;
      float4 s1 = active && st.s1 ? load4(st.s1 + at) : zero;
      float4 g = zero;
      for (std::int64_t base = begin; base < end; base += 32) {
        const int m = static_cast<int>(end - base < 32 ? end - base : 32);
        std::int64_t my_bag = 0;
        float my_scale = 0.f;
        if (lane < m) {
          my_bag = entry_bag[seg.sorted_entries[base + lane]];
          my_scale = scale[my_bag];
        }
        int j = 0;
        for (; j + 4 <= m; j += 4) {
          std::int64_t b[4];
          float sc[4];
          float4 v[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            b[q] = __shfl_sync(0xffffffffu, my_bag, j + q);
            sc[q] = __shfl_sync(0xffffffffu, my_scale, j + q);
          }
          if (active) {
#pragma unroll
            for (int q = 0; q < 4; ++q)
              v[q] = load4(grad + b[q] * vec_size + c);
#pragma unroll
            for (int q = 0; q < 4; ++q)
              add_scaled(g, v[q], sc[q]);
          }
        }
        for (; j < m; ++j) {
          const std::int64_t b = __shfl_sync(0xffffffffu, my_bag, j);
          const float sc = __shfl_sync(0xffffffffu, my_scale, j);
          if (active) {
            add_scaled(g, load4(grad + b * vec_size + c), sc);
          }
        }
      }
      if (active) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float& wi = lane_of(w, i);
          float& a = lane_of(s0, i);
          float& b = lane_of(s1, i);
          if (use_lazy && last < step - 1) catch_up(lazy, wi, a, b, last, step - 1);
          apply_update(u, wi, lane_of(g, i), a, b);
        }
        store4(values + at, w);
        if (st.s0) store4(st.s0 + at, s0);
        if (st.s1) store4(st.s1 + at, s1);
      }
    }
    __syncwarp();
    if (lane == 0 && st.last_step != nullptr) st.last_step[r] = step;
  }
}

__global__ void untouched_kernel(std::int64_t rows, float* __restrict__ values,
                                 std::int64_t vec_size, RowStates st, std::int64_t step,
                                 UpdateStep u) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_warp(); r < rows; r += warp_count()) {
    if (st.last_step[r] == step) continue;
    float* w = values + r * vec_size;
    float* s0 = row_ptr(st.s0, r, vec_size);
    float* s1 = row_ptr(st.s1, r, vec_size);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float wc = w[c];
      float d0 = s0 ? s0[c] : 0.f, d1 = s1 ? s1[c] : 0.f;
      apply_update(u, wc, 0.0f, d0, d1);
      w[c] = wc;
      if (s0) s0[c] = d0;
      if (s1) s1[c] = d1;
    }
    __syncwarp();
    if (lane == 0) st.last_step[r] = step;
  }
}

// ---- row moves -------------------------------------------------------------------------------

__global__ void gather_kernel(float* __restrict__ dst, const float* __restrict__ src,
                              const std::int64_t* __restrict__ index, std::int64_t count,
                              std::int64_t vec_size) {
  const std::int64_t n = count * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    const std::int64_t from = index[i / vec_size];
    dst[i] = from < 0 ? 0.f : src[from * vec_size + i % vec_size];
  }
}

__global__ void scatter_kernel(float* __restrict__ dst, const float* __restrict__ src,
                               const std::int64_t* __restrict__ index, std::int64_t count,
                               std::int64_t vec_size) {
  const std::int64_t n = count * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    dst[index[i / vec_size] * vec_size + i % vec_size] = src[i];
  }
}

__global__ void fill_steps_kernel(std::int64_t* __restrict__ last_step, std::int64_t first,
                                  std::int64_t end, std::int64_t value) {
  for (std::int64_t r = first + global_thread(); r < end; r += thread_count())
    last_step[r] = value;
}

__global__ void row_slots_kernel(std::int64_t* __restrict__ row_slot,
                                 const std::int64_t* __restrict__ rows,
                                 const std::int64_t* __restrict__ entry_bag, std::int64_t n,
                                 const std::int64_t* __restrict__ owned_slots,
                                 std::int64_t owned_count, std::int64_t first, std::int64_t end) {
  for (std::int64_t e = global_thread(); e < n; e += thread_count()) {
    const std::int64_t r = rows[e];
    if (r >= first && r < end) row_slot[r] = owned_slots[entry_bag[e] % owned_count];
  }
}

}  // namespace

#define EMBER_CUDA_KERNELS(Key)                                                                  \
  std::int64_t select_local(const SelectArgs& a, const Key* keys, std::int64_t* local_offsets,   \
                            Key* local_keys, std::int64_t* entry_bag, float* scale,              \
                            StreamHandle stream) {                                               \
    return select_impl<Key>(a, keys, local_offsets, local_keys, entry_bag, scale, stream);       \
  }                                                                                              \
  std::int64_t onehot_rows(const OneHotArgs& a, const Key* local_keys,                           \
                           const std::int64_t* entry_bag, std::int64_t n, std::int64_t* rows,    \
                           StreamHandle stream) {                                                \
    if (n == 0) return -1;                                                                       \
    Temp bad(sizeof(unsigned long long), stream);                                                \
    EMBER_CUDA_CHECK(cudaMemsetAsync(bad.as<void>(), 0xFF, sizeof(unsigned long long), stream)); \
    onehot_kernel<Key><<<blocks_for_threads(n), kThreads, 0, stream>>>(                          \
        a, local_keys, entry_bag, n, rows, bad.as<unsigned long long>());                        \
    EMBER_CUDA_CHECK_LAUNCH();                                                                   \
    const unsigned long long first_bad = read_back(bad.as<unsigned long long>(), stream);        \
    return first_bad == ~0ull ? -1 : static_cast<std::int64_t>(first_bad);                       \
  }                                                                                              \
  void init_rows(float* values, std::int64_t vec_size, std::int64_t first, std::int64_t end,     \
                 const Key* keys_by_row, std::uint64_t seed, float bound, StreamHandle stream) { \
    if (end <= first) return;                                                                    \
    init_kernel<Key><<<blocks_for_threads((end - first) * vec_size), kThreads, 0, stream>>>(     \
        values, vec_size, first, end, keys_by_row, seed, bound);                                 \
    EMBER_CUDA_CHECK_LAUNCH();                                                                   \
  }
EMBER_CUDA_KERNELS(std::uint32_t)
EMBER_CUDA_KERNELS(std::int64_t)
#undef EMBER_CUDA_KERNELS

void pool(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
          std::int64_t bags, const float* values, std::int64_t vec_size, float* out,
          StreamHandle stream) {
  if (bags == 0) return;
  const bool aligned = vec_size % 4 == 0 && (reinterpret_cast<std::uintptr_t>(values) % 16 == 0) &&
                       (reinterpret_cast<std::uintptr_t>(out) % 16 == 0);
  if (aligned) {
    pool4_kernel<<<blocks_for_warps((bags + kBagsPerWarp - 1) / kBagsPerWarp), kThreads, 0,
                   stream>>>(local_offsets, rows, scale, bags, values, vec_size, out);
  } else {
    pool1_kernel<<<blocks_for_warps(bags), kThreads, 0, stream>>>(local_offsets, rows, scale, bags,
                                                                  values, vec_size, out);
  }
  EMBER_CUDA_CHECK_LAUNCH();
}

std::int64_t segments(const std::int64_t* rows, std::int64_t n, std::int64_t capacity,
                      std::int64_t* sorted_entries, std::int64_t* unique_rows,
                      std::int64_t* offsets, StreamHandle stream) {
  if (n == 0) return 0;
  EMBER_CHECK(n < INT_MAX, "embedding batch of ", n, " keys on one rank exceeds 2^31 - 1");
  Temp keys(n * sizeof(std::uint64_t), stream), sorted_keys(n * sizeof(std::uint64_t), stream);
  Temp entries(n * sizeof(std::int64_t), stream);
  Temp unique_keys(n * sizeof(std::uint64_t), stream), counts(n * sizeof(int), stream);
  Temp num_runs(sizeof(int), stream);
  sort_inputs_kernel<<<blocks_for_threads(n), kThreads, 0, stream>>>(
      rows, n, keys.as<std::uint64_t>(), entries.as<std::int64_t>());
  EMBER_CUDA_CHECK_LAUNCH();
  int end_bit = 1;
  while (end_bit < 64 && (static_cast<std::uint64_t>(capacity) + 1) >> end_bit != 0)
    ++end_bit;
  const int items = static_cast<int>(n);
  std::size_t sort_bytes = 0, rle_bytes = 0, scan_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, keys.as<std::uint64_t>(), sorted_keys.as<std::uint64_t>(),
      entries.as<std::int64_t>(), sorted_entries, items, 0, end_bit, stream));
  EMBER_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(
      nullptr, rle_bytes, sorted_keys.as<std::uint64_t>(), unique_keys.as<std::uint64_t>(),
      counts.as<int>(), num_runs.as<int>(), items, stream));
  EMBER_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, counts.as<int>(), offsets, items, stream));
  Temp temp(std::max({sort_bytes, rle_bytes, scan_bytes}), stream);
  EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      temp.as<void>(), sort_bytes, keys.as<std::uint64_t>(), sorted_keys.as<std::uint64_t>(),
      entries.as<std::int64_t>(), sorted_entries, items, 0, end_bit, stream));
  EMBER_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(
      temp.as<void>(), rle_bytes, sorted_keys.as<std::uint64_t>(), unique_keys.as<std::uint64_t>(),
      counts.as<int>(), num_runs.as<int>(), items, stream));
  const int runs = read_back(num_runs.as<int>(), stream);
  // Only the first `runs` counts are meaningful; the scan over them gives the segment starts.
  if (runs > 0) {
    EMBER_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.as<void>(), scan_bytes, counts.as<int>(),
                                                   offsets, runs, stream));
  }
  segment_outputs_kernel<<<blocks_for_threads(runs), kThreads, 0, stream>>>(
      unique_keys.as<std::uint64_t>(), num_runs.as<int>(), unique_rows, offsets, n);
  EMBER_CUDA_CHECK_LAUNCH();
  return runs;
}

void catch_up_rows(const std::int64_t* rows, std::int64_t count, float* values,
                   std::int64_t vec_size, RowStates states, std::int64_t target,
                   const LazyParams& lazy, StreamHandle stream) {
  if (count == 0) return;
  catch_up_kernel<<<blocks_for_warps(count), kThreads, 0, stream>>>(rows, count, values, vec_size,
                                                                    states, target, lazy);
  EMBER_CUDA_CHECK_LAUNCH();
}

void update_rows(const Segments& seg, const std::int64_t* entry_bag, const float* scale,
                 const float* grad, float* values, std::int64_t vec_size, RowStates states,
                 std::int64_t step, const UpdateStep& u, const LazyParams* lazy,
                 StreamHandle stream) {
  if (seg.count == 0) return;
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const LazyParams lp = lazy != nullptr ? *lazy : LazyParams{};
  if (vec_size % 4 == 0 && aligned(values) && aligned(grad) && aligned(states.s0) &&
      aligned(states.s1)) {
    update4_kernel<<<blocks_for_warps(seg.count), kThreads, 0, stream>>>(
        seg, entry_bag, scale, grad, values, vec_size, states, step, u, lp, lazy != nullptr);
  } else {
    update_kernel<<<blocks_for_warps(seg.count), kThreads, 0, stream>>>(
        seg, entry_bag, scale, grad, values, vec_size, states, step, u, lp, lazy != nullptr);
  }
  EMBER_CUDA_CHECK_LAUNCH();
}

void update_untouched(std::int64_t rows, float* values, std::int64_t vec_size, RowStates states,
                      std::int64_t step, const UpdateStep& u, StreamHandle stream) {
  if (rows == 0) return;
  untouched_kernel<<<blocks_for_warps(rows), kThreads, 0, stream>>>(rows, values, vec_size, states,
                                                                    step, u);
  EMBER_CUDA_CHECK_LAUNCH();
}

void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                 std::int64_t vec_size, StreamHandle stream) {
  if (count * vec_size == 0) return;
  gather_kernel<<<blocks_for_threads(count * vec_size), kThreads, 0, stream>>>(dst, src, index,
                                                                               count, vec_size);
  EMBER_CUDA_CHECK_LAUNCH();
}

void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                  std::int64_t vec_size, StreamHandle stream) {
  if (count * vec_size == 0) return;
  scatter_kernel<<<blocks_for_threads(count * vec_size), kThreads, 0, stream>>>(dst, src, index,
                                                                                count, vec_size);
  EMBER_CUDA_CHECK_LAUNCH();
}

void fill_steps(std::int64_t* last_step, std::int64_t first, std::int64_t end, std::int64_t value,
                StreamHandle stream) {
  if (end <= first) return;
  fill_steps_kernel<<<blocks_for_threads(end - first), kThreads, 0, stream>>>(last_step, first, end,
                                                                              value);
  EMBER_CUDA_CHECK_LAUNCH();
}

void record_row_slots(std::int64_t* row_slot, const std::int64_t* rows,
                      const std::int64_t* entry_bag, std::int64_t n,
                      const std::int64_t* owned_slots, std::int64_t owned_count, std::int64_t first,
                      std::int64_t end, StreamHandle stream) {
  if (n == 0 || owned_count == 0) return;
  row_slots_kernel<<<blocks_for_threads(n), kThreads, 0, stream>>>(
      row_slot, rows, entry_bag, n, owned_slots, owned_count, first, end);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
