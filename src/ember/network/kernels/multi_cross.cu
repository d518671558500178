// The fused MultiCross (DCN cross network): all num_layers cross layers of a row in one kernel,
// forward and backward, with the row held in registers (one warp per row, lane `lane` holding
// columns lane, lane + 32, ...). The forward writes the output and the per-row, per-layer
// scalars s_l = x_l . w_l; the backward recomputes the hidden states x_l from x0 and those
// scalars (the same f32 operations in the same order as the forward, so bit for bit the values
// the forward had) instead of reading [L x batch x n] of stored states.
//
// Weight gradients: dw_l = sum_b t_l[b] x_l[b] with t_l = g_{l+1} . x0, summed per warp in shared
// memory (each lane owns its columns: no races), then per block over its warps in warp order,
// then over blocks in block order (cross_sum_partials_kernel). Bias gradients need no per-layer
// column sums: db_{L-1} = sum_b g_L[b], and since g_l = g_{l+1} + t_l w_l,
// db_{l-1} = db_l + w_l sum_b t_l[b] (cross_finish_kernel). No atomics anywhere: the grid depends
// only on the shape, so the gradients are bit-identical from run to run.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::cuda {

using namespace detail;

namespace {

struct CrossLayers {
  const float* w[kMaxCrossLayers];
  const float* b[kMaxCrossLayers];
};
struct CrossGrads {
  float* dw[kMaxCrossLayers];
  float* db[kMaxCrossLayers];
};

// The sum of a warp, every lane receiving lane 0's value (the butterfly's lanes add in
// different orders): the forward stores exactly the s that every lane used.
__device__ __forceinline__ float warp_dot(float partial) {
  return __shfl_sync(0xffffffffu, warp_sum(partial), 0);
}

// The layers' weights and biases staged in shared memory, zero past the width (so the padding
// lanes compute zeros without a test): w_l at sw + l * V * 32, column k at + k; b_l likewise.
template <int V>
__device__ __forceinline__ void stage_layers(const CrossLayers& p, int layers, int n, float* sw,
                                             float* sb) {
  constexpr int kPer = V * 32;
  for (int j = static_cast<int>(threadIdx.x); j < layers * kPer;
       j += static_cast<int>(blockDim.x)) {
    const int l = j / kPer, k = j % kPer;
    sw[j] = k < n ? p.w[l][k] : 0.0f;
    sb[j] = k < n ? p.b[l][k] : 0.0f;
  }
  __syncthreads();
}

// One cross layer on a lane's values, in a fixed operation order (the backward's recomputation
// must reproduce the forward's rounding): x = (x0 s + b) + x. `bias`: the layer's staged bias.
template <int V>
__device__ __forceinline__ void cross_step(const float (&x0)[V], float (&x)[V], float s,
                                           const float* bias, int lane) {
#pragma unroll
  for (int i = 0; i < V; ++i)
    x[i] = __fadd_rn(__fmaf_rn(x0[i], s, bias[i * 32 + lane]), x[i]);
}

// This lane's part of a . w (`w`: a layer's staged weights).
template <int V>
__device__ __forceinline__ float lane_dot(const float (&a)[V], const float* w, int lane) {
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i)
    dot = __fmaf_rn(a[i], w[i * 32 + lane], dot);
  return dot;
}

template <class T, int V>
__device__ __forceinline__ void load_row(const T* __restrict__ row, int n, int lane,
                                         float (&v)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int k = i * 32 + lane;
    v[i] = k < n ? to_f(row[k]) : 0.0f;
  }
}

template <class T, int V>
__device__ __forceinline__ void store_row(T* __restrict__ row, int n, int lane,
                                          const float (&v)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int k = i * 32 + lane;
    if (k < n) row[k] = from_f<T>(v[i]);
  }
}

