// The dot interaction for 16-bit activations (f16, bf16) on tensor cores; the design is in
// interaction.cu's header. One warp per sample, a sample's rows (TILES = 1 or 2 tiles of 16 rows,
// the last padded) staged in shared memory as 16-bit values.
//
// The forward's fragments are opaque (WMMA): only loaded, multiplied and stored with explicit
// layouts; every fragment pointer is 32-byte aligned and every leading dimension a multiple of 8
// values (16-bit) or 4 (f32): X's row stride is width + 8 values (width a multiple of 16), the f32
// staging's 16 TILES + 4, and every per-warp region starts on a multiple of 128 bytes. The
// backward uses PTX's mma.sync and ldmatrix, whose fragment layouts are documented, so each lane
// builds its A fragments from the output gradient and rounds its own results.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <type_traits>

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

struct TcLayout {
  int ld;           // X's row stride (values)
  int warp_bytes;   // shared bytes per warp (a multiple of 128)
  int table_bytes;  // the block's pair table
  int warps;        // warps (samples in flight) per block
};

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

// Warp-level matrix instructions with known fragment layouts (PTX mma.sync m16n8k16, ldmatrix),
// so that a result's f32 values can be rounded and written to shared memory by the lane that
// holds them, without staging the f32 tile. Lane l = 4 g + t holds, of a 16 x 8 f32 result,
// (g, 2t), (g, 2t + 1) in d[0], d[1] and (g + 8, 2t), (g + 8, 2t + 1) in d[2], d[3]. The asm
// statements clobber memory: they read shared memory the compiler does not see them read.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Four 8 x 8 16-bit matrices, transposed; lane l gives the address of row l % 8 of matrix l / 8:
// the two B fragments (16 x 8 each, k x n) of a row-major 16 x 16 block (k the rows) whose rows
// lanes 0-15 address, and lanes 16-31 the same rows 8 columns on.
__device__ __forceinline__ void load_matrices_transposed(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
// d += a b: a 16 x 16 (row major), b 16 x 8 (two registers), d 16 x 8 in f32.
template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1) {
  if constexpr (std::is_same_v<T, Half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
// Two f32 values rounded to T and packed, the first in the low half (the lower address).
template <class T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  return static_cast<unsigned>(from_f<T>(lo).bits) |
         (static_cast<unsigned>(from_f<T>(hi).bits) << 16);
}
// 16 bytes global -> shared, of which the first `bytes` (0..16) are read and the rest zero-filled:
// the last chunk of a tensor that does not end on a 16-byte boundary.
__device__ __forceinline__ void copy16_async_partial(void* shared, const void* global, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)),
               "l"(global), "r"(bytes)
               : "memory");
}

// A lane's walk over the 16-byte chunks (r, c) of `rows` rows of `chunks` chunks each, 32 chunks
// (one per lane) a step, without a division per step.
struct ChunkWalk {
  int r, c, chunks, dr, dc;
  __device__ ChunkWalk(int lane, int chunks_per_row)
      : r(lane / chunks_per_row),
        c(lane % chunks_per_row),
        chunks(chunks_per_row),
        dr(32 / chunks_per_row),
        dc(32 % chunks_per_row) {}
  __device__ void next() {
    r += dr;
    c += dc;
    if (c >= chunks) {
      c -= chunks;
      ++r;
    }
  }
};

struct TcBackwardLayout {
  int ld;          // X's row stride (values)
  int x_bytes;     // X: f1 rows (a multiple of 128 bytes)
  int warp_bytes;  // X, then the output gradient's row with up to 16 bytes either side
  int warps;       // warps (samples in flight) per block
};

// Backward: dX = G X per sample, one warp per sample; G is symmetric, G[i][j] the output
// gradient of pair (i, j), zero on the diagonal and padding. Each warp stages X [f1][ld] (16-bit)
// and the sample's output gradient row (the 16-byte chunks around it, so the row's position in the
// buffer shifts by sample) with asynchronous copies only, so a sample waits on global memory once.
// (Two such buffers per warp, the next sample's copies in flight while this one computes, measured
// the same on an H200: 0.284-0.288 ms against 0.284-0.286 at DLRM's shape, with 12 warps a
// multiprocessor against 16.)
//
// A's fragments (G) come straight from the gradient row: each lane's 8 TILES^2 entries of G are at
// fixed offsets into the row's pairs, computed once. B's fragments (X) come by ldmatrix; the lanes
// for padding rows (>= f1, never stored) read the block's 16-byte zero chunk. Each 16-column block
// of dX overwrites the same block of X, which no later block reads, so X ends as dX and leaves in
// coalesced 16-byte row copies.
template <class T, int TILES>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_backward_tc(std::int64_t batch, int f1, int w, const T* mlp, const T* emb,
                            const T* dout, T* dmlp, T* demb, TcBackwardLayout lay) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr unsigned kZero = 0xffffu;  // an A entry that is zero, not a pair
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  auto* zero = reinterpret_cast<unsigned*>(smem);
  if (threadIdx.x < 4) zero[threadIdx.x] = 0u;
  unsigned char* mine = smem + 128 + warp * lay.warp_bytes;
  T* X = reinterpret_cast<T*>(mine);
  unsigned char* R = mine + lay.x_bytes;  // the output gradient's row, shifted
  __syncthreads();
  const int g = lane >> 2, t = lane & 3;
  // This lane's entries of A, as offsets into the gradient row's pairs (pair (i, j), i > j, at
  // i (i - 1) / 2 + j; kZero where G is zero), two to a register: tile (I, K)'s register q holds
  // G[16 I + g + 8 (q & 1)][16 K + 2 t + 8 (q >> 1) + h] in its half h (the mma layout), found at
  // offsets[(I TILES + K) 4 + q] >> 16 h.
  unsigned offsets[TILES * TILES * 4];
