// The dot interaction for f32 activations on TF32 tensor cores, taken only when the network
// allows TF32 (BuildOptions::allow_tf32: HugeCTR's enable_tf32_compute; PyTorch's allow_tf32 lets
// DLRM's bmm take the same path). Without it f32 keeps the exact CUDA-core kernels.
//
// The design is the 16-bit kernels' (interaction_tensor_core.cu; interaction.cu's header): one
// warp per sample on a persistent grid-stride grid, the sample's rows copied into shared memory by
// cp.async and padded with zero rows to 16 or 32 (TILES = 1 or 2 tiles of 16 rows). Here the rows
// stay f32 in shared memory; each fragment is rounded to TF32 (10-bit mantissa, round to nearest)
// after load_matrix_sync, and wmma m16n16k8 multiplies with f32 accumulators. The outputs are
// those f32 accumulators: every product of two TF32 values is exact, so each dot differs from the
// exact f32 one by the inputs' rounding (at most 2^-10 + 2^-22 of the sum of its terms' magnitudes)
// and the summation order.
//
// Forward: X X^T's lower-triangle 16 x 16 tiles, k = width in steps of 8; once every product is
// in its accumulator, the tiles are stored as f32 over X's own space (saving 4.6 KB a warp: DLRM's
// shape then fits 12 warps an SM instead of 8) and the output row is written coalesced. Backward:
// G (the output's pair gradients, symmetric, zero diagonal) in shared memory as f32, dX = G X one
// 16 x 16 tile at a time, staged as f32; the MLP row adds its direct gradient in f32.
//
// Fragments are only loaded, converted element by element, multiplied and stored. Every fragment
// pointer is 32-byte aligned and every leading dimension a multiple of 4 floats. Row strides are
// chosen for conflict-free loads under mma.m16n8k8's fragment mapping (which wmma's loads are
// expected to follow; unverified, the bench shows the result): one load instruction of a warp
// reads 8 rows x 4 consecutive floats (A row-major, B col-major: an odd multiple of 4 floats,
// width + 4) or 4 rows x 8 (B row-major, the backward's X: an odd multiple of 8, width + 8 or
// width + 16 when width is an odd multiple of 8).
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/interaction_common.cuh"

namespace ember::network::cuda::detail {

namespace {

struct Tf32Layout {
  int ld;           // X's row stride (floats)
  int warp_bytes;   // shared bytes per warp (a multiple of 128)
  int table_bytes;  // the block's pair table
  int warps;        // warps (samples in flight) per block
};

// The backward's f32 staging of one 16 x 16 result tile (row stride 20 floats, as in the 16-bit
// kernels: the 8 lanes of a 16-byte read phase hit distinct banks).
constexpr int kTileLd = 20;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// Loads an f32 fragment and rounds each element to TF32 (the tensor cores would otherwise drop
// the low 13 bits of the mantissa: truncation, twice the error).
template <class Frag>
__device__ __forceinline__ void load_tf32(Frag& f, const float* p, int ld) {
  wmma::load_matrix_sync(f, p, ld);
#pragma unroll
  for (int e = 0; e < f.num_elements; ++e)
    f.x[e] = wmma::__float_to_tf32(f.x[e]);
}
#endif

// Zeroes `bytes` (a multiple of 16) at p, 16 bytes per lane access.
__device__ __forceinline__ void zero_region(unsigned char* p, int bytes, int lane) {
  for (int o = lane * 16; o < bytes; o += 32 * 16)
    *reinterpret_cast<uint4*>(p + o) = make_uint4(0u, 0u, 0u, 0u);
}

// Forward: per warp X [16 TILES][ld] (f32; ld = width + 4), later overwritten by
// S [16 TILES][16 TILES + 4]: X X^T's lower-triangle tiles.
template <int TILES>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    forward_tf32_kernel(std::int64_t batch, int f1, int w, const float* mlp, const float* emb,
                        float* out, Tf32Layout lay) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kRows = 16 * TILES, kSld = kRows + 4, kTiles = TILES * (TILES + 1) / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const auto [warp, lane, npairs, table, mine] =
      warp_place(smem, f1, lay.table_bytes, lay.warp_bytes);
  float* X = reinterpret_cast<float*>(mine);
  float* S = X;  // once the products are in the accumulators
  zero_region(mine, lay.warp_bytes, lane);
  __syncthreads();
  // The padding rows S overwrites: zeroed again after each sample (none at DLRM's shape).
  const int s_rows = min(kRows, (kRows * kSld + lay.ld - 1) / lay.ld);
  const int ow = w + npairs + 1;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += step) {
    stage_sample_rows(X, lay.ld, mlp, emb, b, f1, w, lane);
    float* o = out + b * ow;
    for (int c = lane; c < w; c += 32)
      o[c] = X[c];  // row 0, the MLP vector, exactly
    // Tile (I, J), J <= I, accumulates in acc[I (I + 1) / 2 + J].
    FragAcc acc[kTiles];
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
      wmma::fill_fragment(acc[t], 0.0f);
    for (int k = 0; k < w; k += 8) {
      FragA a[TILES];
      FragBCol bt[TILES];  // X^T
#pragma unroll
      for (int t = 0; t < TILES; ++t) {
        load_tf32(a[t], X + 16 * t * lay.ld + k, lay.ld);
        load_tf32(bt[t], X + 16 * t * lay.ld + k, lay.ld);
      }
      mma_lower_triangle<TILES>(acc, a, bt);
    }
    __syncwarp();  // every lane has read X before S overwrites it
    store_lower_triangle<TILES>(S, kSld, acc);
    __syncwarp();
    for (int p = lane; p < npairs; p += 32) {
      const int e = table[p];
      o[w + p] = S[(e & 0xff) * kSld + (e >> 8)];
    }
    if (lane == 0) o[ow - 1] = 0.0f;
    __syncwarp();  // S is read before the padding is restored and the next sample's rows land
    if (f1 < s_rows) zero_rows(X, lay.ld, f1, s_rows, w, lane);
    __syncwarp();
  }
#endif
}

