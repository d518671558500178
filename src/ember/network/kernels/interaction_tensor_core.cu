// The dot interaction for 16-bit activations (f16, bf16) on tensor cores; the design is in
// interaction.cu's header. One warp per sample: the sample's rows staged in shared memory as
// 16-bit values, X X^T (forward) and G X (backward) by PTX's mma.sync and ldmatrix, whose
// fragment layouts are documented, so each lane rounds the results it holds itself and writes
// them where they go, without staging f32 tiles.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "ember/network/kernels/device_utils.cuh"
#include "ember/network/kernels/interaction_common.cuh"

namespace ember::network::cuda::detail {

namespace {

// X's row stride is width + kRowPad values: row starts fall 16 bytes apart modulo 128 (width a
// multiple of 64) or at distinct 16-byte offsets (other multiples of 16), so the 8 rows an
// ldmatrix reads at once hit distinct banks.
constexpr int kRowPad = 8;
// The block's first bytes: a 16-byte zero chunk, which the lanes for padding rows (>= f1, never
// stored) read instead of a row of X.
constexpr int kZeroBytes = 128;

// Warp-level matrix instructions with known fragment layouts (PTX mma.sync m16n8k16, ldmatrix).
// Lane l = 4 g + t holds, of a 16 x 8 f32 result, (g, 2t), (g, 2t + 1) in d[0], d[1] and
// (g + 8, 2t), (g + 8, 2t + 1) in d[2], d[3]. The asm statements clobber memory: they read shared
// memory the compiler does not see them read.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Four 8 x 8 16-bit matrices; lane l gives the address of row l % 8 of matrix l / 8. For a
// row-major 16 x 16 block whose rows lanes 0-15 address, and lanes 16-31 the same rows 8 columns
// on: the A fragment of the block, and the B fragments (k x n, n the block's rows) of its rows
// 0-7 (r[0], r[2]) and 8-15 (r[1], r[3]).
__device__ __forceinline__ void load_matrices(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
// The same, transposed: the two B fragments (16 x 8 each, k x n) of a row-major 16 x 16 block
// (k the rows), columns 0-7 in r[0], r[1] and 8-15 in r[2], r[3].
__device__ __forceinline__ void load_matrices_transposed(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
// d += a b: a 16 x 16 (row major), b 16 x 8 (two registers), d 16 x 8 in f32.
template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned* a, unsigned b0,
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

// A warp's shared memory in both kernels: X [f1][ld] (16-bit), then sample b's output row (the
// forward's, or the backward's output gradient) from the 16-byte boundary at or below its start,
// so that it moves between shared and global memory in aligned 16-byte chunks.
struct TcLayout {
  int ld;          // X's row stride (values)
  int x_bytes;     // X (a multiple of 128 bytes)
  int warp_bytes;  // X and the output row with up to 16 bytes either side
  int warps;       // warps (samples in flight) per block
};

// Both kernels' dynamic shared memory: the block's 16-byte zero chunk (at the start), then each
// warp's lay.warp_bytes. Writes the zero chunk, syncs the block and returns the warp's part.
__device__ __forceinline__ unsigned char* warp_memory(unsigned char* smem, int warp,
                                                      const TcLayout& lay) {
  if (threadIdx.x < 4) reinterpret_cast<unsigned*>(smem)[threadIdx.x] = 0u;
  __syncthreads();
  return smem + kZeroBytes + warp * lay.warp_bytes;
}

// The warp's output row: where it is in global memory (bytes [from, to) of the tensor) and in
// the warp's buffer (`row`, whose 16-byte aligned start `chunk0` holds the tensor's bytes from
// from rounded down to 16).
template <class T>
struct OutputRow {
  std::int64_t from, to;
  unsigned char* chunk0;
  T* row;
  __device__ OutputRow(unsigned char* buffer, std::int64_t b, int ow)
      : from(b * ow * static_cast<std::int64_t>(sizeof(T))),
        to(from + ow * static_cast<std::int64_t>(sizeof(T))),
        chunk0(buffer),
        row(reinterpret_cast<T*>(buffer + from % 16)) {}
  __device__ std::int64_t first_chunk() const { return from / 16 * 16; }
};

// The row I of lower-triangle tile `tile` = I (I + 1) / 2 + J (J <= I); constant in unrolled loops.
__device__ constexpr int triangle_row(int tile) {
  int I = 0;
  while ((I + 1) * (I + 2) / 2 <= tile)
    ++I;
  return I;
}

// Forward: S = X X^T's strictly lower triangle by mma.sync over the lower-triangle 16 x 16 tiles
// (1 of 1, or 3 of 4), 16 columns of the width a step: one ldmatrix per row tile gives both its A
// fragment and, as the 8-row halves, the B fragments of X^T. Each lane rounds its dots and writes
// them at their pair's place in the output row staged in shared memory, which then leaves in
// 16-byte chunks (its partial first and last chunks, which neighbour samples share, value by
// value).
template <class T, int TILES, bool GATHER>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_forward_tc(std::int64_t batch, int f1, int w, const T* mlp, const T* emb, T* out,
                           TcLayout lay, const T* table, const std::int32_t* index) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kTiles = TILES * (TILES + 1) / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  unsigned char* mine = warp_memory(smem, warp, lay);
  T* X = reinterpret_cast<T*>(mine);
  const int g = lane >> 2, t = lane & 3;
  // ldmatrix addresses of row tile I: this lane's row within it and its 8-column half.
  const int tile_row = (lane & 7) + ((lane >> 3) & 1) * 8, tile_col = (lane >> 4) * 8;
  unsigned rows_at[TILES];
#pragma unroll
  for (int I = 0; I < TILES; ++I) {
    const int r = 16 * I + tile_row;
    rows_at[I] = r < f1 ? shared_address(X + r * lay.ld + tile_col) : shared_address(smem);
  }
  const int npairs = f1 * (f1 - 1) / 2, ow = w + npairs + 1;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  auto* base = reinterpret_cast<unsigned char*>(out);
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp;
  SampleRows<T, GATHER> rows(mlp, emb, table, index, batch, step, f1, w, lane, first);
  for (std::int64_t b = first; b < batch; b += step) {
    rows.stage(X, lay.ld, b);
    wait_async_copies();
    __syncwarp();
    // Lower-triangle tile (I, J <= I) is tile I (I + 1) / 2 + J; its 8-row half h (of X^T's
    // columns) accumulates in acc[2 tile + h].
    float acc[2 * kTiles][4] = {};
#pragma unroll 2
    for (int k = 0; k < w; k += 16) {
      unsigned x[TILES][4];
#pragma unroll
      for (int I = 0; I < TILES; ++I)
        load_matrices(x[I], rows_at[I] + (16 * I + tile_row < f1 ? 2u * k : 0u));
#pragma unroll
      for (int n = 0; n < 2 * kTiles; ++n) {
        const int I = triangle_row(n / 2), J = n / 2 - I * (I + 1) / 2, h = n % 2;
        if (16 * J + 8 * h < f1) mma_16x8x16<T>(acc[n], x[I], x[J][h], x[J][h + 2]);
      }
    }
    const OutputRow<T> o(mine + lay.x_bytes, b, ow);
    for (int c = lane; c < w; c += 32)
      o.row[c] = X[c];
    if (lane == 0) o.row[ow - 1] = from_f<T>(0.0f);
#pragma unroll
    for (int n = 0; n < 2 * kTiles; ++n) {
      const int I = triangle_row(n / 2), J = n / 2 - I * (I + 1) / 2, h = n % 2;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * I + g + 8 * (e >> 1), j = 16 * J + 8 * h + 2 * t + (e & 1);
        if (j < i && i < f1) o.row[w + i * (i - 1) / 2 + j] = from_f<T>(acc[n][e]);
      }
    }
    __syncwarp();
    // The tensor's 16-byte chunks inside the row, then the partial ones at its ends.
    const std::int64_t first = (o.from + 15) / 16 * 16, last = o.to / 16 * 16;
    for (std::int64_t at = first + 16 * lane; at < last; at += 32 * 16) {
      *reinterpret_cast<uint4*>(base + at) =
          *reinterpret_cast<const uint4*>(o.chunk0 + (at - o.first_chunk()));
    }
    const int head = static_cast<int>(first - o.from) / static_cast<int>(sizeof(T));
    const int tail = static_cast<int>(o.to - last) / static_cast<int>(sizeof(T));
    if (lane < head) out[b * ow + lane] = o.row[lane];
    if (lane >= 16 && lane - 16 < tail)
      out[b * ow + ow - tail + (lane - 16)] = o.row[ow - tail + (lane - 16)];
    __syncwarp();  // the next sample's copies overwrite X and the row
  }
#endif
}

// Backward: dX = G X per sample, one warp per sample; G is symmetric, G[i][j] the output
// gradient of pair (i, j), zero on the diagonal and padding. Each warp stages X and the sample's
// output gradient row (OutputRow: the 16-byte chunks around it) with asynchronous copies only, so
// a sample waits on global memory once. (Two such buffers per warp, the next sample's copies in
// flight while this one computes, measured the same on an H200: 0.284-0.288 ms against
// 0.284-0.286 at DLRM's shape, with 12 warps a multiprocessor against 16.)
//
// A's fragments (G) come straight from the gradient row: each lane's 8 TILES^2 entries of G are at
// fixed offsets into the row's pairs, computed once. B's fragments (X) come by ldmatrix; the lanes
// for padding rows read the block's zero chunk. Each 16-column block of dX overwrites the same
// block of X, which no later block reads, so X ends as dX and leaves in coalesced 16-byte row
// copies.
template <class T, int TILES, bool GATHER>
__global__ void __launch_bounds__(kInteractionWarps * 32)
    interaction_backward_tc(std::int64_t batch, int f1, int w, const T* mlp, const T* emb,
                            const T* dout, T* dmlp, T* demb, TcLayout lay, const T* table,
                            const std::int32_t* index) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr unsigned kZero = 0xffffu;  // an A entry that is zero, not a pair
  constexpr int kEntries = TILES * TILES * 4;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  unsigned char* mine = warp_memory(smem, warp, lay);
  T* X = reinterpret_cast<T*>(mine);
  const int g = lane >> 2, t = lane & 3;
  // This lane's entries of A, as offsets into the gradient row's pairs (pair (i, j), i > j, at
  // i (i - 1) / 2 + j; kZero where G is zero), two to a register: tile (I, K)'s register q, entry
  // n = (I TILES + K) 4 + q, holds G[16 I + g + 8 (q & 1)][16 K + 2 t + 8 (q >> 1) + h] in its
  // half h (the mma layout).
  unsigned offsets[kEntries];
#pragma unroll
  for (int n = 0; n < kEntries; ++n) {
    const int I = n / (4 * TILES), K = n / 4 % TILES, q = n % 4;
    unsigned packed = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 16 * I + g + 8 * (q & 1), j = 16 * K + 2 * t + 8 * (q >> 1) + h;
      const int hi = i > j ? i : j, lo = i > j ? j : i;
      const unsigned off =
          (i == j || hi >= f1) ? kZero : static_cast<unsigned>(hi * (hi - 1) / 2 + lo);
      packed |= off << (16 * h);
    }
    offsets[n] = packed;
  }
  // ldmatrix addresses: this lane's row within a 16-row tile and its 8-column half.
  const int tile_row = (lane & 7) + ((lane >> 3) & 1) * 8, tile_col = (lane >> 4) * 8;
  const unsigned zero_lane = shared_address(smem);
  const int chunks = w / 8;  // 16-byte chunks per row of X
  const int ow = w + f1 * (f1 - 1) / 2 + 1;
  const std::int64_t dout_bytes = batch * ow * static_cast<std::int64_t>(sizeof(T));
  const auto* base = reinterpret_cast<const unsigned char*>(dout);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * lay.warps;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * lay.warps + warp;
  SampleRows<T, GATHER> rows(mlp, emb, table, index, batch, step, f1, w, lane, first);
  for (std::int64_t b = first; b < batch; b += step) {
    rows.stage(X, lay.ld, b);
    const OutputRow<T> o(mine + lay.x_bytes, b, ow);
    for (std::int64_t at = o.first_chunk() + 16 * lane; at < o.to; at += 32 * 16) {
      copy16_async_partial(o.chunk0 + (at - o.first_chunk()), base + at,
                           static_cast<int>(std::min<std::int64_t>(16, dout_bytes - at)));
    }
    wait_async_copies();
    __syncwarp();
    // The output gradient row: the MLP vector's direct gradient, then the pairs.
    const T* direct = o.row;
    const auto* pairs = reinterpret_cast<const std::uint16_t*>(direct + w);
    unsigned a[kEntries];
#pragma unroll
    for (int n = 0; n < kEntries; ++n) {
      const unsigned lo = offsets[n] & 0xffffu, hi = offsets[n] >> 16;
      a[n] = (lo == kZero ? 0u : pairs[lo]) | ((hi == kZero ? 0u : pairs[hi]) << 16);
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
          mma_16x8x16<T>(lo, a + (I * TILES + K) * 4, bx[K][0], bx[K][1]);
          mma_16x8x16<T>(hi, a + (I * TILES + K) * 4, bx[K][2], bx[K][3]);
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

// The layout of both kernels, or warps = 0 when the shape does not fit.
TcLayout tc_layout(std::int64_t f1, std::int64_t w, std::size_t* smem) {
  TcLayout lay{0, 0, 0, 0};
  if (f1 < 1 || f1 > kInteractionMaxRows || w < 16 || w % 16 != 0 || w > 4096) return lay;
  const auto round = [](std::int64_t bytes) { return (bytes + 127) / 128 * 128; };
  lay.ld = static_cast<int>(w + kRowPad);
  const std::int64_t x = round(f1 * lay.ld * 2);
  const std::int64_t bytes = x + round((w + f1 * (f1 - 1) / 2 + 1) * 2 + 32);
  const std::int64_t room = static_cast<std::int64_t>(max_block_shared_bytes()) - kZeroBytes;
  if (bytes > room) return lay;
  lay.x_bytes = static_cast<int>(x);
  lay.warp_bytes = static_cast<int>(bytes);
  lay.warps = static_cast<int>(std::min<std::int64_t>(kInteractionWarps, room / bytes));
  *smem = kZeroBytes + static_cast<std::size_t>(lay.warps) * static_cast<std::size_t>(bytes);
  return lay;
}

template <class T, int TILES>
void launch_forward(std::int64_t batch, int f1, int w, const void* mlp, const void* emb, void* out,
                    const RowGather& gather, const TcLayout& lay, std::size_t smem,
                    StreamHandle stream) {
  const auto kernel = gather.defined() ? interaction_forward_tc<T, TILES, true>
                                       : interaction_forward_tc<T, TILES, false>;
  const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
  kernel<<<grid, lay.warps * 32, smem, stream>>>(
      batch, f1, w, static_cast<const T*>(mlp), static_cast<const T*>(emb), static_cast<T*>(out),
      lay, static_cast<const T*>(gather.table), gather.index);
  EMBER_CUDA_CHECK_LAUNCH();
}

template <class T, int TILES>
void launch_backward(std::int64_t batch, int f1, int w, const void* mlp, const void* emb,
                     const void* dout, void* dmlp, void* demb, const RowGather& gather,
                     const TcLayout& lay, std::size_t smem, StreamHandle stream) {
  const auto kernel = gather.defined() ? interaction_backward_tc<T, TILES, true>
                                       : interaction_backward_tc<T, TILES, false>;
  const unsigned grid = warp_per_sample_grid(kernel, batch, lay.warps, smem);
  kernel<<<grid, lay.warps * 32, smem, stream>>>(
      batch, f1, w, static_cast<const T*>(mlp), static_cast<const T*>(emb),
      static_cast<const T*>(dout), static_cast<T*>(dmlp), static_cast<T*>(demb), lay,
      static_cast<const T*>(gather.table), gather.index);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool interaction_tensor_cores_fit(DType dtype, std::int64_t f1, std::int64_t width) {
  if (dtype != DType::F16 && dtype != DType::BF16) return false;
  std::size_t smem = 0;
  const int warps = tc_layout(f1, width, &smem).warps;
  return warps > 0 && compute_capability_major() >= 8;
}

void interaction_forward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                      std::int64_t width, const void* mlp, const void* emb,
                                      void* out, const RowGather& gather, StreamHandle stream) {
  std::size_t smem = 0;
  const TcLayout lay = tc_layout(f1, width, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction: F1 ", f1, " x width ", width,
              " does not fit the 16-bit tensor-core kernels");
  const int f = static_cast<int>(f1), w = static_cast<int>(width);
  const bool one = f1 <= 16;
  if (dtype == DType::F16) {
    (one ? launch_forward<Half, 1> : launch_forward<Half, 2>)(batch, f, w, mlp, emb, out, gather,
                                                              lay, smem, stream);
  } else {
    (one ? launch_forward<BFloat16, 1> : launch_forward<BFloat16, 2>)(batch, f, w, mlp, emb, out,
                                                                      gather, lay, smem, stream);
  }
}

void interaction_backward_tensor_cores(DType dtype, std::int64_t batch, std::int64_t f1,
                                       std::int64_t width, const void* mlp, const void* emb,
                                       const void* dout, void* dmlp, void* demb,
                                       const RowGather& gather, StreamHandle stream) {
  std::size_t smem = 0;
  const int f = static_cast<int>(f1), w = static_cast<int>(width);
  const bool one = f1 <= 16;
  const TcLayout lay = tc_layout(f1, width, &smem);
  EMBER_CHECK(lay.warps > 0, "Interaction backward: F1 ", f1, " x width ", width,
              " does not fit the 16-bit tensor-core kernels");
  if (dtype == DType::F16) {
    (one ? launch_backward<Half, 1> : launch_backward<Half, 2>)(batch, f, w, mlp, emb, dout, dmlp,
                                                                demb, gather, lay, smem, stream);
  } else {
    (one ? launch_backward<BFloat16, 1> : launch_backward<BFloat16, 2>)(batch, f, w, mlp, emb, dout,
                                                                        dmlp, demb, gather, lay,
                                                                        smem, stream);
  }
}

}  // namespace ember::network::cuda::detail
