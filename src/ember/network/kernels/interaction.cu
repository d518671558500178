// DLRM's dot interaction (HugeCTR's output layout) and the FM order-2 layer.
//
// Per sample the interaction's rows X (F1 = embeddings + 1 rows of `width` values, row 0 the
// bottom MLP's vector) give the output [X_0, strictly lower triangle of X X^T in HugeCTR's pair
// order (p = i (i - 1) / 2 + j, j < i), 0] and the input gradient dX = G X, G the symmetric
// matrix of the output's pair gradients (zero diagonal), plus the output's first `width`
// gradients on row 0. The work per sample is small (DLRM: 27 x 128 values, 351 dots), so the
// kernels are bound by memory traffic; each reads its inputs once and writes its outputs once.
// Four kinds of kernels, chosen per call (interaction_kernel(): the same rule for tests):
//
// Tensor cores (16-bit activations, F1 <= 32, width a multiple of 16; interaction_tensor_core.cu):
// one warp per sample, 4 samples per block, a persistent grid-stride grid. The sample's rows are
// copied into shared memory as 16-bit values with asynchronous 16-byte copies (cp.async: every
// lane's copies in flight at once), at a row stride of width + 8 (conflict-free ldmatrix); the
// lanes for the padding rows up to 16 or 32 read a 16-byte zero chunk. Both directions use PTX's
// mma.sync (m16n8k16, f32 accumulators) and ldmatrix, whose fragment layouts are documented, so
// each lane rounds the results it holds and writes them where they go. Forward: X X^T's
// lower-triangle 16 x 16 tiles (1 of 1 or 3 of 4), 16 columns of the width a step, one ldmatrix
// per row tile giving its A fragment and, by 8-row halves, X^T's B fragments; each dot is rounded
// to 16 bits once and written at its pair's place in the output row, staged in shared memory,
// which leaves in 16-byte chunks (0.169 -> 0.145 ms in f16 at DLRM's shape on an H200, 3.55 TB/s).
// Backward: the rows and the output gradient's row arrive by asynchronous copies only (one wait
// a sample); dX = G X (32 x 32 times 32 x width), each lane building its fragments of G from the
// gradient row at offsets computed once (16-bit, exact) and reading X's by ldmatrix; the MLP row
// adds its direct gradient in f32, each result is written over the X block it came from, and dX
// leaves in coalesced 16-byte row copies (0.51 ms -> 0.285 ms in f16 at DLRM's shape on an H200,
// 3.4 TB/s).
//
// CUDA cores (f32, and 16-bit widths that are a multiple of 4 but not of 16; F1 <= 32): exact
// f32 arithmetic, one warp per sample, up to 4 per block (more than 48 KB of shared memory where
// needed). Rows are staged as f32 (row stride width + 4, so the float4 reads of 8 lanes hit
// distinct banks); f32 rows by cp.async, 16-bit ones converted through registers. Forward: each
// lane computes 4 x 4 tiles of the lower triangle of X X^T with float4 reads (16 FMAs per 8
// shared loads), the dots go through a staging area so the output row is written coalesced.
// Backward: each lane owns 4 columns and 8 rows at a time; G's rows are read as float4
// broadcasts (4 X reads and 8 G reads per 128 FMAs). f32 runs here unless the network allows
// TF32: the exact f32 result, as PyTorch's bmm with allow_tf32 off (in a DLRM step profiled on
// an H100: 0.65 ms forward and 1.16 ms backward at batch 65536, about 1.6 TB/s of the minimum
// traffic).
//
// TF32 tensor cores (f32 with allow_tf32, F1 <= 32, width a multiple of 8; interaction_tf32.cu):
// the 16-bit kernels' design with the rows staged as f32, each fragment rounded to TF32 after
// its load, wmma m16n16k8 with f32 accumulators (PyTorch's allow_tf32 for DLRM's bmm).
//
// Generic (anything else: F1 > 32, widths not a multiple of 4, unaligned pointers): one thread
// per output element.
#include <cuda_runtime.h>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/interaction_common.cuh"
#include "ember/network/kernels/launchers.hpp"