// Backward: per warp X [16 TILES][ld] (f32), G [16 TILES][16 TILES + 4] (f32; symmetric with the
// output gradients' pairs, zero diagonal and padding), one 16 x 16 f32 result tile and the MLP
// vector's direct gradient (w f32 values). dX = G X, one 16 x 16 tile of dX at a time; a width
// that is an odd multiple of 8 computes 8 columns of padding (zero) in its last tile and drops
// them.
template <int TILES>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    backward_tf32_kernel(std::int64_t batch, int f1, int w, const float* mlp, const float* emb,
                         const float* dout, float* dmlp, float* demb, Tf32Layout lay) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kRows = 16 * TILES, kGld = kRows + 4, kSteps = kRows / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const auto [warp, lane, npairs, table, mine] =
      warp_place(smem, f1, lay.table_bytes, lay.warp_bytes);
  float* X = reinterpret_cast<float*>(mine);
  float* G = X + kRows * lay.ld;
  float* O = G + kRows * kGld;
  float* direct = O + 16 * kTileLd;         // the output gradient's first w values
  zero_region(mine, lay.warp_bytes, lane);  // X's padding, G's diagonal and padding stay zero
  __syncthreads();
  const int col_tiles = (w + 15) / 16;
  const int r_in_tile = lane & 15, c_in_tile = (lane >> 4) * 8;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += step) {
    stage_backward_sample(X, lay.ld, G, kGld, direct, mlp, emb, dout, dmlp != nullptr, table, b, f1,
                          w, lane);
    for (int I = 0; I < TILES && 16 * I < f1; ++I) {
      FragA a[kSteps];  // G's 16 x 8 pieces along k
#pragma unroll
      for (int k = 0; k < kSteps; ++k)
        load_tf32(a[k], G + 16 * I * kGld + 8 * k, kGld);
      const int r = 16 * I + r_in_tile;
      float* row = gradient_row(dmlp, demb, b, r, f1, w);  // where this lane's row of dX goes
      for (int J = 0; J < col_tiles; ++J) {
        FragAcc acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int k = 0; k < kSteps; ++k) {
          if (8 * k >= f1) break;  // X's rows from here on are padding: zero
          FragBRow x;
          load_tf32(x, X + 8 * k * lay.ld + 16 * J, lay.ld);
          wmma::mma_sync(acc, a[k], x, acc);
        }
        wmma::store_matrix_sync(O, acc, kTileLd, wmma::mem_row_major);
        __syncwarp();
        const int c = 16 * J + c_in_tile;
        if (row != nullptr && c < w) {
          float4 lo = *reinterpret_cast<const float4*>(O + r_in_tile * kTileLd + c_in_tile);
          float4 hi = *reinterpret_cast<const float4*>(O + r_in_tile * kTileLd + c_in_tile + 4);
          if (r == 0) {  // the MLP vector's own part of the output
            const float4 dl = *reinterpret_cast<const float4*>(direct + c);
            const float4 dh = *reinterpret_cast<const float4*>(direct + c + 4);
            lo = make_float4(lo.x + dl.x, lo.y + dl.y, lo.z + dl.z, lo.w + dl.w);
            hi = make_float4(hi.x + dh.x, hi.y + dh.y, hi.z + dh.z, hi.w + dh.w);
          }
          *reinterpret_cast<float4*>(row + c) = lo;
          *reinterpret_cast<float4*>(row + c + 4) = hi;
        }
        __syncwarp();  // O is reused by the next tile
      }
    }
    __syncwarp();  // the next sample overwrites X and G
  }
