// Element-wise kernels of the network layer: activations, dropout, sums and products of
// operands, the Scale layer's repetition, bias + activation, column sums.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/dropout_mask.hpp"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::cuda {

// The shared launch sizing, conversions and reductions (device_utils.cuh).
using namespace detail;

namespace {

template <class T>
__global__ void activation_forward_kernel(Activation act, std::int64_t n, const T* x, T* y,
                                          float alpha) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const float v = to_f(x[i]);
    float r;
    switch (act) {
      case Activation::Relu:
        r = v > 0.0f ? v : 0.0f;
        break;
      case Activation::Sigmoid:
        r = 1.0f / (1.0f + expf(-v));
        break;
      default:
        r = v > 0.0f ? v : alpha * expm1f(v);
        break;
    }
    y[i] = from_f<T>(r);
  }
}

template <class T>
__global__ void activation_backward_kernel(Activation act, std::int64_t n, const T* x, const T* y,
                                           const T* dy, T* dx, float alpha) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    const float g = to_f(dy[i]);
    float r;
    switch (act) {
      case Activation::Relu:
        r = to_f(y[i]) > 0.0f ? g : 0.0f;
        break;
      case Activation::Sigmoid: {
        const float s = to_f(y[i]);
        r = g * s * (1.0f - s);
        break;
      }
      default: {
        const float v = to_f(x[i]);
        r = v > 0.0f ? g : g * alpha * expf(v);
        break;
      }
    }
    dx[i] = from_f<T>(r);
  }
}

// A pack of elements a thread (one 16-byte load and store, several draws in flight) where the
// pointers are 16-byte aligned, else one element: a 2-byte access per thread left the pass at a
// third of the memory's bandwidth (DeepFM's four dropouts, 0.04 ms each at [65536, 200] f16).
// With `relu` (the backward of a dropout whose input is a ReLU layer's output), an element whose
// input is not positive gets no gradient either: the ReLU layer's own gradient pass, folded in.
template <class T, int V>
__global__ void dropout_kernel(std::int64_t n, const T* x, T* y, DropoutMask mask, float scale,
                               const T* relu) {
  using P = std::conditional_t<V == 1, T, Pack<T>>;
  const std::int64_t packs = n / V;
  const auto* xp = reinterpret_cast<const P*>(x);
  auto* yp = reinterpret_cast<P*>(y);
  for (std::int64_t i = global_thread(); i < packs; i += global_stride()) {
    P p = xp[i];
    P r{};
    if (relu != nullptr) r = reinterpret_cast<const P*>(relu)[i];
    T* v = reinterpret_cast<T*>(&p);
    const T* rv = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const bool keep = mask.keeps(static_cast<std::uint64_t>(i * V + j)) &&
                        (relu == nullptr || to_f(rv[j]) > 0.0f);
      v[j] = keep ? from_f<T>(to_f(v[j]) * scale) : from_f<T>(0.0f);
    }
    yp[i] = p;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += global_stride()) {
    const bool keep =
        mask.keeps(static_cast<std::uint64_t>(i)) && (relu == nullptr || to_f(relu[i]) > 0.0f);
    y[i] = keep ? from_f<T>(to_f(x[i]) * scale) : from_f<T>(0.0f);
  }
}

struct Operands {
  const void* p[kMaxOperands];
};
struct Outputs {
  void* p[kMaxOperands];
};

template <class T>
__global__ void add_n_kernel(std::int64_t n, Operands in, int count, T* out) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    float s = 0.0f;
    for (int k = 0; k < count; ++k)
      s += to_f(static_cast<const T*>(in.p[k])[i]);
    out[i] = from_f<T>(s);
  }
}

template <class T>
__global__ void axpby_kernel(std::int64_t n, const T* a, float alpha, const T* b, float beta,
                             T* out) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    float v = alpha * to_f(a[i]);
    if (b != nullptr) v += beta * to_f(b[i]);
    out[i] = from_f<T>(v);
  }
}

template <class T>
__global__ void multiply_n_kernel(std::int64_t n, Operands in, int count, T* out) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    float s = 1.0f;
    for (int k = 0; k < count; ++k)
      s *= to_f(static_cast<const T*>(in.p[k])[i]);
    out[i] = from_f<T>(s);
  }
}