// One warp per row (grid-stride): x_{l+1} = x0 s_l + b_l + x_l with s_l = x_l . w_l; writes
// s[l * batch + b] and y = x_L.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    multi_cross_forward_kernel(std::int64_t batch, std::int64_t n, int layers,
                               const T* __restrict__ x0, CrossLayers p, float* __restrict__ s,
                               T* __restrict__ y) {
  extern __shared__ float smem[];
  const int width = static_cast<int>(n);  // at most kCrossFusedMaxWidth
  float* sw = smem;
  float* sb = smem + layers * V * 32;
  stage_layers<V>(p, layers, width, sw, sb);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_thread() / 32; r < batch; r += warps) {
    float x0v[V], x[V];
    load_row<T, V>(x0 + r * n, width, lane, x0v);
#pragma unroll
    for (int i = 0; i < V; ++i)
      x[i] = x0v[i];
    for (int l = 0; l < layers; ++l) {
      const float sl = warp_dot(lane_dot<V>(x, sw + l * V * 32, lane));
      if (lane == 0) s[l * batch + r] = sl;
      cross_step<V>(x0v, x, sl, sb + l * V * 32, lane);
    }
    store_row<T, V>(y + r * n, width, lane, x);
  }
}

// The shared memory of one warp: (layers + 1) x V x 32 column sums (layer l's weight gradient,
// then the output gradient's column sum for the bias), then `layers` sums of t_l.
__host__ __device__ constexpr std::int64_t warp_floats(int v, int layers) {
  return static_cast<std::int64_t>(layers + 1) * v * 32 + layers;
}

// `warps` warps per block, rows r = global warp, + all warps, ...; per row, from the last layer
// to the first: t_l = g_{l+1} . x0, dw_l += t_l x_l, dx += g_{l+1} s_l, g_l = g_{l+1} + t_l w_l;
// then dx += g_0. Block b writes its partial sums to partial[b * cols + c] with
// cols = (layers + 1) n + layers (dw_0..dw_{L-1}, sum g_L, sum t_0..sum t_{L-1}).
template <class T, int V>
__global__ void __launch_bounds__(kCrossMaxWarpsPerBlock * 32)
    multi_cross_backward_kernel(std::int64_t batch, std::int64_t n, int layers,
                                const T* __restrict__ x0, CrossLayers p,
                                const float* __restrict__ s, const T* __restrict__ dy,
                                T* __restrict__ dx, float* __restrict__ partial) {
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps_per_block = static_cast<int>(blockDim.x >> 5);
  const int width = static_cast<int>(n);  // at most kCrossFusedMaxWidth
  float* sw = smem;
  float* sb = smem + layers * V * 32;
  float* sums = sb + layers * V * 32;  // the warps' sums
  const std::int64_t per_warp = warp_floats(V, layers);
  float* acc = sums + warp * per_warp;  // [layers + 1][V][32], then t sums [layers]
  float* tsum = acc + static_cast<std::int64_t>(layers + 1) * V * 32;
  for (std::int64_t j = lane; j < per_warp; j += 32)
    acc[j] = 0.0f;
  stage_layers<V>(p, layers, width, sw, sb);  // its __syncthreads covers the zeroing
  float gsum[V];
#pragma unroll
  for (int i = 0; i < V; ++i)
    gsum[i] = 0.0f;

  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + warp; r < batch;
       r += warps) {
    float x0v[V], g[V], d[V];
    load_row<T, V>(x0 + r * n, width, lane, x0v);
    load_row<T, V>(dy + r * n, width, lane, g);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      gsum[i] += g[i];
      d[i] = 0.0f;
    }
    for (int l = layers - 1; l >= 0; --l) {
      float x[V];
#pragma unroll
      for (int i = 0; i < V; ++i)
        x[i] = x0v[i];
      for (int j = 0; j < l; ++j)
        cross_step<V>(x0v, x, s[j * batch + r], sb + j * V * 32, lane);
      float gx0 = 0.0f;  // x0's padding lanes hold 0
#pragma unroll
      for (int i = 0; i < V; ++i)
        gx0 = __fmaf_rn(g[i], x0v[i], gx0);
      const float t = warp_dot(gx0);
      const float sl = s[l * batch + r];
      float* acc_l = acc + static_cast<std::int64_t>(l) * V * 32;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        acc_l[i * 32 + lane] += t * x[i];
        d[i] = __fmaf_rn(g[i], sl, d[i]);
      }
      if (lane == 0) tsum[l] += t;
      const float* w = sw + l * V * 32;
