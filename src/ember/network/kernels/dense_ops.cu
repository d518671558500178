// Kernels of the layers with weights or batch statistics: MultiCross (DCN), WeightMultiply,
// BatchNorm, PReLU_Dice. Activations are f32, f16 or bf16 (T); weights, statistics, partial sums
// and every intermediate value are f32. Column statistics use the deterministic column reduction.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::cuda {

// The shared launch sizing, conversions and reductions (device_utils.cuh).
using namespace detail;

namespace {

// ---- MultiCross -------------------------------------------------------------------------------

// One warp per row: s = x . w, then y = x0 s + bias + x. x0 is the activation type; x and y are
// the activation type or f32 (the hidden states between cross layers).
template <class T0, class TX, class TY>
__global__ void cross_forward_kernel(std::int64_t batch, std::int64_t n, const T0* x0, const TX* x,
                                     const float* w, const float* bias, float* s, TY* y) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t b = global_thread() / 32; b < batch; b += warps) {
    float dot = 0.0f;
    for (std::int64_t k = lane; k < n; k += 32)
      dot += to_f(x[b * n + k]) * w[k];
    dot = warp_sum(dot);
    if (lane == 0) s[b] = dot;
    for (std::int64_t k = lane; k < n; k += 32) {
      y[b * n + k] = from_f<TY>(to_f(x0[b * n + k]) * dot + bias[k] + to_f(x[b * n + k]));
    }
  }
}

// One warp per row: out = a . b.
template <class TA, class TB>
__global__ void row_dot_kernel(std::int64_t batch, std::int64_t n, const TA* a, const TB* b,
                               float* out) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_thread() / 32; r < batch; r += warps) {
    float dot = 0.0f;
    for (std::int64_t k = lane; k < n; k += 32)
      dot += to_f(a[r * n + k]) * to_f(b[r * n + k]);
    dot = warp_sum(dot);
    if (lane == 0) out[r] = dot;
  }
}

template <class TG, class TX>
struct CrossGradTerms {
  const TG* g;
  const float* t;
  const TX* x;
  std::int64_t n;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[2]) const {
    v[0] = to_f(g[r * n + c]);         // bias gradient
    v[1] = t[r] * to_f(x[r * n + c]);  // weight gradient
  }
};

// g_out (f32) may alias g_in, dx_out may alias dx_acc (same element read, then written).
template <class TG, class TD>
__global__ void cross_input_grad_kernel(std::int64_t batch, std::int64_t n, const float* w,
                                        const float* s, const float* t, const TG* g_in,
                                        float* g_out, const float* dx_acc, TD* dx_out, bool first,
                                        bool last) {
  const std::int64_t total = batch * n;
  for (std::int64_t i = global_thread(); i < total; i += global_stride()) {
    const std::int64_t b = i / n, k = i % n;
    const float gv = to_f(g_in[i]);
    const float through_x = gv + t[b] * w[k];
    if (dx_out != nullptr) {
      float v = gv * s[b] + (first ? 0.0f : dx_acc[i]);
      if (last) v += through_x;
      dx_out[i] = from_f<TD>(v);
    }
    if (!last) g_out[i] = through_x;
  }
}

// ---- WeightMultiply ---------------------------------------------------------------------------

// A thread per V consecutive outputs (one 16-byte store where V > 1: out is aligned): the
// output's (sample, slot, column) is worked out once and then stepped, in 32-bit where the
// tensor allows. Three 64-bit divisions per element made this pass compute-bound (DeepFM's
// [65536, 13] -> [65536, 130] took 0.032 ms, a third of its bytes' time).
template <class T, class I, int V>
__global__ void weight_multiply_kernel(I total, I slots, I vec, const T* in, const float* w,
                                       T* out) {
  using P = std::conditional_t<V == 1, T, Pack<T>>;
  const I width = slots * vec;
  const I stride = static_cast<I>(gridDim.x) * blockDim.x * V;
  for (I first = (static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x) * V; first < total;
       first += stride) {
    const I b = first / width;
    I q = first - b * width;
    I s = q / vec;
    I j = q - s * vec;
    const T* x = in + b * slots;
    P pack;
    T* v = reinterpret_cast<T*>(&pack);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (first + k < total) v[k] = from_f<T>(to_f(x[s]) * w[q]);
      ++q;
      if (++j == vec) {
        j = 0;
        ++s;
        if (s == slots) {
          s = 0;
          q = 0;
          x += slots;
        }
      }
    }
    if (V > 1 && first + V <= total) {
      *reinterpret_cast<P*>(out + first) = pack;
    } else {
      for (int k = 0; k < V && first + k < total; ++k)
        out[first + k] = v[k];
    }
  }
}