template <class T>
__global__ void multiply_n_backward_kernel(std::int64_t n, Operands in, int count, const T* dy,
                                           Outputs grads) {
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    float v[kMaxOperands];
    for (int k = 0; k < count; ++k)
      v[k] = to_f(static_cast<const T*>(in.p[k])[i]);
    const float g = to_f(dy[i]);
    for (int k = 0; k < count; ++k) {
      if (grads.p[k] == nullptr) continue;
      float prod = g;
      for (int j = 0; j < count; ++j) {
        if (j != k) prod *= v[j];
      }
      static_cast<T*>(grads.p[k])[i] = from_f<T>(prod);
    }
  }
}

template <class T>
__global__ void repeat_forward_kernel(std::int64_t rows, std::int64_t cols, int axis, int factor,
                                      const T* x, T* y) {
  const std::int64_t n = rows * cols * factor;
  for (std::int64_t o = global_thread(); o < n; o += global_stride()) {
    std::int64_t src;
    if (axis == 0) {
      src = o / factor;
    } else {
      const std::int64_t out_row = o / cols, c = o % cols;
      src = (out_row / factor) * cols + c;
    }
    y[o] = x[src];
  }
}

template <class T>
__global__ void repeat_backward_kernel(std::int64_t rows, std::int64_t cols, int axis, int factor,
                                       const T* dy, T* dx) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    float s = 0.0f;
    if (axis == 0) {
      for (int k = 0; k < factor; ++k)
        s += to_f(dy[i * factor + k]);
    } else {
      const std::int64_t r = i / cols, c = i % cols;
      for (int k = 0; k < factor; ++k)
        s += to_f(dy[(r * factor + k) * cols + c]);
    }
    dx[i] = from_f<T>(s);
  }
}

template <class T>
__global__ void bias_activation_kernel(std::int64_t rows, std::int64_t cols, const T* bias,
                                       bool relu, T* out) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = global_thread(); i < n; i += global_stride()) {
    float v = to_f(out[i]) + to_f(bias[i % cols]);
    if (relu && v < 0.0f) v = 0.0f;
    out[i] = from_f<T>(v);
  }
}

// bias_activation when cols is a multiple of the pack size and every pointer is 16-byte
// aligned, so each pack lies inside one row.
template <class T>
__global__ void bias_activation_packed_kernel(std::int64_t packs, std::int64_t cols, const T* bias,
                                              bool relu, T* out) {
  constexpr int V = Pack<T>::kSize;
  auto* o = reinterpret_cast<Pack<T>*>(out);
  for (std::int64_t i = global_thread(); i < packs; i += global_stride()) {
    const std::int64_t col = (i * V) % cols;
    Pack<T> p = o[i];
    const Pack<T> b = *reinterpret_cast<const Pack<T>*>(bias + col);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = to_f(p.v[j]) + to_f(b.v[j]);
      if (relu && v < 0.0f) v = 0.0f;
      p.v[j] = from_f<T>(v);
    }
    o[i] = p;
  }
}

// ReLU forward (y may alias x) and backward (dx = y > 0 ? dy : 0, dx may alias dy) in packs;
// elements past the last whole pack are done one by one.
template <class T>
__global__ void relu_forward_packed_kernel(std::int64_t n, const T* x, T* y) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  const auto* xp = reinterpret_cast<const Pack<T>*>(x);
  auto* yp = reinterpret_cast<Pack<T>*>(y);
  for (std::int64_t i = global_thread(); i < packs; i += global_stride()) {
    Pack<T> p = xp[i];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (!(to_f(p.v[j]) > 0.0f)) p.v[j] = from_f<T>(0.0f);
    }
    yp[i] = p;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += global_stride()) {
    y[i] = to_f(x[i]) > 0.0f ? x[i] : from_f<T>(0.0f);
  }
}