#pragma unroll
  for (int I = 0; I < TILES; ++I) {
#pragma unroll
    for (int K = 0; K < TILES; ++K) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        unsigned packed = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = 16 * I + g + 8 * (q & 1), j = 16 * K + 2 * t + 8 * (q >> 1) + h;
          const int hi = i > j ? i : j, lo = i > j ? j : i;
          const unsigned off =
              (i == j || hi >= f1) ? kZero : static_cast<unsigned>(hi * (hi - 1) / 2 + lo);
          packed |= off << (16 * h);
        }
        offsets[(I * TILES + K) * 4 + q] = packed;
      }
    }
  }
  // ldmatrix addresses: this lane's row within a 16-row tile and its 8-column half.
  const int tile_row = (lane & 7) + ((lane >> 3) & 1) * 8, tile_col = (lane >> 4) * 8;
  const unsigned zero_lane = shared_address(zero);
  const int chunks = w / 8;  // 16-byte chunks per row of X
  const int ow = w + f1 * (f1 - 1) / 2 + 1;
  const std::int64_t dout_bytes = batch * ow * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp; b < batch;
       b += step) {
    const T* m = mlp + b * w;
    const T* e = emb + b * (f1 - 1) * static_cast<std::int64_t>(w);
    for (ChunkWalk k(lane, chunks); k.r < f1; k.next())
      copy16_async(X + k.r * lay.ld + 8 * k.c, (k.r == 0 ? m : e + (k.r - 1) * w) + 8 * k.c);
    const std::int64_t from = b * ow * static_cast<std::int64_t>(sizeof(T)) / 16 * 16;
    const std::int64_t to = (b + 1) * ow * static_cast<std::int64_t>(sizeof(T));
    const auto* base = reinterpret_cast<const unsigned char*>(dout);
    for (std::int64_t at = from + 16 * lane; at < to; at += 32 * 16) {
      copy16_async_partial(R + (at - from), base + at,
                           static_cast<int>(std::min<std::int64_t>(16, dout_bytes - at)));
    }
    wait_async_copies();
    __syncwarp();
    // The output gradient row: the MLP vector's direct gradient, then the pairs.
    const auto* direct = reinterpret_cast<const T*>(R) + (b * ow) % (16 / sizeof(T));
    const auto* pairs = reinterpret_cast<const std::uint16_t*>(direct + w);
    unsigned a[TILES][TILES][4];
#pragma unroll
    for (int I = 0; I < TILES; ++I) {
#pragma unroll
      for (int K = 0; K < TILES; ++K) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const unsigned packed = offsets[(I * TILES + K) * 4 + q];
          const unsigned lo = packed & 0xffffu, hi = packed >> 16;
          a[I][K][q] = (lo == kZero ? 0u : pairs[lo]) | ((hi == kZero ? 0u : pairs[hi]) << 16);
        }
      }
    }
    const unsigned x_lane = shared_address(X + tile_col);