// The weight gradient's term of (sample r, weight q): the slot of q in 32-bit (q < slots * vec,
// which the launch checks), not a 64-bit division per element.
template <class T>
struct WeightMultiplyGrad {
  const T* in;
  const T* dout;
  std::int64_t slots, vec;
  __device__ void operator()(std::int64_t r, std::int64_t q, float (&v)[1]) const {
    const auto slot = static_cast<std::uint32_t>(q) / static_cast<std::uint32_t>(vec);
    v[0] = to_f(dout[r * slots * vec + q]) * to_f(in[r * slots + slot]);
  }
};

template <class T>
__global__ void weight_multiply_input_grad_kernel(std::int64_t batch, std::int64_t slots,
                                                  std::int64_t vec, const float* w, const T* dout,
                                                  T* din) {
  const std::int64_t total = batch * slots;
  for (std::int64_t i = global_thread(); i < total; i += global_stride()) {
    const std::int64_t s = i % slots, b = i / slots;
    float acc = 0.0f;
    for (std::int64_t j = 0; j < vec; ++j)
      acc += to_f(dout[(b * slots + s) * vec + j]) * w[s * vec + j];
    din[i] = from_f<T>(acc);
  }
}

// ---- fully connected layers with one output --------------------------------------------------

// A warp per kSingleOutputRows rows at a time (their loads in flight together), the lanes along
// the row in packs of V elements (V > 1: rows and w 16-byte aligned), then a warp sum per row.
constexpr int kSingleOutputRows = 4;

template <class T, int V>
__global__ void single_output_forward_kernel(std::int64_t rows, std::int64_t in, const T* x,
                                             const T* w, const T* b, T* y) {
  using P = std::conditional_t<V == 1, T, Pack<T>>;
  constexpr int R = kSingleOutputRows;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t units = in / V, warps = global_stride() / 32;
  const float bias = to_f(b[0]);
  const auto* wp = reinterpret_cast<const P*>(w);
  for (std::int64_t r0 = global_thread() / 32 * R; r0 < rows; r0 += warps * R) {
    float acc[R];
#pragma unroll
    for (int q = 0; q < R; ++q)
      acc[q] = 0.0f;
    for (std::int64_t u = lane; u < units; u += 32) {
      const P wv = wp[u];
      P xv[R];
#pragma unroll
      for (int q = 0; q < R; ++q) {
        if (r0 + q < rows) xv[q] = reinterpret_cast<const P*>(x + (r0 + q) * in)[u];
      }
      const T* wt = reinterpret_cast<const T*>(&wv);
#pragma unroll
      for (int q = 0; q < R; ++q) {
        if (r0 + q >= rows) continue;
        const T* xt = reinterpret_cast<const T*>(&xv[q]);
#pragma unroll
        for (int j = 0; j < V; ++j)
          acc[q] += to_f(xt[j]) * to_f(wt[j]);
      }
    }
#pragma unroll
    for (int q = 0; q < R; ++q) {
      const float sum = warp_sum(acc[q]);
      if (lane == q && r0 + q < rows) y[r0 + q] = from_f<T>(sum + bias);
    }
  }
}

// The whole backward in one pass over x: dx[r, :] = dz[r] w (masked), the chunk's partial sums
// of x[r, c] dz[r] and of dz[r]. A block per chunk of rows (column_chunks: the same chunks
// whatever the GPU, so the same bits), a warp per row with kSingleOutputRows rows' loads in
// flight, the lanes along the row in packs of V, at most 32 K packs a lane's registers hold at
// once (wider rows go panel by panel, x read once all the same). The partials go to
// launch_chunk_totals (a fixed order); a single chunk writes dw and db itself.
inline constexpr int kSingleOutputWarps = kThreads / 32;