#pragma unroll
      for (int i = 0; i < V; ++i)
        g[i] = __fmaf_rn(t, w[i * 32 + lane], g[i]);
    }
    if (dx != nullptr) {
#pragma unroll
      for (int i = 0; i < V; ++i)
        d[i] += g[i];
      store_row<T, V>(dx + r * n, width, lane, d);
    }
  }
  float* acc_g = acc + static_cast<std::int64_t>(layers) * V * 32;
#pragma unroll
  for (int i = 0; i < V; ++i)
    acc_g[i * 32 + lane] = gsum[i];
  __syncthreads();

  // The block's sums over its warps, in warp order. Column k of a warp's section a sits at
  // a * V * 32 + k (lane k % 32, register k / 32).
  const std::int64_t cols = static_cast<std::int64_t>(layers + 1) * n + layers;
  float* out = partial + static_cast<std::int64_t>(blockIdx.x) * cols;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    std::int64_t at;
    if (c < static_cast<std::int64_t>(layers + 1) * n) {
      at = (c / n) * V * 32 + c % n;
    } else {
      at = static_cast<std::int64_t>(layers + 1) * V * 32 + (c - (layers + 1) * n);
    }
    float sum = 0.0f;
    for (int w = 0; w < warps_per_block; ++w)
      sum += sums[w * per_warp + at];
    out[c] = sum;
  }
}

// sums[c] = sum over p < parts of partial[p * cols + c], in a fixed order: 32 columns per block,
// thread row y adding parts y, y + 32, ..., then the 32 rows in order.
__global__ void cross_sum_partials_kernel(int parts, std::int64_t cols,
                                          const float* __restrict__ partial,
                                          float* __restrict__ sums) {
  __shared__ float red[32][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.0f;
  if (c < cols) {
    for (int q = static_cast<int>(threadIdx.y); q < parts; q += 32)
      acc += partial[static_cast<std::int64_t>(q) * cols + c];
  }
  red[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float s = 0.0f;
#pragma unroll
    for (int y = 0; y < 32; ++y)
      s += red[y][threadIdx.x];
    sums[c] = s;
  }
}

// dw_l = sums of section l; db_{L-1} = sum g_L; db_{l-1} = db_l + w_l sum t_l.
__global__ void cross_finish_kernel(std::int64_t n, int layers, const float* __restrict__ sums,
                                    CrossLayers p, CrossGrads out) {
  const float* tsum = sums + static_cast<std::int64_t>(layers + 1) * n;
  for (std::int64_t k = global_thread(); k < n; k += global_stride()) {
    for (int l = 0; l < layers; ++l)
      out.dw[l][k] = sums[l * n + k];
    float db = sums[static_cast<std::int64_t>(layers) * n + k];
    out.db[layers - 1][k] = db;
    for (int l = layers - 1; l >= 1; --l) {
      db = __fmaf_rn(p.w[l][k], tsum[l], db);
      out.db[l - 1][k] = db;
    }
  }
}

// Calls f(std::integral_constant<int, V>) with V the registers per lane for `width` columns.
template <class F>
void dispatch_values_per_lane(std::int64_t width, F&& f) {
  switch (cross_values_per_lane(width)) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 8:
      f(std::integral_constant<int, 8>{});
      break;
    case 16:
      f(std::integral_constant<int, 16>{});
      break;
    default:
      f(std::integral_constant<int, 32>{});
      break;
  }
}

CrossLayers layers_of(int layers, const float* const* w, const float* const* bias) {
  CrossLayers p{};
  for (int l = 0; l < layers; ++l) {
    p.w[l] = w[l];
    p.b[l] = bias[l];
  }
  return p;
}

// Dynamic shared memory past the default 48 KiB needs the kernel's consent.
template <class K>
void allow_shared_bytes(K* kernel, std::size_t bytes) {
  if (bytes > 48 * 1024) {
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  }
}