namespace ember::network::cuda {

// The shared launch sizing, conversions and reductions (device_utils.cuh, interaction_common.cuh).
using namespace detail;

namespace {

__device__ __forceinline__ void store4(float* p, float4 v) {
  *reinterpret_cast<float4*>(p) = v;
}
template <class T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  const std::uint32_t a = T(v.x).bits, b = T(v.y).bits, c = T(v.z).bits, d = T(v.w).bits;
  *reinterpret_cast<uint2*>(p) = make_uint2(a | (b << 16), c | (d << 16));
}

__device__ __forceinline__ float dot4(float4 a, float4 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
// acc += g.x x0 + g.y x1 + g.z x2 + g.w x3, element-wise over the float4s x.
__device__ __forceinline__ void axpy4(float4& acc, float4 g, const float4* x) {
  acc.x = fmaf(g.w, x[3].x, fmaf(g.z, x[2].x, fmaf(g.y, x[1].x, fmaf(g.x, x[0].x, acc.x))));
  acc.y = fmaf(g.w, x[3].y, fmaf(g.z, x[2].y, fmaf(g.y, x[1].y, fmaf(g.x, x[0].y, acc.y))));
  acc.z = fmaf(g.w, x[3].z, fmaf(g.z, x[2].z, fmaf(g.y, x[1].z, fmaf(g.x, x[0].z, acc.z))));
  acc.w = fmaf(g.w, x[3].w, fmaf(g.z, x[2].w, fmaf(g.y, x[1].w, fmaf(g.x, x[0].w, acc.w))));
}

// ---- CUDA-core kernels ----------------------------------------------------------------------

struct CoreLayout {
  int rows_pad;     // F1 rounded up to 4 (forward tiles) / 8 (backward row groups)
  int stride;       // floats per staged row
  int warp_bytes;   // shared bytes per warp (a multiple of 128)
  int table_bytes;  // the block's pair table (backward)
  int warps;        // warps per block
};

template <class T>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_forward_fast(std::int64_t batch, int f1, int w, const T* mlp, const T* emb, T* out,
                             CoreLayout lay) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  float* X = reinterpret_cast<float*>(smem + lay.table_bytes + warp * lay.warp_bytes);
  float* stage = X + lay.rows_pad * lay.stride;
  zero_rows(X, lay.stride, f1, lay.rows_pad, w, lane);  // never written by the staging
  const int npairs = f1 * (f1 - 1) / 2;
  const int ow = w + npairs + 1;
  const int tiles_r = lay.rows_pad / 4;
  const int tiles = tiles_r * (tiles_r + 1) / 2;
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += warps_total) {
    stage_sample_rows(X, lay.stride, mlp, emb, b, f1, w, lane);
    T* o = out + b * ow;
    for (int c = lane; c < w; c += 32)
      o[c] = from_f<T>(X[c]);
    for (int t = lane; t < tiles; t += 32) {
      int I = static_cast<int>((sqrtf(8.0f * static_cast<float>(t) + 1.0f) - 1.0f) * 0.5f);
      while (I * (I + 1) / 2 > t)
        --I;
      while ((I + 1) * (I + 2) / 2 <= t)
        ++I;
      const int J = t - I * (I + 1) / 2;
      const float* A = X + 4 * I * lay.stride;
      const float* B = X + 4 * J * lay.stride;
      float acc[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] = 0.0f;
      for (int k = 0; k < w; k += 4) {
        float4 a[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          a[i] = *reinterpret_cast<const float4*>(A + i * lay.stride + k);
          bv[i] = *reinterpret_cast<const float4*>(B + i * lay.stride + k);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            acc[i][j] += dot4(a[i], bv[j]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int r = 4 * I + i, c = 4 * J + j;
          if (c < r && r < f1) stage[r * (r - 1) / 2 + c] = acc[i][j];
        }
      }
    }
    __syncwarp();
    for (int p = lane; p < npairs; p += 32)
      o[w + p] = from_f<T>(stage[p]);
    if (lane == 0) o[ow - 1] = from_f<T>(0.0f);
    __syncwarp();  // the next sample reuses X and stage
  }
}

template <class T>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_backward_fast(std::int64_t batch, int f1, int w, const T* mlp, const T* emb,
                              const T* dout, T* dmlp, T* demb, CoreLayout lay) {
  extern __shared__ __align__(128) unsigned char smem[];
  const auto [warp, lane, npairs, table, mine] =
      warp_place(smem, f1, lay.table_bytes, lay.warp_bytes);
  float* X = reinterpret_cast<float*>(mine);
  const int gs = lay.rows_pad;  // G's row stride; G has rows_pad rows (rows >= f1 stay zero)
  float* G = X + lay.rows_pad * lay.stride;
  float* direct = G + lay.rows_pad * gs;  // the output gradient's first w values
  zero_rows(X, lay.stride, f1, lay.rows_pad, w, lane);
  zero_rows(G, gs, 0, lay.rows_pad, lay.rows_pad, lane);  // the diagonal and padding stay zero
  __syncthreads();
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += warps_total) {
    stage_backward_sample(X, lay.stride, G, gs, direct, mlp, emb, dout, dmlp != nullptr, table, b,
                          f1, w, lane);
    for (int c = lane * 4; c < w; c += 128) {
      for (int r0 = 0; r0 < f1; r0 += 8) {
        float4 acc[8];
#pragma unroll
        for (int rr = 0; rr < 8; ++rr)
          acc[rr] = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int j = 0; j < f1; j += 4) {  // rows j..j+3 < rows_pad; padding rows are zero
          float4 x[4];
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
            x[jj] = *reinterpret_cast<const float4*>(X + (j + jj) * lay.stride + c);
#pragma unroll
          for (int rr = 0; rr < 8; ++rr)
            axpy4(acc[rr], *reinterpret_cast<const float4*>(G + (r0 + rr) * gs + j), x);
        }
#pragma unroll
        for (int rr = 0; rr < 8; ++rr) {
          const int r = r0 + rr;
          if (r >= f1) break;
          if (r == 0) {
            if (dmlp == nullptr) continue;
            const float4 d = *reinterpret_cast<const float4*>(direct + c);
            store4(dmlp + b * w + c,
                   make_float4(acc[rr].x + d.x, acc[rr].y + d.y, acc[rr].z + d.z, acc[rr].w + d.w));
          } else if (demb != nullptr) {
            store4(demb + (b * (f1 - 1) + r - 1) * static_cast<std::int64_t>(w) + c, acc[rr]);
          }
        }
      }
    }
    __syncwarp();
  }
}