template <class T, int V, int K>
__global__ void __launch_bounds__(kThreads)
    single_output_backward_kernel(std::int64_t rows, std::int64_t in, std::int64_t chunk_rows,
                                  const T* x, const T* dz, const T* w, const std::uint8_t* mask,
                                  std::int64_t mask_row_bytes, T* dx, float* partial, float* dw,
                                  float* db) {
  using P = std::conditional_t<V == 1, T, Pack<T>>;
  constexpr int R = kSingleOutputRows, W = kSingleOutputWarps, kPanel = 32 * K * V;
  __shared__ float red[W][kPanel];
  __shared__ float red_db[W];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * chunk_rows;
  const std::int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  const std::int64_t units = in / V;
  const std::int64_t out_ld = in + 1;
  for (std::int64_t panel = 0; panel * 32 * K < units; ++panel) {
    const std::int64_t u0 = panel * 32 * K;
    float wv[K][V], acc[K][V];
    bool live[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::int64_t u = u0 + lane + 32 * k;
      live[k] = u < units;
      P p{};
      if (live[k]) p = reinterpret_cast<const P*>(w)[u];
      const T* pt = reinterpret_cast<const T*>(&p);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        wv[k][j] = to_f(pt[j]);
        acc[k][j] = 0.0f;
      }
    }
    float acc_db = 0.0f;
    for (std::int64_t rb = r0 + warp * R; rb < r1; rb += W * R) {
      P xv[R][K];
      float g[R];
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const bool row = rb + q < r1;
        g[q] = row ? to_f(dz[rb + q]) : 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (row && live[k])
            xv[q][k] = reinterpret_cast<const P*>(x + (rb + q) * in)[u0 + lane + 32 * k];
        }
      }
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const std::int64_t r = rb + q;
        if (r >= r1) continue;
        acc_db += g[q];
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (!live[k]) continue;
          const std::int64_t c0 = (u0 + lane + 32 * k) * V;
          const T* xt = reinterpret_cast<const T*>(&xv[q][k]);
#pragma unroll
          for (int j = 0; j < V; ++j)
            acc[k][j] += to_f(xt[j]) * g[q];
          if (dx == nullptr) continue;
          // V divides 8 and c0 is a multiple of V: the pack's bits lie in one mask byte.
          const unsigned bits =
              mask != nullptr ? mask[r * mask_row_bytes + c0 / 8] >> (c0 % 8) : ~0u;
          P out;
          T* ot = reinterpret_cast<T*>(&out);
#pragma unroll
          for (int j = 0; j < V; ++j)
            ot[j] = from_f<T>((bits >> j) & 1u ? g[q] * wv[k][j] : 0.0f);
          reinterpret_cast<P*>(dx + r * in)[c0 / V] = out;
        }
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j)
        red[warp][(lane + 32 * k) * V + j] = acc[k][j];
    }
    if (panel == 0 && lane == 0) red_db[warp] = acc_db;
    __syncthreads();
    const std::int64_t panel_cols = (units - u0 < 32 * K ? units - u0 : 32 * K) * V;
    for (int c = static_cast<int>(threadIdx.x); c < panel_cols; c += kThreads) {
      float s = 0.0f;
#pragma unroll
      for (int v = 0; v < W; ++v)
        s += red[v][c];
      if (gridDim.x == 1) {
        dw[u0 * V + c] = s;
      } else {
        partial[blockIdx.x * out_ld + u0 * V + c] = s;
      }
    }
    if (panel == 0 && threadIdx.x == 0) {
      float s = 0.0f;
#pragma unroll
      for (int v = 0; v < W; ++v)
        s += red_db[v];
      if (gridDim.x == 1) {
        *db = s;
      } else {
        partial[blockIdx.x * out_ld + in] = s;
      }
    }
    __syncthreads();
  }
}

// dw[c] for c < in, db for c == in: the one-output backward's partials have in + 1 columns.
struct StoreWeightAndBiasTotals {
  std::int64_t in;
  float* dw;
  float* db;
  __device__ void operator()(int, std::int64_t c, float v) const { (c < in ? dw[c] : *db) = v; }
};

// ---- BatchNorm ----------------------------------------------------------------------------------

template <class T>
struct ReadValue {
  const T* x;
  std::int64_t cols;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[1]) const {
    v[0] = to_f(x[r * cols + c]);
  }
};

