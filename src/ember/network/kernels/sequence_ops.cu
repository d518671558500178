// Kernels of the sequence layers: the GRU cell's step (f32) and the attention's masked softmax
// (f32 scores, probabilities in the activation dtype).
#include <cuda_runtime.h>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::cuda {

// The shared launch sizing, conversions and reductions (device_utils.cuh).
using namespace detail;

namespace {

__device__ __forceinline__ float sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// ---- GRU
// ------------------------------------------------------------------------------------------

__global__ void gru_forward_kernel(std::int64_t batch, std::int64_t hidden, const float* gx,
                                   std::int64_t ld_x, const float* gh, const float* bias,
                                   const float* h_prev, std::int64_t ld_h, float* h, float* gates,
                                   std::int64_t ld_g) {
  const std::int64_t H = hidden, n = batch * hidden;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t b = i / H, j = i % H;
    const float* x = gx + b * ld_x;
    const float* g = gh != nullptr ? gh + b * 3 * H : nullptr;
    const float ghr = g ? g[j] : 0.0f, ghz = g ? g[H + j] : 0.0f, ghn = g ? g[2 * H + j] : 0.0f;
    const float r = sigmoidf(x[j] + bias[j] + ghr);
    const float z = sigmoidf(x[H + j] + bias[H + j] + ghz);
    const float nn = tanhf(x[2 * H + j] + bias[2 * H + j] + r * ghn);
    const float hp = h_prev != nullptr ? h_prev[b * ld_h + j] : 0.0f;
    h[b * ld_h + j] = (1.0f - z) * nn + z * hp;
    float* out = gates + b * ld_g;
    out[j] = r;
    out[H + j] = z;
    out[2 * H + j] = nn;
    out[3 * H + j] = ghn;
  }
}

__global__ void gru_backward_kernel(std::int64_t batch, std::int64_t hidden, const float* dy,
                                    std::int64_t ld_h, const float* dh_next, const float* gates,
                                    std::int64_t ld_g, const float* h_prev, float* dgx,
                                    std::int64_t ld_x, float* dgh, float* dh_prev) {
  const std::int64_t H = hidden, n = batch * hidden;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const std::int64_t b = i / H, j = i % H;
    const float* g = gates + b * ld_g;
    const float dh = dy[b * ld_h + j] + (dh_next != nullptr ? dh_next[i] : 0.0f);
    const float r = g[j], z = g[H + j], nn = g[2 * H + j], ghn = g[3 * H + j];
    const float hp = h_prev != nullptr ? h_prev[b * ld_h + j] : 0.0f;
    const float dan = dh * (1.0f - z) * (1.0f - nn * nn);
    const float dar = dan * ghn * r * (1.0f - r);
    const float daz = dh * (hp - nn) * z * (1.0f - z);
    dgx[b * ld_x + j] = dar;
    dgx[b * ld_x + H + j] = daz;
    dgx[b * ld_x + 2 * H + j] = dan;
    dgh[b * 3 * H + j] = dar;
    dgh[b * 3 * H + H + j] = daz;
    dgh[b * 3 * H + 2 * H + j] = dan * r;
    dh_prev[i] = dh * z;
  }
}

// ---- attention
// ------------------------------------------------------------------------------------

constexpr float kMaskPenalty = 10000.0f;