// ---- generic kernels ------------------------------------------------------------------------

template <class T>
__global__ void interaction_forward_generic(std::int64_t batch, int f1, int w, const T* mlp,
                                            const T* emb, T* out) {
  const std::int64_t ow = w + static_cast<std::int64_t>(f1) * (f1 - 1) / 2 + 1;
  const std::int64_t n = batch * ow;
  for (std::int64_t idx = global_thread(); idx < n; idx += global_stride()) {
    const std::int64_t b = idx / ow, q = idx % ow;
    float v = 0.0f;
    if (q < w) {
      v = to_f(mlp[b * w + q]);
    } else if (q < ow - 1) {
      const int p = static_cast<int>(q - w);
      const int i = pair_row(p), j = p - i * (i - 1) / 2;
      const T* a = sample_row(mlp, emb, b, i, f1, w);
      const T* c = sample_row(mlp, emb, b, j, f1, w);
      for (int k = 0; k < w; ++k)
        v += to_f(a[k]) * to_f(c[k]);
    }
    out[idx] = from_f<T>(v);
  }
}

template <class T>
__global__ void interaction_backward_generic(std::int64_t batch, int f1, int w, const T* mlp,
                                             const T* emb, const T* dout, T* dmlp, T* demb) {
  const std::int64_t ow = w + static_cast<std::int64_t>(f1) * (f1 - 1) / 2 + 1;
  const std::int64_t n = batch * f1 * w;
  for (std::int64_t idx = global_thread(); idx < n; idx += global_stride()) {
    const std::int64_t c = idx % w;
    const int r = static_cast<int>((idx / w) % f1);
    const std::int64_t b = idx / (static_cast<std::int64_t>(w) * f1);
    const T* g = dout + b * ow + w;
    float acc = 0.0f;
    for (int j = 0; j < f1; ++j) {
      if (j == r) continue;
      const int hi = j > r ? j : r, lo = j > r ? r : j;
      acc += to_f(g[hi * (hi - 1) / 2 + lo]) * to_f(sample_row(mlp, emb, b, j, f1, w)[c]);
    }
    if (r == 0) {
      if (dmlp != nullptr) dmlp[b * w + c] = from_f<T>(acc + to_f(dout[b * ow + c]));
    } else if (demb != nullptr) {
      demb[(b * (f1 - 1) + r - 1) * w + c] = from_f<T>(acc);
    }
  }
}

template <class T>
__global__ void fm_order2_forward_kernel(std::int64_t batch, std::int64_t slots, std::int64_t w,
                                         const T* in, T* out) {
  const std::int64_t n = batch * w;
  for (std::int64_t idx = global_thread(); idx < n; idx += global_stride()) {
    const std::int64_t b = idx / w, k = idx % w;
    float s = 0.0f, sq = 0.0f;
    for (std::int64_t i = 0; i < slots; ++i) {
      const float v = to_f(in[(b * slots + i) * w + k]);
      s += v;
      sq += v * v;
    }
    out[idx] = from_f<T>(0.5f * (s * s - sq));
  }
}

