// CUDA halves of fill, copy and where (see ops_kernels.hpp). These only move bits, so they are
// instantiated once per element size (1, 2, 4, 8 bytes), not once per dtype; conversions between
// dtypes live in ops_cuda_cast.cu.
#include <cuda_runtime.h>

#include <cstring>

#include "ember/core/device.hpp"
#include "ember/tensor/cuda_apply.cuh"
#include "ember/tensor/iteration.hpp"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

namespace {

using cuda_apply::tensor_arg;

// ---- tiled transposing copy ------------------------------------------------------------------
// When the output's unit-stride dimension A is strided in the input and the input's unit-stride
// dimension B is strided in the output, an element-wise loop coalesces one side only. Here a block
// moves a 32 x 32 tile through shared memory: it reads the tile along B (coalesced in the input)
// and writes it along A (coalesced in the output). Every other dimension is a batch index.

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // block of 32 x 8 threads, each moving 4 elements per tile

struct TileGeometry {
  std::uint32_t size_a, size_b;
  std::uint32_t out_stride_a, out_stride_b, in_stride_a, in_stride_b;
  FastDivmod tiles_a, tiles_b;  // tile counts along A and B
  std::uint32_t tiles;          // all tiles, batches included
  int batch_rank;               // batch dimensions, innermost first
  FastDivmod batch_sizes[kMaxRank];
  std::uint32_t out_batch_strides[kMaxRank], in_batch_strides[kMaxRank];
};

// Shared-memory rows padded so that a warp reading a column touches 32 different banks: the row
// length in 4-byte words is odd for 1-, 2- and 4-byte elements (36, 34, 33 elements); 8-byte
// elements are served per half-warp, for which 33 elements (66 words) is conflict-free too.
template <class U>
constexpr int tile_row() {
  return sizeof(U) >= 4 ? kTile + 1 : kTile + 4 / static_cast<int>(sizeof(U));
}

template <class U>
__global__ void __launch_bounds__(kTile* kTileRows)
    transpose_copy_kernel(U* __restrict__ out, const U* __restrict__ in, TileGeometry g) {
  __shared__ U tile[kTile][tile_row<U>()];
  for (std::uint32_t t = blockIdx.x; t < g.tiles; t += gridDim.x) {
    std::uint32_t rest, tile_a, batch, tile_b;
    g.tiles_a.divmod(t, rest, tile_a);
    g.tiles_b.divmod(rest, batch, tile_b);
    std::uint32_t out_base = 0, in_base = 0;
    for (int d = 0; d < g.batch_rank; ++d) {
      std::uint32_t q, coordinate;
      g.batch_sizes[d].divmod(batch, q, coordinate);
      out_base += coordinate * g.out_batch_strides[d];
      in_base += coordinate * g.in_batch_strides[d];
      batch = q;
    }
    const std::uint32_t a0 = tile_a * kTile, b0 = tile_b * kTile;
    // Read along B: consecutive threads, consecutive input elements.
#pragma unroll
    for (int i = 0; i < kTile; i += kTileRows) {
      const std::uint32_t a = a0 + threadIdx.y + i, b = b0 + threadIdx.x;
      if (a < g.size_a && b < g.size_b) {
        tile[threadIdx.y + i][threadIdx.x] = in[in_base + a * g.in_stride_a + b * g.in_stride_b];
      }
    }
    __syncthreads();
    // Write along A: consecutive threads, consecutive output elements.
#pragma unroll
    for (int i = 0; i < kTile; i += kTileRows) {
      const std::uint32_t a = a0 + threadIdx.x, b = b0 + threadIdx.y + i;
      if (a < g.size_a && b < g.size_b) {
        out[out_base + a * g.out_stride_a + b * g.out_stride_b] =
            tile[threadIdx.x][threadIdx.y + i];
      }
    }
    __syncthreads();
  }
}

// Plans the tiled copy of one 32-bit piece; false when the piece is not a transposition worth
// tiling (no unit-stride dimension on either side, the same one on both, or one under a tile).
bool plan_tiles(const IterationPlan<2>& plan, TileGeometry& g) {
  int a = -1, b = -1;
  for (int d = 0; d < plan.rank; ++d) {
    if (plan.strides[0][d] == 1 && a < 0) a = d;
    if (plan.strides[1][d] == 1 && b < 0) b = d;
  }
  if (a < 0 || b < 0 || a == b) return false;
  if (plan.sizes[a] < kTile || plan.sizes[b] < kTile) return false;
  g = TileGeometry{};
  g.size_a = static_cast<std::uint32_t>(plan.sizes[a]);
  g.size_b = static_cast<std::uint32_t>(plan.sizes[b]);
  g.out_stride_a = static_cast<std::uint32_t>(plan.strides[0][a]);
  g.out_stride_b = static_cast<std::uint32_t>(plan.strides[0][b]);
  g.in_stride_a = static_cast<std::uint32_t>(plan.strides[1][a]);
  g.in_stride_b = static_cast<std::uint32_t>(plan.strides[1][b]);
  const std::uint32_t tiles_a = (g.size_a + kTile - 1) / kTile;
  const std::uint32_t tiles_b = (g.size_b + kTile - 1) / kTile;
  g.tiles_a = FastDivmod(tiles_a);
  g.tiles_b = FastDivmod(tiles_b);
  std::uint64_t batches = 1;
  for (int d = plan.rank - 1; d >= 0; --d) {  // innermost first
    if (d == a || d == b) continue;
    g.batch_sizes[g.batch_rank] = FastDivmod(static_cast<std::uint32_t>(plan.sizes[d]));
    g.out_batch_strides[g.batch_rank] = static_cast<std::uint32_t>(plan.strides[0][d]);
    g.in_batch_strides[g.batch_rank] = static_cast<std::uint32_t>(plan.strides[1][d]);
    ++g.batch_rank;
    batches *= static_cast<std::uint64_t>(plan.sizes[d]);
  }
  const std::uint64_t tiles = batches * tiles_a * tiles_b;
  if (tiles > FastDivmod::kMaxNumerator) return false;
  g.tiles = static_cast<std::uint32_t>(tiles);
  return true;
}

template <class U>
void transpose_copy(U* out, const U* in, const TileGeometry& g, cudaStream_t stream) {
  constexpr int threads = kTile * kTileRows;
  // One tile per block per step: `work` counts tiles as if each were one thread's item.
  const unsigned blocks = grid_for(reinterpret_cast<const void*>(transpose_copy_kernel<U>), threads,
                                   static_cast<std::int64_t>(g.tiles) * threads);
  transpose_copy_kernel<U><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(out, in, g);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_cuda(const Tensor& out, double value, StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = BitsOf<T>;
    const U bits = value_bits<T>(value);
    // A dense fill whose bytes are all equal (zeros above all) is a memset.
    unsigned char bytes[sizeof(U)];
    std::memcpy(bytes, &bits, sizeof(U));
    bool uniform = true;
    for (std::size_t i = 1; i < sizeof(U); ++i)
      uniform = uniform && bytes[i] == bytes[0];
    if (uniform && out.is_contiguous()) {
      EMBER_CUDA_CHECK(cudaMemsetAsync(out.data(), bytes[0], out.nbytes(), stream));
      return;
    }
    cuda_apply::pointwise<U>(ConstantFn<U>{bits}, out, stream);
  });
}

void copy_cuda(const Tensor& out, const Tensor& in, StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  if (out.dtype() != in.dtype()) {
    cast_cuda(out, in, stream);
    return;
  }
  const auto plan = make_iteration_plan<2>(out.shape(), {out.strides(), in.strides()});
  if (plan.contiguous()) {
    EMBER_CUDA_CHECK(
        cudaMemcpyAsync(out.data(), in.data(), out.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  dispatch_bits(out.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    // A transposition is tiled when it fits 32-bit indexing (beyond that, element-wise pieces).
    TileGeometry g;
    if (fits_32bit(plan) && plan_tiles(plan, g)) {
      transpose_copy<U>(static_cast<U*>(out.data()), static_cast<const U*>(in.data()), g, stream);
      return;
    }
    cuda_apply::pointwise<U, U>(IdentityFn<U>{}, out, stream, tensor_arg<U>(in));
  });
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b,
                StreamHandle stream) {
  DeviceGuard guard(out.place().device());
  dispatch_bits(out.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    cuda_apply::pointwise<U, bool, U, U>(WhereFn<U>{}, out, stream, tensor_arg<bool>(cond),
                                         tensor_arg<U>(a), tensor_arg<U>(b));
  });
}

}  // namespace ember::ops::detail