#endif
}

// Resident warps an SM holds with `warps` warps a block of `bytes` shared bytes, by shared memory
// (the kernels' few registers do not limit them).
int resident_warps(int warps, std::size_t bytes) {
  int device = 0, per_sm = 0, reserved = 0, max_blocks = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  EMBER_CUDA_CHECK(
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  EMBER_CUDA_CHECK(
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  EMBER_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_blocks, cudaDevAttrMaxBlocksPerMultiprocessor, device));
  const std::size_t blocks =
      static_cast<std::size_t>(per_sm) / (bytes + static_cast<std::size_t>(reserved));
  return static_cast<int>(std::min<std::size_t>(blocks, static_cast<std::size_t>(max_blocks))) *
         warps;
}

// The layout, or warps = 0 when the shape does not fit: F1 <= 32, width a multiple of 8 whose
// rows fit in shared memory. Warps per block: the most resident warps an SM holds (a tie goes to
// more warps a block: fewer pair tables to build).
Tf32Layout tf32_layout(std::int64_t f1, std::int64_t w, bool backward, std::size_t* smem) {
  Tf32Layout lay{0, 0, 0, 0};
  if (f1 < 1 || f1 > kInteractionMaxRows || w < 8 || w % 8 != 0 || w > 4096) return lay;
  const std::int64_t rows = f1 <= 16 ? 16 : 32;
  lay.ld = static_cast<int>(backward ? (w % 16 == 0 ? w + 8 : w + 16) : w + 4);
  std::int64_t floats = rows * lay.ld;
  if (backward) {
    floats += rows * (rows + 4) + 16 * kTileLd + w;
  } else {
    floats = std::max(floats, rows * (rows + 4));  // S overwrites X
  }
  const std::int64_t bytes = (floats * 4 + 127) / 128 * 128;
  lay.table_bytes = static_cast<int>(pair_table_bytes(f1));
  const std::int64_t room = static_cast<std::int64_t>(max_block_shared_bytes()) - lay.table_bytes;
  if (bytes > room) return lay;
  lay.warp_bytes = static_cast<int>(bytes);
  int best = 0;
  for (int warps = static_cast<int>(std::min<std::int64_t>(kInteractionWarps, room / bytes));
       warps >= 1; --warps) {
    const std::size_t block = static_cast<std::size_t>(lay.table_bytes + warps * bytes);
    const int resident = resident_warps(warps, block);
    if (resident > best) {
      best = resident;
      lay.warps = warps;
    }
  }
  if (lay.warps == 0) lay.warps = 1;  // fits one block by the opt-in limit
  *smem = static_cast<std::size_t>(lay.table_bytes) +
          static_cast<std::size_t>(lay.warps) * static_cast<std::size_t>(lay.warp_bytes);
  return lay;
}

}  // namespace

bool interaction_tf32_fit(DType dtype, std::int64_t f1, std::int64_t width, bool backward) {
  if (dtype != DType::F32) return false;
  std::size_t smem = 0;
  return tf32_layout(f1, width, backward, &smem).warps > 0 && compute_capability_major() >= 8;
}

void interaction_forward_tf32(std::int64_t batch, std::int64_t f1, std::int64_t width,
                              const float* mlp, const float* emb, float* out, StreamHandle stream) {
  std::size_t smem = 0;
  const Tf32Layout lay = tf32_layout(f1, width, false, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction: F1 ", f1, " x width ", width,
              " does not fit the TF32 tensor-core kernels");
  const auto kernel = f1 <= 16 ? forward_tf32_kernel<1> : forward_tf32_kernel<2>;
  const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
  kernel<<<grid, lay.warps * 32, smem, stream>>>(batch, static_cast<int>(f1),
                                                 static_cast<int>(width), mlp, emb, out, lay);
  EMBER_CUDA_CHECK_LAUNCH();
}

void interaction_backward_tf32(std::int64_t batch, std::int64_t f1, std::int64_t width,
                               const float* mlp, const float* emb, const float* dout, float* dmlp,
                               float* demb, StreamHandle stream) {
  std::size_t smem = 0;
  const Tf32Layout lay = tf32_layout(f1, width, true, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction backward: F1 ", f1, " x width ", width,
              " does not fit the TF32 tensor-core kernels");
  const auto kernel = f1 <= 16 ? backward_tf32_kernel<1> : backward_tf32_kernel<2>;
  const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
  kernel<<<grid, lay.warps * 32, smem, stream>>>(
      batch, static_cast<int>(f1), static_cast<int>(width), mlp, emb, dout, dmlp, demb, lay);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::network::cuda::detail