template <class T>
__global__ void fm_order2_backward_kernel(std::int64_t batch, std::int64_t slots, std::int64_t w,
                                          const T* in, const T* dout, T* din) {
  const std::int64_t n = batch * w;
  for (std::int64_t idx = global_thread(); idx < n; idx += global_stride()) {
    const std::int64_t b = idx / w, k = idx % w;
    float s = 0.0f;
    for (std::int64_t i = 0; i < slots; ++i)
      s += to_f(in[(b * slots + i) * w + k]);
    const float g = to_f(dout[idx]);
    for (std::int64_t i = 0; i < slots; ++i) {
      const std::int64_t at = (b * slots + i) * w + k;
      din[at] = from_f<T>(g * (s - to_f(in[at])));
    }
  }
}

// A warp per sample: the sample's [slots, w] block is read once, coalesced, into the warp's
// shared memory (f32), the lanes sum its columns there and write the output (forward) or the
// whole block's gradient (backward, coalesced). The thread-per-(sample, column) kernels above
// read the block column by column, a few bytes of each 32-byte sector per access, and the
// backward twice: 5x the bytes' time at DeepFM's [65536, 26, 10] f16. Same sums in the same
// order, so both give the same bits.
constexpr int kFmWarps = kThreads / 32;
constexpr int kFmLoadsInFlight = 16;

template <class T>
__global__ void fm_order2_rows_kernel(std::int64_t batch, int slots, int w, const T* in,
                                      const T* dout, T* out) {
  extern __shared__ float fm_shared[];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) / 32;
  const int len = slots * w;
  float* block = fm_shared + static_cast<std::int64_t>(warp) * (len + 2 * w);
  float* sums = block + len;
  float* grads = sums + w;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kFmWarps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kFmWarps + warp; b < batch;
       b += warps) {
    const T* x = in + b * len;
    // kFmLoadsInFlight loads a lane before the first store: one at a time, the warp waited on
    // memory once per 32 elements (9 round trips for DeepFM's 260-element sample).
    for (int base = lane; base < len; base += 32 * kFmLoadsInFlight) {
      float v[kFmLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kFmLoadsInFlight; ++u) {
        const int e = base + 32 * u;
        v[u] = e < len ? to_f(x[e]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kFmLoadsInFlight; ++u) {
        const int e = base + 32 * u;
        if (e < len) block[e] = v[u];
      }
    }
    __syncwarp();
    for (int k = lane; k < w; k += 32) {
      float s = 0.0f, sq = 0.0f;
      for (int i = 0; i < slots; ++i) {
        const float v = block[i * w + k];
        s += v;
        sq += v * v;
      }
      if (dout == nullptr) {
        out[b * w + k] = from_f<T>(0.5f * (s * s - sq));
      } else {
        sums[k] = s;
        grads[k] = to_f(dout[b * w + k]);
      }
    }
    if (dout != nullptr) {
      __syncwarp();
      T* dx = out + b * len;
      int k = lane % w;
      const int step = 32 % w;
      for (int e = lane; e < len; e += 32) {
        dx[e] = from_f<T>(grads[k] * (sums[k] - block[e]));
        k += step;
        if (k >= w) k -= w;
      }
    }
    __syncwarp();
  }
}

// The shared memory fm_order2_rows_kernel needs a block, or 0 where a sample's block is too
// large for it (then the per-column kernels run).
std::size_t fm_rows_shared_bytes(std::int64_t slots, std::int64_t w) {
  const std::int64_t bytes =
      kFmWarps * (slots * w + 2 * w) * static_cast<std::int64_t>(sizeof(float));
  return bytes <= 48 * 1024 ? static_cast<std::size_t>(bytes) : 0;
}