// One warp per row of the [batch, heads, from, to] scores; the mask [batch, 1, from, to] is
// shared by the heads. As on the CPU (attention_layer.cpp), exponents are (s_c - s_t) +
// (pen_c - pen_t) relative to the row's largest logit t, so fully masked rows keep their scores'
// precision.
template <class T>
__global__ void attention_softmax_kernel(std::int64_t rows, std::int64_t cols, std::int64_t heads,
                                         std::int64_t from, const float* scores, const T* mask,
                                         T* probs) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_thread() / 32; r < rows; r += warps) {
    const float* s = scores + r * cols;
    const T* m = mask != nullptr ? mask + ((r / (heads * from)) * from + r % from) * cols : nullptr;
    auto penalty = [&](std::int64_t c) {
      return m != nullptr ? -kMaskPenalty * (1.0f - to_f(m[c])) : 0.0f;
    };
    // The largest logit with its score and penalty; of equal ones the first, so that every
    // lane ends with the same reference.
    float best = -INFINITY, best_s = 0.0f, best_p = 0.0f;
    std::int64_t best_c = cols;
    for (std::int64_t c = lane; c < cols; c += 32) {
      const float pen = penalty(c);
      if (s[c] + pen > best) {
        best = s[c] + pen;
        best_s = s[c];
        best_p = pen;
        best_c = c;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, o);
      const float other_s = __shfl_xor_sync(0xffffffffu, best_s, o);
      const float other_p = __shfl_xor_sync(0xffffffffu, best_p, o);
      const std::int64_t other_c = __shfl_xor_sync(0xffffffffu, best_c, o);
      if (other > best || (other == best && other_c < best_c)) {
        best = other;
        best_s = other_s;
        best_p = other_p;
        best_c = other_c;
      }
    }
    float sum = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32)
      sum += expf((s[c] - best_s) + (penalty(c) - best_p));
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    for (std::int64_t c = lane; c < cols; c += 32)
      probs[r * cols + c] = from_f<T>(expf((s[c] - best_s) + (penalty(c) - best_p)) * inv);
  }
}

// dS = P (dP - sum(dP P)) per row; dP is f32.
template <class T>
__global__ void attention_softmax_backward_kernel(std::int64_t rows, std::int64_t cols,
                                                  const T* probs, const float* dprobs, T* dscores) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = global_thread() / 32; r < rows; r += warps) {
    float dot = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32)
      dot += dprobs[r * cols + c] * to_f(probs[r * cols + c]);
    dot = warp_sum(dot);
    for (std::int64_t c = lane; c < cols; c += 32) {
      const std::int64_t i = r * cols + c;
      dscores[i] = from_f<T>(to_f(probs[i]) * (dprobs[i] - dot));
    }
  }
}

}  // namespace

void gru_forward_step(std::int64_t batch, std::int64_t hidden, const float* gx, std::int64_t ld_x,
                      const float* gh, const float* bias, const float* h_prev, std::int64_t ld_h,
                      float* h, float* gates, std::int64_t ld_g, StreamHandle stream) {
  const std::int64_t n = batch * hidden;
  if (n <= 0) return;
  gru_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(batch, hidden, gx, ld_x, gh, bias,
                                                           h_prev, ld_h, h, gates, ld_g);
  EMBER_CUDA_CHECK_LAUNCH();
}

void gru_backward_step(std::int64_t batch, std::int64_t hidden, const float* dy, std::int64_t ld_h,
                       const float* dh_next, const float* gates, std::int64_t ld_g,
                       const float* h_prev, float* dgx, std::int64_t ld_x, float* dgh,
                       float* dh_prev, StreamHandle stream) {
  const std::int64_t n = batch * hidden;
  if (n <= 0) return;
  gru_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(batch, hidden, dy, ld_h, dh_next, gates,
                                                            ld_g, h_prev, dgx, ld_x, dgh, dh_prev);
  EMBER_CUDA_CHECK_LAUNCH();
}

void attention_softmax(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t heads,
                       std::int64_t from, const float* scores, const void* mask, void* probs,
                       StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "MultiHeadAttention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_softmax_kernel<T><<<grid_for(rows * 32), kThreads, 0, stream>>>(
        rows, cols, heads, from, scores, static_cast<const T*>(mask), static_cast<T*>(probs));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void attention_softmax_backward(DType dtype, std::int64_t rows, std::int64_t cols,
                                const void* probs, const float* dprobs, void* dscores,
                                StreamHandle stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_act(dtype, "MultiHeadAttention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_softmax_backward_kernel<T><<<grid_for(rows * 32), kThreads, 0, stream>>>(
        rows, cols, static_cast<const T*>(probs), dprobs, static_cast<T*>(dscores));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ember::network::cuda