template <class T>
__global__ void relu_backward_packed_kernel(std::int64_t n, const T* y, const T* dy, T* dx) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  const auto* yp = reinterpret_cast<const Pack<T>*>(y);
  const auto* gp = reinterpret_cast<const Pack<T>*>(dy);
  auto* dp = reinterpret_cast<Pack<T>*>(dx);
  for (std::int64_t i = global_thread(); i < packs; i += global_stride()) {
    const Pack<T> a = yp[i];
    Pack<T> g = gp[i];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (!(to_f(a.v[j]) > 0.0f)) g.v[j] = from_f<T>(0.0f);
    }
    dp[i] = g;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += global_stride()) {
    dx[i] = to_f(y[i]) > 0.0f ? dy[i] : from_f<T>(0.0f);
  }
}

// Column sums of [rows, cols] in 16-byte packs; with kRelu, the FC layer's ReLU and bias
// gradients in one pass: dx = dy * (y > 0) (dx may alias dy), summed. A (32 x 8)-thread block
// covers 32 packs of columns and one chunk of rows, as column_partial_kernel does for one column
// each: a pack a thread keeps the loads 16 bytes wide, which a pass over 16-bit values needs to
// approach the memory's bandwidth. kPackedSumRowsInFlight rows are loaded before any is used;
// the sums run in a fixed order (a thread's rows, then the 8 row lanes, then the chunks), so
// they are run-to-run deterministic.
inline constexpr int kPackedSumRowsInFlight = 4;

template <class T, bool kRelu>
__global__ void column_sum_packed_kernel(std::int64_t rows, std::int64_t packs,
                                         std::int64_t chunk_rows, const T* y, const T* dy, T* dx,
                                         float* partial, float* out) {
  constexpr int V = Pack<T>::kSize;
  // [row lane][element of the pack][pack], padded so that neither the stores (a warp's packs)
  // nor the block's column reads fall on one bank.
  __shared__ float red[8 * V][33];
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk_rows;
  const std::int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  const auto* yp = reinterpret_cast<const Pack<T>*>(y);
  const auto* gp = reinterpret_cast<const Pack<T>*>(dy);
  auto* dp = reinterpret_cast<Pack<T>*>(dx);
  float acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    acc[j] = 0.0f;
  // Row r's pack: the ReLU gradient applied and stored (kRelu), then added to the sums.
  const auto load = [&](std::int64_t r, Pack<T>& a, Pack<T>& g) {
    if constexpr (kRelu) a = yp[r * packs + p];
    g = gp[r * packs + p];
  };
  const auto apply = [&](std::int64_t r, const Pack<T>& a, Pack<T>& g) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if constexpr (kRelu) {
        if (!(to_f(a.v[j]) > 0.0f)) g.v[j] = from_f<T>(0.0f);
      }
      acc[j] += to_f(g.v[j]);
    }
    if constexpr (kRelu) dp[r * packs + p] = g;
  };
  if (p < packs) {
    constexpr int K = kPackedSumRowsInFlight;
    std::int64_t r = r0 + threadIdx.y;
    for (; r + 8 * (K - 1) < r1; r += 8 * K) {
      Pack<T> a[K], g[K];
#pragma unroll
      for (int u = 0; u < K; ++u)
        load(r + 8 * u, a[u], g[u]);
#pragma unroll
      for (int u = 0; u < K; ++u)
        apply(r + 8 * u, a[u], g[u]);
    }
    for (; r < r1; r += 8) {
      Pack<T> a, g;
      load(r, a, g);
      apply(r, a, g);
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j)
    red[threadIdx.y * V + j][threadIdx.x] = acc[j];
  __syncthreads();
  // The block's 32 * V columns, one a thread (twice for f16 and bf16's 256 on 256 threads).
  const std::int64_t cols = packs * V;
  for (int q = static_cast<int>(threadIdx.y * 32 + threadIdx.x); q < 32 * V; q += 256) {
    const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 * V + q;
    if (c >= cols) break;
    const int j = q % V, pack = q / V;
    float s = 0.0f;
#pragma unroll
    for (int lane = 0; lane < 8; ++lane)
      s += red[lane * V + j][pack];
    if (gridDim.y == 1) {
      out[c] = s;
    } else {
      partial[static_cast<std::int64_t>(blockIdx.y) * cols + c] = s;
    }
  }
}