// The CUDA-core kernels' layout, or warps = 0 when the shape does not fit them.
CoreLayout core_layout(std::int64_t f1, std::int64_t w, bool backward) {
  CoreLayout lay{0, 0, 0, 0, 0};
  if (f1 < 1 || f1 > kInteractionMaxRows || w < 4 || w % 4 != 0 || w > 4096) return lay;
  lay.rows_pad = static_cast<int>(backward ? (f1 + 7) / 8 * 8 : (f1 + 3) / 4 * 4);
  lay.stride = static_cast<int>(w + 4);
  const std::int64_t extra =
      backward ? lay.rows_pad * lay.rows_pad + w : (f1 * (f1 - 1) / 2 + 3) / 4 * 4;
  const std::int64_t bytes = ((lay.rows_pad * lay.stride + extra) * 4 + 127) / 128 * 128;
  lay.table_bytes = backward ? static_cast<int>(pair_table_bytes(f1)) : 0;
  const std::int64_t room = static_cast<std::int64_t>(max_block_shared_bytes()) - lay.table_bytes;
  if (bytes > room) return lay;
  lay.warp_bytes = static_cast<int>(bytes);
  lay.warps = static_cast<int>(std::min<std::int64_t>(kInteractionWarps, room / bytes));
  return lay;
}

std::size_t shared_bytes(const CoreLayout& lay) {
  return static_cast<std::size_t>(lay.table_bytes) +
         static_cast<std::size_t>(lay.warps) * static_cast<std::size_t>(lay.warp_bytes);
}

// The kernels a call takes, given whether its pointers are 16-byte aligned.
InteractionKernel choose(DType dtype, std::int64_t f1, std::int64_t width, bool backward,
                         bool aligned, bool allow_tf32) {
  if (!aligned) return InteractionKernel::Generic;
  if (interaction_tensor_cores_fit(dtype, f1, width)) {
    return InteractionKernel::TensorCores;
  }
  if (allow_tf32 && interaction_tf32_fit(dtype, f1, width, backward)) {
    return InteractionKernel::Tf32TensorCores;
  }
  if (core_layout(f1, width, backward).warps > 0) return InteractionKernel::CudaCores;
  return InteractionKernel::Generic;
}

}  // namespace

InteractionKernel interaction_kernel(DType dtype, std::int64_t num_emb, std::int64_t width,
                                     bool backward, bool allow_tf32) {
  return choose(dtype, num_emb + 1, width, backward, true, allow_tf32);
}

const char* interaction_kernel_name(InteractionKernel k) {
  switch (k) {
    case InteractionKernel::TensorCores:
      return "tensor cores";
    case InteractionKernel::Tf32TensorCores:
      return "TF32 tensor cores";
    case InteractionKernel::CudaCores:
      return "CUDA cores";
    default:
      return "generic";
  }
}

bool interaction_gathers(DType dtype, std::int64_t num_emb, std::int64_t width) {
  return interaction_tensor_cores_fit(dtype, num_emb + 1, width);
}

namespace {
void check_gather(const RowGather& gather, InteractionKernel kind, DType dtype, std::int64_t f1,
                  std::int64_t width) {
  if (!gather.defined()) return;
  EMBER_CHECK(kind == InteractionKernel::TensorCores && aligned16(gather.table),
              "Interaction: reading the embeddings through an index needs the 16-bit tensor-core "
              "kernels and a 16-byte aligned table; ",
              dtype_name(dtype), " with F1 ", f1, " and width ", width, " takes the ",
              interaction_kernel_name(kind), " kernels");
}
}  // namespace