template <class T>
struct CenteredSquare {
  const T* x;
  const float* mean;
  std::int64_t cols;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[1]) const {
    const float d = to_f(x[r * cols + c]) - mean[c];
    v[0] = d * d;
  }
};

__global__ void scale_kernel(std::int64_t n, float* v, float factor) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride())
    v[i] *= factor;
}

// var_sum holds sum (x - mean)^2 on entry and inv_std on exit.
__global__ void batch_norm_stats_kernel(std::int64_t rows, std::int64_t cols, const float* mean,
                                        float* var_sum, float eps, float factor,
                                        float* running_mean, float* running_var) {
  for (std::int64_t c = global_thread(); c < cols; c += global_stride()) {
    const float var = var_sum[c] / static_cast<float>(rows);
    const float unbiased = rows > 1 ? var_sum[c] / static_cast<float>(rows - 1) : var;
    var_sum[c] = 1.0f / sqrtf(var + eps);
    running_mean[c] = (1.0f - factor) * running_mean[c] + factor * mean[c];
    running_var[c] = (1.0f - factor) * running_var[c] + factor * unbiased;
  }
}

template <class T>
__global__ void normalize_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                 const float* gamma, const float* beta, const float* mean,
                                 const float* inv_std, T* y) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t c = i % cols;
    y[i] = from_f<T>(gamma[c] * (to_f(x[i]) - mean[c]) * inv_std[c] + beta[c]);
  }
}

template <class T>
__global__ void normalize_eval_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                      const float* gamma, const float* beta, float eps,
                                      const float* mean, const float* var, T* y) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t c = i % cols;
    y[i] = from_f<T>(gamma[c] * (to_f(x[i]) - mean[c]) / sqrtf(var[c] + eps) + beta[c]);
  }
}

template <class T>
struct BatchNormGradTerms {
  const T* dy;
  const T* x;
  const float* mean;
  const float* inv_std;
  std::int64_t cols;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[2]) const {
    const std::int64_t i = r * cols + c;
    const float g = to_f(dy[i]);
    v[0] = g;
    v[1] = g * (to_f(x[i]) - mean[c]) * inv_std[c];
  }
};

template <class T>
__global__ void batch_norm_input_grad_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                             const float* gamma, const float* mean,
                                             const float* inv_std, const T* dy, const float* dbeta,
                                             const float* dgamma, T* dx) {
  const std::int64_t n = rows * cols;
  const float b = static_cast<float>(rows);
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t c = i % cols;
    const float xh = (to_f(x[i]) - mean[c]) * inv_std[c];
    dx[i] = from_f<T>(gamma[c] * inv_std[c] / b * (b * to_f(dy[i]) - dbeta[c] - xh * dgamma[c]));
  }
}

// ---- Dice ---------------------------------------------------------------------------------------

template <class T>
struct ValueAndSquare {
  const T* x;
  std::int64_t cols;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[2]) const {
    const float a = to_f(x[r * cols + c]);
    v[0] = a;
    v[1] = a * a;
  }
};

__global__ void dice_stats_kernel(std::int64_t rows, std::int64_t cols, float* mean, float* var) {
  for (std::int64_t c = global_thread(); c < cols; c += global_stride()) {
    const float m = mean[c] / static_cast<float>(rows);
    var[c] = var[c] / static_cast<float>(rows) - m * m;
    mean[c] = m;
  }
}

__device__ __forceinline__ float dice_p(float x, float mean, float sd) {
  return 1.0f / (1.0f + expf(-(x - mean) / sd));
}

template <class T>
__global__ void dice_forward_kernel(std::int64_t rows, std::int64_t cols, const T* x, float alpha,
                                    float eps, const float* mean, const float* var, T* y) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t c = i % cols;
    const float v = to_f(x[i]);
    const float p = dice_p(v, mean[c], sqrtf(var[c] + eps));
    y[i] = from_f<T>(v * (alpha + (1.0f - alpha) * p));
  }
}

template <class T>
struct DiceGradTerms {
  const T* x;
  const T* dy;
  const float* mean;
  const float* var;
  float alpha, eps;
  std::int64_t cols;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[2]) const {
    const std::int64_t i = r * cols + c;
    const float xv = to_f(x[i]);
    const float p = dice_p(xv, mean[c], sqrtf(var[c] + eps));
    const float rr = to_f(dy[i]) * (1.0f - alpha) * xv * p * (1.0f - p);
    v[0] = rr;
    v[1] = rr * (xv - mean[c]);
  }
};