template <class T>
struct ReadColumn {
  const T* in;
  std::int64_t cols;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&v)[1]) const {
    v[0] = to_f(in[r * cols + c]);
  }
};

}  // namespace

void activation_forward(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                        float alpha, StreamHandle stream) {
  if (n <= 0) return;
  dispatch_act(dtype, "activation", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (act == Activation::Relu && aligned16(x) && aligned16(y)) {
      relu_forward_packed_kernel<T><<<grid_for(n / Pack<T>::kSize + 1), kThreads, 0, stream>>>(
          n, static_cast<const T*>(x), static_cast<T*>(y));
      EMBER_CUDA_CHECK_LAUNCH();
      return;
    }
    activation_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        act, n, static_cast<const T*>(x), static_cast<T*>(y), alpha);
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void activation_backward(Activation act, DType dtype, std::int64_t n, const void* x, const void* y,
                         const void* dy, void* dx, float alpha, StreamHandle stream) {
  if (n <= 0) return;
  dispatch_act(dtype, "activation backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (act == Activation::Relu && aligned16(y) && aligned16(dy) && aligned16(dx)) {
      relu_backward_packed_kernel<T><<<grid_for(n / Pack<T>::kSize + 1), kThreads, 0, stream>>>(
          n, static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx));
      EMBER_CUDA_CHECK_LAUNCH();
      return;
    }
    activation_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        act, n, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
        static_cast<T*>(dx), alpha);
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void dropout(DType dtype, std::int64_t n, const void* x, void* y, float rate, std::uint64_t seed,
             std::uint64_t step, StreamHandle stream, const void* relu_input) {
  if (n <= 0) return;
  const DropoutMask mask = DropoutMask::of(dropout_stream(seed, step), rate);
  const float scale = 1.0f / (1.0f - rate);
  dispatch_act(dtype, "Dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* relu = static_cast<const T*>(relu_input);
    if (aligned16(x) && aligned16(y) && aligned16(relu)) {
      constexpr int V = Pack<T>::kSize;
      dropout_kernel<T, V><<<grid_for(n / V + 1), kThreads, 0, stream>>>(
          n, static_cast<const T*>(x), static_cast<T*>(y), mask, scale, relu);
    } else {
      dropout_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(
          n, static_cast<const T*>(x), static_cast<T*>(y), mask, scale, relu);
    }
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void add_n(DType dtype, std::int64_t n, const void* const* inputs, int count, void* out,
           StreamHandle stream) {
  EMBER_CHECK(count >= 1 && count <= kMaxOperands, "add_n: ", count, " operands (1 to ",
              kMaxOperands, ")");
  if (n <= 0) return;
  Operands ops{};
  for (int k = 0; k < count; ++k)
    ops.p[k] = inputs[k];
  dispatch_act(dtype, "Add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_n_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(n, ops, count, static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void axpby(DType dtype, std::int64_t n, const void* a, float alpha, const void* b, float beta,
           void* out, StreamHandle stream) {
  if (n <= 0) return;
  dispatch_act(dtype, "axpby", [&](auto tag) {
    using T = typename decltype(tag)::type;
    axpby_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        n, static_cast<const T*>(a), alpha, static_cast<const T*>(b), beta, static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void multiply_n(DType dtype, std::int64_t n, const void* const* inputs, int count, void* out,
                StreamHandle stream) {
  EMBER_CHECK(count >= 1 && count <= kMaxOperands, "multiply_n: ", count, " operands (1 to ",
              kMaxOperands, ")");
  if (n <= 0) return;
  Operands ops{};
  for (int k = 0; k < count; ++k)
    ops.p[k] = inputs[k];
  dispatch_act(dtype, "ElementwiseMultiply", [&](auto tag) {
    using T = typename decltype(tag)::type;
    multiply_n_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(n, ops, count, static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void multiply_n_backward(DType dtype, std::int64_t n, const void* const* inputs, int count,
                         const void* dy, void* const* grads, StreamHandle stream) {
  EMBER_CHECK(count >= 1 && count <= kMaxOperands, "multiply_n_backward: ", count,
              " operands (1 to ", kMaxOperands, ")");
  if (n <= 0) return;
  Operands ops{};
  Outputs outs{};
  for (int k = 0; k < count; ++k) {
    ops.p[k] = inputs[k];
    outs.p[k] = grads[k];
  }
  dispatch_act(dtype, "ElementwiseMultiply backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    multiply_n_backward_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(n, ops, count, static_cast<const T*>(dy), outs);
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void repeat_forward(DType dtype, std::int64_t rows, std::int64_t cols, int axis, int factor,
                    const void* x, void* y, StreamHandle stream) {
  const std::int64_t n = rows * cols * factor;
  if (n <= 0) return;
  dispatch_act(dtype, "Scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    repeat_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        rows, cols, axis, factor, static_cast<const T*>(x), static_cast<T*>(y));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void repeat_backward(DType dtype, std::int64_t rows, std::int64_t cols, int axis, int factor,
                     const void* dy, void* dx, StreamHandle stream) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  dispatch_act(dtype, "Scale backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    repeat_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        rows, cols, axis, factor, static_cast<const T*>(dy), static_cast<T*>(dx));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void bias_activation(DType dtype, std::int64_t rows, std::int64_t cols, const void* bias, bool relu,
                     void* out, StreamHandle stream) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  dispatch_act(dtype, "bias + activation", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = Pack<T>::kSize;
    if (cols % V == 0 && aligned16(bias) && aligned16(out)) {
      bias_activation_packed_kernel<T><<<grid_for(n / V), kThreads, 0, stream>>>(
          n / V, cols, static_cast<const T*>(bias), relu, static_cast<T*>(out));
      EMBER_CUDA_CHECK_LAUNCH();
      return;
    }
    bias_activation_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        rows, cols, static_cast<const T*>(bias), relu, static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

namespace {

// column_sum_packed_kernel and, with several chunks, the chunks' sums in order.
template <class T, bool kRelu>
void launch_packed_column_sum(std::int64_t rows, std::int64_t cols, const T* y, const T* dy, T* dx,
                              float* sums, float* workspace, StreamHandle stream) {
  const std::int64_t chunks = column_chunks(rows);
  const std::int64_t packs = cols / Pack<T>::kSize;
  const dim3 grid(static_cast<unsigned>((packs + 31) / 32), static_cast<unsigned>(chunks));
  column_sum_packed_kernel<T, kRelu><<<grid, dim3(32, 8), 0, stream>>>(
      rows, packs, column_chunk_rows(rows), y, dy, dx, workspace, sums);
  EMBER_CUDA_CHECK_LAUNCH();
  finish_column_chunks<1>(chunks, cols, workspace, sums, nullptr, stream);
}

template <class T>
bool packs_fit(std::int64_t cols) {
  return cols % Pack<T>::kSize == 0;
}

}  // namespace

void column_sum(DType dtype, std::int64_t rows, std::int64_t cols, const void* in, float* out,
                float* workspace, StreamHandle stream) {
  if (cols <= 0) return;
  dispatch_act(dtype, "column sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    if (packs_fit<T>(cols) && aligned16(in)) {
      launch_packed_column_sum<T, false>(rows, cols, nullptr, x, nullptr, out, workspace, stream);
      return;
    }
    detail::column_reduce<1>(rows, cols, ReadColumn<T>{x, cols}, out, nullptr, workspace, stream);
  });
}

void relu_backward_column_sum(DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                              const void* dy, void* dx, float* sums, float* workspace,
                              StreamHandle stream) {
  if (cols <= 0) return;
  dispatch_act(dtype, "ReLU gradient with column sums", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!packs_fit<T>(cols) || !aligned16(y) || !aligned16(dy) || !aligned16(dx)) {
      // Rows that do not split into packs: the two passes.
      activation_backward(Activation::Relu, dtype, rows * cols, nullptr, y, dy, dx, 0.0f, stream);
      column_sum(dtype, rows, cols, dx, sums, workspace, stream);
      return;
    }
    launch_packed_column_sum<T, true>(rows, cols, static_cast<const T*>(y),
                                      static_cast<const T*>(dy), static_cast<T*>(dx), sums,
                                      workspace, stream);
  });
}

}  // namespace ember::network::cuda