void interaction_forward(DType dtype, std::int64_t batch, std::int64_t num_emb, std::int64_t width,
                         const void* mlp, const void* emb, void* out, bool allow_tf32,
                         StreamHandle stream, const RowGather& gather) {
  if (batch <= 0) return;
  const std::int64_t f1 = num_emb + 1;
  EMBER_CHECK(f1 <= 4096 && width <= (1 << 24), "Interaction: shape out of range");
  const InteractionKernel kind =
      choose(dtype, f1, width, false, aligned16(mlp) && aligned16(emb), allow_tf32);
  check_gather(gather, kind, dtype, f1, width);
  if (kind == InteractionKernel::TensorCores) {
    interaction_forward_tensor_cores(dtype, batch, f1, width, mlp, emb, out, gather, stream);
    return;
  }
  if (kind == InteractionKernel::Tf32TensorCores) {
    interaction_forward_tf32(batch, f1, width, static_cast<const float*>(mlp),
                             static_cast<const float*>(emb), static_cast<float*>(out), stream);
    return;
  }
  dispatch_act(dtype, "Interaction", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* m = static_cast<const T*>(mlp);
    const T* e = static_cast<const T*>(emb);
    T* o = static_cast<T*>(out);
    if (kind == InteractionKernel::CudaCores) {
      const CoreLayout lay = core_layout(f1, width, false);
      const std::size_t smem = shared_bytes(lay);
      const auto kernel = interaction_forward_fast<T>;
      const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
      kernel<<<grid, lay.warps * 32, smem, stream>>>(batch, static_cast<int>(f1),
                                                     static_cast<int>(width), m, e, o, lay);
    } else {
      const std::int64_t n = batch * (width + f1 * (f1 - 1) / 2 + 1);
      interaction_forward_generic<T><<<grid_for(n), kThreads, 0, stream>>>(
          batch, static_cast<int>(f1), static_cast<int>(width), m, e, o);
    }
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void interaction_backward(DType dtype, std::int64_t batch, std::int64_t num_emb, std::int64_t width,
                          const void* mlp, const void* emb, const void* dout, void* dmlp,
                          void* demb, bool allow_tf32, StreamHandle stream,
                          const RowGather& gather) {
  if (batch <= 0 || (dmlp == nullptr && demb == nullptr)) return;
  const std::int64_t f1 = num_emb + 1;
  EMBER_CHECK(f1 <= 4096 && width <= (1 << 24), "Interaction: shape out of range");
  const bool aligned = aligned16(mlp) && aligned16(emb) && aligned16(dmlp) && aligned16(demb);
  const InteractionKernel kind = choose(dtype, f1, width, true, aligned, allow_tf32);
  check_gather(gather, kind, dtype, f1, width);
  if (kind == InteractionKernel::TensorCores) {
    interaction_backward_tensor_cores(dtype, batch, f1, width, mlp, emb, dout, dmlp, demb, gather,
                                      stream);
    return;
  }
  if (kind == InteractionKernel::Tf32TensorCores) {
    interaction_backward_tf32(batch, f1, width, static_cast<const float*>(mlp),
                              static_cast<const float*>(emb), static_cast<const float*>(dout),
                              static_cast<float*>(dmlp), static_cast<float*>(demb), stream);
    return;
  }
  dispatch_act(dtype, "Interaction backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* m = static_cast<const T*>(mlp);
    const T* e = static_cast<const T*>(emb);
    const T* g = static_cast<const T*>(dout);
    if (kind == InteractionKernel::CudaCores) {
      const CoreLayout lay = core_layout(f1, width, true);
      const std::size_t smem = shared_bytes(lay);
      const auto kernel = interaction_backward_fast<T>;
      const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
      kernel<<<grid, lay.warps * 32, smem, stream>>>(
          batch, static_cast<int>(f1), static_cast<int>(width), m, e, g, static_cast<T*>(dmlp),
          static_cast<T*>(demb), lay);
    } else {
      const std::int64_t n = batch * f1 * width;
      interaction_backward_generic<T><<<grid_for(n), kThreads, 0, stream>>>(
          batch, static_cast<int>(f1), static_cast<int>(width), m, e, g, static_cast<T*>(dmlp),
          static_cast<T*>(demb));
    }
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void fm_order2_forward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t width,
                       const void* in, void* out, StreamHandle stream) {
  const std::int64_t n = batch * width;
  if (n <= 0) return;
  const std::size_t shared = fm_rows_shared_bytes(slots, width);
  dispatch_act(dtype, "FmOrder2", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (shared > 0) {
      fm_order2_rows_kernel<T><<<grid_for(batch * 32), kThreads, shared, stream>>>(
          batch, static_cast<int>(slots), static_cast<int>(width), static_cast<const T*>(in),
          nullptr, static_cast<T*>(out));
      EMBER_CUDA_CHECK_LAUNCH();
      return;
    }
    fm_order2_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        batch, slots, width, static_cast<const T*>(in), static_cast<T*>(out));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void fm_order2_backward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t width,
                        const void* in, const void* dout, void* din, StreamHandle stream) {
  const std::int64_t n = batch * width;
  if (n <= 0) return;
  const std::size_t shared = fm_rows_shared_bytes(slots, width);
  dispatch_act(dtype, "FmOrder2 backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (shared > 0) {
      fm_order2_rows_kernel<T><<<grid_for(batch * 32), kThreads, shared, stream>>>(
          batch, static_cast<int>(slots), static_cast<int>(width), static_cast<const T*>(in),
          static_cast<const T*>(dout), static_cast<T*>(din));
      EMBER_CUDA_CHECK_LAUNCH();
      return;
    }
    fm_order2_backward_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(batch, slots, width, static_cast<const T*>(in),
                                               static_cast<const T*>(dout), static_cast<T*>(din));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ember::network::cuda