#pragma unroll 2
    for (int J = 0; J < w / 16; ++J) {
      // Per k tile: B of columns 16 J.. ([0], [1]) and 16 J + 8.. ([2], [3]).
      unsigned bx[TILES][4];
#pragma unroll
      for (int K = 0; K < TILES; ++K) {
        const int k = 16 * K + tile_row;
        load_matrices_transposed(
            bx[K], k < f1 ? x_lane + 2u * static_cast<unsigned>(k * lay.ld + 16 * J) : zero_lane);
      }
#pragma unroll
      for (int I = 0; I < TILES; ++I) {
        if (16 * I >= f1) break;
        float lo[4] = {0.f, 0.f, 0.f, 0.f}, hi[4] = {0.f, 0.f, 0.f, 0.f};  // columns +0, +8
#pragma unroll
        for (int K = 0; K < TILES; ++K) {
          mma_16x8x16<T>(lo, a[I][K], bx[K][0], bx[K][1]);
          mma_16x8x16<T>(hi, a[I][K], bx[K][2], bx[K][3]);
        }
        const int c = 16 * J + 2 * t, r = 16 * I + g;
        if (I == 0 && g == 0 && dmlp != nullptr) {  // the MLP vector's own part of the output
          lo[0] += static_cast<float>(direct[c]);
          lo[1] += static_cast<float>(direct[c + 1]);
          hi[0] += static_cast<float>(direct[c + 8]);
          hi[1] += static_cast<float>(direct[c + 9]);
        }
        if (r < f1) {
          *reinterpret_cast<unsigned*>(X + r * lay.ld + c) = pack2<T>(lo[0], lo[1]);
          *reinterpret_cast<unsigned*>(X + r * lay.ld + c + 8) = pack2<T>(hi[0], hi[1]);
        }
        if (r + 8 < f1) {
          *reinterpret_cast<unsigned*>(X + (r + 8) * lay.ld + c) = pack2<T>(lo[2], lo[3]);
          *reinterpret_cast<unsigned*>(X + (r + 8) * lay.ld + c + 8) = pack2<T>(hi[2], hi[3]);
        }
      }
    }
    __syncwarp();
    // X now holds dX: row 0 to dmlp's row b, rows 1.. to demb's rows.
    T* dm = dmlp == nullptr ? nullptr : dmlp + b * w;
    T* de = demb == nullptr ? nullptr : demb + b * (f1 - 1) * static_cast<std::int64_t>(w);
    for (ChunkWalk k(lane, chunks); k.r < f1; k.next()) {
      T* dst = k.r == 0 ? dm : (de == nullptr ? nullptr : de + (k.r - 1) * w);
      if (dst != nullptr) {
        *reinterpret_cast<uint4*>(dst + 8 * k.c) =
            *reinterpret_cast<const uint4*>(X + k.r * lay.ld + 8 * k.c);
      }
    }
    __syncwarp();  // the next sample's copies overwrite what this one read
  }
#endif
}

// The backward's layout, or warps = 0 when the shape does not fit.
TcBackwardLayout tc_backward_layout(std::int64_t f1, std::int64_t w, std::size_t* smem) {
  TcBackwardLayout lay{0, 0, 0, 0};
  if (f1 < 1 || f1 > kInteractionMaxRows || w < 16 || w % 16 != 0 || w > 4096) return lay;
  const auto round = [](std::int64_t bytes) { return (bytes + 127) / 128 * 128; };
  lay.ld = static_cast<int>(w + kRowPad);
  const std::int64_t x = round(f1 * lay.ld * 2);
  const std::int64_t bytes = x + round((w + f1 * (f1 - 1) / 2 + 1) * 2 + 32);
  const std::int64_t room = static_cast<std::int64_t>(max_block_shared_bytes()) - 128;
  if (bytes > room) return lay;
  lay.x_bytes = static_cast<int>(x);
  lay.warp_bytes = static_cast<int>(bytes);
  lay.warps = static_cast<int>(std::min<std::int64_t>(kInteractionWarps, room / bytes));
  *smem = 128 + static_cast<std::size_t>(lay.warps) * static_cast<std::size_t>(bytes);
  return lay;
}

// The layout, or warps = 0 when the shape does not fit the tensor-core kernels.
TcLayout tc_forward_layout(std::int64_t f1, std::int64_t w, std::size_t* smem) {
  TcLayout lay{0, 0, 0, 0};
  if (f1 < 1 || f1 > kInteractionMaxRows || w < 16 || w % 16 != 0 || w > 4096) return lay;
  const std::int64_t rows = f1 <= 16 ? 16 : 32;
  lay.ld = static_cast<int>(w + kRowPad);
  std::int64_t bytes = rows * lay.ld * 2;
  bytes += rows * (rows + 4) * 4;
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
                     const void* dout, void* dmlp, void* demb, const TcBackwardLayout& lay,
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
  const int warps = backward ? tc_backward_layout(f1, width, &smem).warps
                             : tc_forward_layout(f1, width, &smem).warps;
  return warps > 0 && compute_capability_major() >= 8;
}

void interaction_forward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                      std::int64_t width, const void* mlp, const void* emb,
                                      void* out, StreamHandle stream) {
  std::size_t smem = 0;
  const TcLayout lay = tc_forward_layout(f1, width, &smem);
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
  const int f = static_cast<int>(f1), w = static_cast<int>(width);
  const bool one = f1 <= 16;
  const TcBackwardLayout lay = tc_backward_layout(f1, width, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction backward: shape does not fit the tensor-core kernels");
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
