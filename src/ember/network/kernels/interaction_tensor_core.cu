// The dot interaction for 16-bit activations (f16, bf16) on tensor cores; the design is in
// interaction.cu's header. One warp per sample, a sample's rows padded with zero rows to 16 or
// 32 (TILES = 1 or 2 tiles of 16 rows) and staged in shared memory as 16-bit values.
//
// Fragments are opaque: they are only loaded (load_matrix_sync), multiplied (mma_sync) and
// stored (store_matrix_sync) with explicit layouts. Every fragment pointer is 32-byte aligned and
// every leading dimension a multiple of 8 values (16-bit) or 4 (f32): X's row stride is
// width + 8 values (width a multiple of 16), G's 16 TILES + 8, the f32 staging's 16 TILES + 4 or
// 20, and every per-warp region starts on a multiple of 128 bytes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/interaction_common.cuh"

namespace ember::network::cuda::detail {

namespace {

namespace wmma = nvcuda::wmma;

template <class T>
struct TensorCoreType;
template <>
struct TensorCoreType<Half> {
  using type = __half;
};
template <>
struct TensorCoreType<BFloat16> {
  using type = __nv_bfloat16;
};

// X's row stride is width + kRowPad values: row starts fall 16 bytes apart modulo 128 (width a
// multiple of 64) or at distinct 16-byte offsets (other multiples of 16), so the 8 rows a
// fragment load reads at once hit distinct banks.
constexpr int kRowPad = 8;
// The backward's f32 staging of one 16 x 16 result tile: row stride 20 floats, so the 8 lanes of
// a 16-byte read phase (8 rows, one column offset) hit distinct banks.
constexpr int kTileLd = 20;

struct TcLayout {
  int ld;           // X's row stride (values)
  int warp_bytes;   // shared bytes per warp (a multiple of 128)
  int table_bytes;  // the block's pair table
  int warps;        // warps (samples in flight) per block
};

template <class T>
__device__ __forceinline__ void store8(T* p, const float* x) {
  std::uint32_t h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    h[e] = from_f<T>(x[e]).bits;
  *reinterpret_cast<uint4*>(p) = make_uint4(h[0] | (h[1] << 16), h[2] | (h[3] << 16),
                                            h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}

// Forward: per warp X [16 TILES][ld] (16-bit), then S [16 TILES][16 TILES + 4] (f32): X X^T's
// lower-triangle tiles. The output row (mlp, pairs, 0) is then written coalesced from X and S.
template <class T, int TILES>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_forward_tc(std::int64_t batch, int f1, int w, const T* mlp, const T* emb, T* out,
                           TcLayout lay) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using W = typename TensorCoreType<T>::type;
  constexpr int kRows = 16 * TILES, kSld = kRows + 4, kTiles = TILES * (TILES + 1) / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const auto [warp, lane, npairs, table, mine] =
      warp_place(smem, f1, lay.table_bytes, lay.warp_bytes);
  T* X = reinterpret_cast<T*>(mine);
  float* S = reinterpret_cast<float*>(mine + kRows * lay.ld * sizeof(T));
  zero_rows(X, lay.ld, f1, kRows, w, lane);
  __syncthreads();
  const W* Xw = reinterpret_cast<const W*>(X);
  const int ow = w + npairs + 1;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += step) {
    stage_sample_rows(X, lay.ld, mlp, emb, b, f1, w, lane);
    // Tile (I, J), J <= I, accumulates in acc[I (I + 1) / 2 + J], in f32.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kTiles];
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
      wmma::fill_fragment(acc[t], 0.0f);
    for (int k = 0; k < w; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> a[TILES];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::col_major> bt[TILES];  // X^T
#pragma unroll
      for (int t = 0; t < TILES; ++t) {
        wmma::load_matrix_sync(a[t], Xw + 16 * t * lay.ld + k, lay.ld);
        wmma::load_matrix_sync(bt[t], Xw + 16 * t * lay.ld + k, lay.ld);
      }
      mma_lower_triangle<TILES>(acc, a, bt);
    }
    store_lower_triangle<TILES>(S, kSld, acc);
    __syncwarp();
    T* o = out + b * ow;
    for (int q = lane; q < ow; q += 32) {
      T v = from_f<T>(0.0f);
      if (q < w) {
        v = X[q];
      } else if (q < w + npairs) {
        const int e = table[q - w];
        v = from_f<T>(S[(e & 0xff) * kSld + (e >> 8)]);
      }
      o[q] = v;
    }
    __syncwarp();  // the next sample overwrites X and S
  }
#endif
}

// Backward: per warp X [16 TILES][ld] and G [16 TILES][16 TILES + 8] (16-bit; G symmetric with
// the output gradients' pairs, zero diagonal and padding), then one 16 x 16 f32 result tile and
// the MLP vector's direct gradient (w f32 values).
// dX = G X, one 16 x 16 tile of dX at a time, each written as one 16-byte store per lane.
template <class T, int TILES>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_backward_tc(std::int64_t batch, int f1, int w, const T* mlp, const T* emb,
                            const T* dout, T* dmlp, T* demb, TcLayout lay) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using W = typename TensorCoreType<T>::type;
  constexpr int kRows = 16 * TILES, kGld = kRows + 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const auto [warp, lane, npairs, table, mine] =
      warp_place(smem, f1, lay.table_bytes, lay.warp_bytes);
  T* X = reinterpret_cast<T*>(mine);
  T* G = X + kRows * lay.ld;
  float* O = reinterpret_cast<float*>(G + kRows * kGld);
  float* direct = O + 16 * kTileLd;  // the output gradient's first w values
  zero_rows(X, lay.ld, f1, kRows, w, lane);
  zero_rows(G, kGld, 0, kRows, kRows, lane);  // the diagonal and padding stay zero
  __syncthreads();
  const W* Xw = reinterpret_cast<const W*>(X);
  const W* Gw = reinterpret_cast<const W*>(G);
  const int col_tiles = w / 16;
  const int r_in_tile = lane & 15, c_in_tile = (lane >> 4) * 8;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += step) {
    stage_backward_sample(X, lay.ld, G, kGld, direct, mlp, emb, dout, dmlp != nullptr, table, b, f1,
                          w, lane);
    for (int I = 0; I < TILES && 16 * I < f1; ++I) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> a[TILES];
#pragma unroll
      for (int k = 0; k < TILES; ++k)
        wmma::load_matrix_sync(a[k], Gw + 16 * I * kGld + 16 * k, kGld);
      const int r = 16 * I + r_in_tile;
      T* row = gradient_row(dmlp, demb, b, r, f1, w);  // where this lane's row of dX goes
      // Not unrolled, for either dtype: the compiler unrolled f16's loop by 2 and bf16's not,
      // the only difference of structure between the two (an unrolled tile has nothing to
      // overlap: the tiles are separated by __syncwarp()).
#pragma unroll 1
      for (int J = 0; J < col_tiles; ++J) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int k = 0; k < TILES; ++k) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major> x;
          wmma::load_matrix_sync(x, Xw + 16 * k * lay.ld + 16 * J, lay.ld);
          wmma::mma_sync(acc, a[k], x, acc);
        }
        wmma::store_matrix_sync(O, acc, kTileLd, wmma::mem_row_major);
        __syncwarp();
        if (row != nullptr) {
          const int c = 16 * J + c_in_tile;
          const float4 lo = *reinterpret_cast<const float4*>(O + r_in_tile * kTileLd + c_in_tile);
          const float4 hi =
              *reinterpret_cast<const float4*>(O + r_in_tile * kTileLd + c_in_tile + 4);
          float d[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
          if (r == 0) {  // the MLP vector's own part of the output
#pragma unroll
            for (int e = 0; e < 8; ++e)
              d[e] += direct[c + e];
          }
          store8(row + c, d);
        }
        __syncwarp();  // O is reused by the next tile
      }
    }
    __syncwarp();  // the next sample overwrites X and G
  }