// As many blocks of `kernel` as the device holds at once. Both kernels loop over rows, so one
// wave covers any batch and each block stages the weights once; the count depends only on the
// device and the shape, so the backward's summation order is fixed.
template <class K>
std::int64_t resident_blocks(K* kernel, int threads, std::size_t bytes) {
  // Remembered per (kernel, device, block shape): the queries cost microseconds a launch.
  using Key = std::tuple<const void*, int, int, std::size_t>;
  static std::mutex mutex;
  static std::map<Key, std::int64_t> known;
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  const Key key{reinterpret_cast<const void*>(kernel), device, threads, bytes};
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  int sms = 0, per_sm = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  EMBER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes));
  const std::int64_t blocks = static_cast<std::int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  known.emplace(key, blocks);
  return blocks;
}

void check_fused(std::int64_t width, int layers) {
  EMBER_CHECK(layers >= 1 && layers <= kMaxCrossLayers && cross_fused(width, layers),
              "MultiCross: the fused kernels do not take width ", width, " with ", layers,
              " layers");
}

}  // namespace

void multi_cross_forward(DType dtype, std::int64_t batch, std::int64_t width, int layers,
                         const void* x0, const float* const* w, const float* const* bias, float* s,
                         void* y, StreamHandle stream) {
  if (batch <= 0 || width <= 0) return;
  check_fused(width, layers);
  const CrossLayers p = layers_of(layers, w, bias);
  dispatch_act(dtype, "MultiCross", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_values_per_lane(width, [&](auto v) {
      auto* kernel = multi_cross_forward_kernel<T, decltype(v)::value>;
      const auto bytes = static_cast<std::size_t>(cross_weight_bytes(width, layers));
      allow_shared_bytes(kernel, bytes);
      const std::int64_t blocks = std::min((batch + kThreads / 32 - 1) / (kThreads / 32),
                                           resident_blocks(kernel, kThreads, bytes));
      kernel<<<static_cast<unsigned>(blocks), kThreads, bytes, stream>>>(
          batch, width, layers, static_cast<const T*>(x0), p, s, static_cast<T*>(y));
      EMBER_CUDA_CHECK_LAUNCH();
    });
  });
}

void multi_cross_backward(DType dtype, std::int64_t batch, std::int64_t width, int layers,
                          const void* x0, const float* const* w, const float* const* bias,
                          const float* s, const void* dy, void* dx, float* const* dw,
                          float* const* dbias, float* workspace, StreamHandle stream) {
  if (width <= 0) return;
  check_fused(width, layers);
  const CrossLayers p = layers_of(layers, w, bias);
  CrossGrads grads{};
  for (int l = 0; l < layers; ++l) {
    grads.dw[l] = dw[l];
    grads.db[l] = dbias[l];
  }
  const CrossBackwardGrid grid = cross_backward_grid(batch, width, layers);
  const std::int64_t cols = cross_partial_columns(width, layers);
  float* partial = workspace;
  float* sums = workspace + grid.max_blocks * cols;
  std::int64_t blocks = grid.max_blocks;
  dispatch_act(dtype, "MultiCross backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_values_per_lane(width, [&](auto v) {
      constexpr int V = decltype(v)::value;
      auto* kernel = multi_cross_backward_kernel<T, V>;
      const int threads = 32 * grid.warps_per_block;
      // The staged weights, then each warp's sums.
      const auto bytes = static_cast<std::size_t>(cross_weight_bytes(width, layers) +
                                                  grid.warps_per_block * warp_floats(V, layers) *
                                                      static_cast<std::int64_t>(sizeof(float)));
      allow_shared_bytes(kernel, bytes);
      blocks = std::min(blocks, resident_blocks(kernel, threads, bytes));
      kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), bytes, stream>>>(
          batch, width, layers, static_cast<const T*>(x0), p, s, static_cast<const T*>(dy),
          static_cast<T*>(dx), partial);
      EMBER_CUDA_CHECK_LAUNCH();
    });
  });
  cross_sum_partials_kernel<<<static_cast<unsigned>((cols + 31) / 32), dim3(32, 32), 0, stream>>>(
      static_cast<int>(blocks), cols, partial, sums);
  EMBER_CUDA_CHECK_LAUNCH();
  cross_finish_kernel<<<grid_for(width), kThreads, 0, stream>>>(width, layers, sums, p, grads);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::network::cuda