template <class T>
__global__ void dice_input_grad_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                       const float* mean, const float* var, float alpha, float eps,
                                       const T* dy, const float* sum_r, const float* sum_rx,
                                       T* dx) {
  const std::int64_t n = rows * cols;
  const float m = static_cast<float>(rows);
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t c = i % cols;
    const float xv = to_f(x[i]);
    const float sd = sqrtf(var[c] + eps);
    const float p = dice_p(xv, mean[c], sd);
    const float q = to_f(dy[i]);
    const float rr = q * (1.0f - alpha) * xv * p * (1.0f - p);
    dx[i] = from_f<T>(q * (alpha + (1.0f - alpha) * p) + rr / sd - sum_r[c] / (m * sd) -
                      (xv - mean[c]) * sum_rx[c] / (m * sd * sd * sd));
  }
}

unsigned warp_grid(std::int64_t rows) {
  return grid_for(rows * 32);
}

// Calls f(TypeTag<T>{}, TypeTag<U>{}) with U = T when `u` is the activation dtype `t`, U = float
// when `u` is f32 (a layer's f32 intermediate buffers); anything else is an error.
template <class T, class F>
void dispatch_wide(DType t, DType u, const char* what, F&& f) {
  if (u == DType::F32) {
    f(TypeTag<float>{});
  } else if (u == t) {
    f(TypeTag<T>{});
  } else {
    EMBER_THROW(what, ": a buffer of ", dtype_name(u), " with ", dtype_name(t),
                " activations (f32 or the activation dtype)");
  }
}

}  // namespace

// ---- MultiCross ---------------------------------------------------------------------------------