#endif
}

// The layout, or warps = 0 when the shape does not fit the tensor-core kernels.
TcLayout tc_layout(std::int64_t f1, std::int64_t w, bool backward, std::size_t* smem) {
  TcLayout lay{0, 0, 0, 0};
  if (f1 < 1 || f1 > kInteractionMaxRows || w < 16 || w % 16 != 0 || w > 4096) return lay;
  const std::int64_t rows = f1 <= 16 ? 16 : 32;
  lay.ld = static_cast<int>(w + kRowPad);
  std::int64_t bytes = rows * lay.ld * 2;
  bytes += backward ? rows * (rows + 8) * 2 + 16 * kTileLd * 4 + w * 4 : rows * (rows + 4) * 4;
  bytes = (bytes + 127) / 128 * 128;
  lay.table_bytes = static_cast<int>(pair_table_bytes(f1));
  const std::int64_t room = static_cast<std::int64_t>(max_block_shared_bytes()) - lay.table_bytes;
  if (bytes > room) return lay;
  lay.warp_bytes = static_cast<int>(bytes);
  lay.warps = static_cast<int>(std::min<std::int64_t>(kInteractionWarps, room / bytes));
  *smem = static_cast<std::size_t>(lay.table_bytes) +
          static_cast<std::size_t>(lay.warps) * static_cast<std::size_t>(lay.warp_bytes);
  return lay;
}