void cross_forward(DType dtype, DType x_dtype, DType y_dtype, std::int64_t batch,
                   std::int64_t width, const void* x0, const void* x, const float* w,
                   const float* bias, float* s, void* y, StreamHandle stream) {
  if (batch <= 0) return;
  dispatch_act(dtype, "MultiCross", [&](auto t0) {
    using T0 = typename decltype(t0)::type;
    dispatch_wide<T0>(dtype, x_dtype, "MultiCross input", [&](auto tx) {
      using TX = typename decltype(tx)::type;
      dispatch_wide<T0>(dtype, y_dtype, "MultiCross output", [&](auto ty) {
        using TY = typename decltype(ty)::type;
        cross_forward_kernel<T0, TX, TY><<<warp_grid(batch), kThreads, 0, stream>>>(
            batch, width, static_cast<const T0*>(x0), static_cast<const TX*>(x), w, bias, s,
            static_cast<TY*>(y));
        EMBER_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

void cross_backward(DType dtype, DType g_dtype, DType x_dtype, DType dx_dtype, std::int64_t batch,
                    std::int64_t width, const void* x0, const void* x, const float* w,
                    const float* s, const void* g_in, float* g_out, const float* dx_acc,
                    void* dx_out, bool first, bool last, float* t, float* dw, float* dbias,
                    float* workspace, StreamHandle stream) {
  if (batch <= 0 || width <= 0) return;
  dispatch_act(dtype, "MultiCross backward", [&](auto t0) {
    using T0 = typename decltype(t0)::type;
    dispatch_wide<T0>(dtype, g_dtype, "MultiCross gradient", [&](auto tg) {
      using TG = typename decltype(tg)::type;
      const TG* g = static_cast<const TG*>(g_in);
      row_dot_kernel<TG, T0><<<warp_grid(batch), kThreads, 0, stream>>>(
          batch, width, g, static_cast<const T0*>(x0), t);
      EMBER_CUDA_CHECK_LAUNCH();
      dispatch_wide<T0>(dtype, x_dtype, "MultiCross input", [&](auto tx) {
        using TX = typename decltype(tx)::type;
        column_reduce<2>(batch, width,
                         CrossGradTerms<TG, TX>{g, t, static_cast<const TX*>(x), width}, dbias, dw,
                         workspace, stream);
      });
      dispatch_wide<T0>(dtype, dx_dtype, "MultiCross input gradient", [&](auto td) {
        using TD = typename decltype(td)::type;
        cross_input_grad_kernel<TG, TD><<<grid_for(batch * width), kThreads, 0, stream>>>(
            batch, width, w, s, t, g, g_out, dx_acc, static_cast<TD*>(dx_out), first, last);
        EMBER_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

// ---- WeightMultiply -----------------------------------------------------------------------------

void weight_multiply_forward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t vec,
                             const void* in, const float* w, void* out, StreamHandle stream) {
  const std::int64_t n = batch * slots * vec;
  if (n <= 0) return;
  dispatch_act(dtype, "WeightMultiply", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto index, auto vector) {
      using I = typename decltype(index)::type;
      constexpr int V = decltype(vector)::value;
      weight_multiply_kernel<T, I, V><<<grid_for(n / V + 1), kThreads, 0, stream>>>(
          static_cast<I>(n), static_cast<I>(slots), static_cast<I>(vec), static_cast<const T*>(in),
          w, static_cast<T*>(out));
      EMBER_CUDA_CHECK_LAUNCH();
    };
    with_index_and_pack<T>(n, aligned16(out), launch);
  });
}

void weight_multiply_backward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t vec,
                              const void* in, const float* w, const void* dout, void* din,
                              float* dw, float* workspace, StreamHandle stream) {
  EMBER_CHECK(slots * vec < (std::int64_t{1} << 32), "WeightMultiply: ", slots, " x ", vec,
              " weights exceed 2^32");
  dispatch_act(dtype, "WeightMultiply backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = static_cast<const T*>(dout);
    column_reduce<1>(batch, slots * vec,
                     WeightMultiplyGrad<T>{static_cast<const T*>(in), g, slots, vec}, dw, nullptr,
                     workspace, stream);
    if (din != nullptr && batch * slots > 0) {
      weight_multiply_input_grad_kernel<T><<<grid_for(batch * slots), kThreads, 0, stream>>>(
          batch, slots, vec, w, g, static_cast<T*>(din));
      EMBER_CUDA_CHECK_LAUNCH();
    }
  });
}

// ---- fully connected layers with one output --------------------------------------------------

void single_output_forward(DType dtype, std::int64_t rows, std::int64_t in, const void* x,
                           const void* w, const void* b, void* y, StreamHandle stream) {
  if (rows <= 0) return;
  dispatch_act(dtype, "single-output layer", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = Pack<T>::kSize;
    const unsigned grid = grid_for((rows + kSingleOutputRows - 1) / kSingleOutputRows * 32);
    if (in % V == 0 && aligned16(x) && aligned16(w)) {
      single_output_forward_kernel<T, V><<<grid, kThreads, 0, stream>>>(
          rows, in, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
          static_cast<T*>(y));
    } else {
      single_output_forward_kernel<T, 1><<<grid, kThreads, 0, stream>>>(
          rows, in, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
          static_cast<T*>(y));
    }
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void single_output_backward(DType dtype, std::int64_t rows, std::int64_t in, const void* x,
                            const void* dz, const void* w, const void* mask,
                            std::int64_t mask_ld_bits, void* dx, float* dw, float* db,
                            float* workspace, StreamHandle stream) {
  if (in <= 0) return;
  if (rows <= 0) {
    EMBER_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<std::size_t>(in) * sizeof(float), stream));
    EMBER_CUDA_CHECK(cudaMemsetAsync(db, 0, sizeof(float), stream));
    return;
  }
  const std::int64_t chunks = column_chunks(rows), chunk_rows = column_chunk_rows(rows);
  dispatch_act(dtype, "single-output layer backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto vector, auto regs) {
      constexpr int V = decltype(vector)::value, K = decltype(regs)::value;
      single_output_backward_kernel<T, V, K>
          <<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
              rows, in, chunk_rows, static_cast<const T*>(x), static_cast<const T*>(dz),
              static_cast<const T*>(w), static_cast<const std::uint8_t*>(mask), mask_ld_bits / 8,
              static_cast<T*>(dx), workspace, dw, db);
      EMBER_CUDA_CHECK_LAUNCH();
    };
    auto with_regs = [&](auto vector) {
      constexpr int V = decltype(vector)::value;
      const std::int64_t units = in / V;
      if (units <= 32) {
        launch(vector, std::integral_constant<int, 1>{});
      } else if (units <= 64) {
        launch(vector, std::integral_constant<int, 2>{});
      } else {
        launch(vector, std::integral_constant<int, 4>{});
      }
    };
    constexpr int V = Pack<T>::kSize;
    const bool packed =
        in % V == 0 && aligned16(x) && aligned16(w) && (dx == nullptr || aligned16(dx));
    if (packed) {
      with_regs(std::integral_constant<int, V>{});
    } else {
      with_regs(std::integral_constant<int, 1>{});
    }
  });
  if (chunks > 1) {
    launch_chunk_totals<1>(chunks, in + 1, in + 1, workspace, StoreWeightAndBiasTotals{in, dw, db},
                           stream);
  }
}

// ---- BatchNorm ----------------------------------------------------------------------------------

void batch_norm_forward_train(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                              const float* gamma, const float* beta, float eps, float factor,
                              void* y, float* save_mean, float* save_inv_std, float* running_mean,
                              float* running_var, float* workspace, StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "BatchNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    column_reduce<1>(rows, cols, ReadValue<T>{in, cols}, save_mean, nullptr, workspace, stream);
    scale_kernel<<<grid_for(cols), kThreads, 0, stream>>>(cols, save_mean,
                                                          1.0f / static_cast<float>(rows));
    EMBER_CUDA_CHECK_LAUNCH();
    column_reduce<1>(rows, cols, CenteredSquare<T>{in, save_mean, cols}, save_inv_std, nullptr,
                     workspace, stream);
    batch_norm_stats_kernel<<<grid_for(cols), kThreads, 0, stream>>>(
        rows, cols, save_mean, save_inv_std, eps, factor, running_mean, running_var);
    EMBER_CUDA_CHECK_LAUNCH();
    normalize_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        rows, cols, in, gamma, beta, save_mean, save_inv_std, static_cast<T*>(y));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_forward_eval(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                             const float* gamma, const float* beta, float eps,
                             const float* running_mean, const float* running_var, void* y,
                             StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "BatchNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize_eval_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        rows, cols, static_cast<const T*>(x), gamma, beta, eps, running_mean, running_var,
        static_cast<T*>(y));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                         const float* gamma, const float* save_mean, const float* save_inv_std,
                         const void* dy, void* dx, float* dgamma, float* dbeta, float* workspace,
                         StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "BatchNorm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    const T* g = static_cast<const T*>(dy);
    column_reduce<2>(rows, cols, BatchNormGradTerms<T>{g, in, save_mean, save_inv_std, cols}, dbeta,
                     dgamma, workspace, stream);
    if (dx != nullptr) {
      batch_norm_input_grad_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
          rows, cols, in, gamma, save_mean, save_inv_std, g, dbeta, dgamma, static_cast<T*>(dx));
      EMBER_CUDA_CHECK_LAUNCH();
    }
  });
}

// ---- Dice ---------------------------------------------------------------------------------------

void dice_forward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x, float alpha,
                  float eps, void* y, float* mean, float* var, float* workspace,
                  StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "PReLU_Dice", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    column_reduce<2>(rows, cols, ValueAndSquare<T>{in, cols}, mean, var, workspace, stream);
    dice_stats_kernel<<<grid_for(cols), kThreads, 0, stream>>>(rows, cols, mean, var);
    EMBER_CUDA_CHECK_LAUNCH();
    dice_forward_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        rows, cols, in, alpha, eps, mean, var, static_cast<T*>(y));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void dice_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                   const float* mean, const float* var, float alpha, float eps, const void* dy,
                   void* dx, float* workspace, StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  float* sum_r = workspace + 2 * column_sum_workspace(rows, cols);
  float* sum_rx = sum_r + cols;
  dispatch_act(dtype, "PReLU_Dice backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    const T* g = static_cast<const T*>(dy);
    column_reduce<2>(rows, cols, DiceGradTerms<T>{in, g, mean, var, alpha, eps, cols}, sum_r,
                     sum_rx, workspace, stream);
    dice_input_grad_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        rows, cols, in, mean, var, alpha, eps, g, sum_r, sum_rx, static_cast<T*>(dx));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ember::network::cuda