template <class T, int TILES>
void launch_forward(std::int64_t batch, int f1, int w, const void* mlp, const void* emb, void* out,
                    const TcLayout& lay, std::size_t smem, StreamHandle stream) {
  const auto kernel = interaction_forward_tc<T, TILES>;
  const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
  kernel<<<grid, lay.warps * 32, smem, stream>>>(batch, f1, w, static_cast<const T*>(mlp),
                                                 static_cast<const T*>(emb), static_cast<T*>(out),
                                                 lay);
  EMBER_CUDA_CHECK_LAUNCH();
}

template <class T, int TILES>
void launch_backward(std::int64_t batch, int f1, int w, const void* mlp, const void* emb,
                     const void* dout, void* dmlp, void* demb, const TcLayout& lay,
                     std::size_t smem, StreamHandle stream) {
  const auto kernel = interaction_backward_tc<T, TILES>;
  const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
  kernel<<<grid, lay.warps * 32, smem, stream>>>(
      batch, f1, w, static_cast<const T*>(mlp), static_cast<const T*>(emb),
      static_cast<const T*>(dout), static_cast<T*>(dmlp), static_cast<T*>(demb), lay);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool interaction_tensor_cores_fit(DType dtype, std::int64_t f1, std::int64_t width, bool backward) {
  if (dtype != DType::F16 && dtype != DType::BF16) return false;
  std::size_t smem = 0;
  return tc_layout(f1, width, backward, &smem).warps > 0 && compute_capability_major() >= 8;
}

void interaction_forward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                      std::int64_t width, const void* mlp, const void* emb,
                                      void* out, StreamHandle stream) {
  std::size_t smem = 0;
  const TcLayout lay = tc_layout(f1, width, false, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction: shape does not fit the tensor-core kernels");
  const int f = static_cast<int>(f1), w = static_cast<int>(width);
  const bool one = f1 <= 16;
  if (dtype == DType::F16) {
    (one ? launch_forward<Half, 1> : launch_forward<Half, 2>)(batch, f, w, mlp, emb, out, lay, smem,
                                                              stream);
  } else {
    (one ? launch_forward<BFloat16, 1> : launch_forward<BFloat16, 2>)(batch, f, w, mlp, emb, out,
                                                                      lay, smem, stream);
  }
}

void interaction_backward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                       std::int64_t width, const void* mlp, const void* emb,
                                       const void* dout, void* dmlp, void* demb,
                                       StreamHandle stream) {
  std::size_t smem = 0;
  const TcLayout lay = tc_layout(f1, width, true, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction backward: shape does not fit the tensor-core kernels");
  const int f = static_cast<int>(f1), w = static_cast<int>(width);
  const bool one = f1 <= 16;
  if (dtype == DType::F16) {
    (one ? launch_backward<Half, 1> : launch_backward<Half, 2>)(batch, f, w, mlp, emb, dout, dmlp,
                                                                demb, lay, smem, stream);
  } else {
    (one ? launch_backward<BFloat16, 1> : launch_backward<BFloat16, 2>)(batch, f, w, mlp, emb, dout,
                                                                        dmlp, demb, lay, smem,
                                                                        stream);
  }
}

}  // namespace ember::network::cuda::detail
