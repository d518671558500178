// CUDA reductions (see reduce_kernels.hpp).
//
// All elements: one pass over the input's memory (any dense layout, a transposed one included,
// since order does not matter; other views are packed first). Each thread loads 16-byte vectors,
// four per grid step, all issued before any is added, into four accumulators; a block reduces its
// threads' values into one partial. One block writes the result directly; otherwise a second,
// one-block kernel adds the partials in block order (so the result does not depend on timing)
// and converts. Inputs of 2^31 elements or more are cut into pieces that fit 32-bit indexing,
// their partials reduced together. This replaced cub::DeviceReduce, which took three launches
// (CUB's two and a conversion) and most of this file's compile time.
//
// Along one dimension the input is seen as [outer, length, inner] (dense; packed first when it is
// not). Two hand-written kernels cover the layouts:
//   rows:    inner == 1, each output reduces a contiguous row: a warp per row (many rows), or a
//            block per row, cut into several blocks per row when rows are too few to fill the GPU
//            (partials, then a second pass over them);
//   columns: inner > 1, each output reduces a column with stride inner: a thread per output,
//            neighbouring threads reading neighbouring addresses, again cut into parts along the
//            reduced dimension when the outputs are too few to fill the GPU.
// Narrow columns (1 < inner < 32) would not coalesce and are transposed into rows first.
#include <algorithm>

#include "ember/core/allocation.hpp"
#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"
#include "ember/tensor/cuda_launch.hpp"
#include "ember/tensor/cuda_vector_io.cuh"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/pointwise_plan.hpp"
#include "ember/tensor/reduce_functors.hpp"
#include "ember/tensor/reduce_kernels.hpp"

namespace ember::ops::detail {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <class In, class Acc>
__device__ __forceinline__ Acc to_acc(In v) {
  if constexpr (std::is_same_v<In, Acc>) {
    return v;
  } else {
    return ToAcc<In>{}(v);
  }
}

template <bool Final, class Out, class Acc>
__device__ __forceinline__ void store(Out* out, Acc acc, ReduceOp op, std::int64_t count) {
  if constexpr (Final) {
    *out = reduce_finish<Out>(acc, op, count);
  } else {
    *out = acc;
  }
}

template <class Acc>
__device__ __forceinline__ Acc warp_reduce(Acc v, const ReduceStep<Acc>& step) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = step(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// The block's total, valid in thread 0.
template <class Acc>
__device__ __forceinline__ Acc block_reduce(Acc v, const ReduceStep<Acc>& step, ReduceOp op) {
  __shared__ Acc warp_totals[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, step);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? warp_totals[lane] : reduce_identity<Acc>(op);
    v = warp_reduce(v, step);
  }
  __syncthreads();  // warp_totals is reused by the block's next row
  return v;
}

// A warp per row: rows of `length` contiguous elements.
template <class In, class Acc, class Out, bool Final>
__global__ void __launch_bounds__(kThreads)
    rows_warp_kernel(const In* __restrict__ in, Out* __restrict__ out, std::int64_t rows,
                     std::int64_t length, ReduceOp op, std::int64_t count) {
  const ReduceStep<Acc> step{op};
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarps;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
       row < rows; row += warps) {
    const In* src = in + row * length;
    Acc acc = reduce_identity<Acc>(op);
    for (std::int64_t j = lane; j < length; j += 32)
      acc = step(acc, to_acc<In, Acc>(src[j]));
    acc = warp_reduce(acc, step);
    if (lane == 0) store<Final>(out + row, acc, op, count);
  }
}

// A block per (row, part): part p of a row covers elements [p * chunk, (p + 1) * chunk); the
// result goes to out[row * parts + p].
template <class In, class Acc, class Out, bool Final>
__global__ void __launch_bounds__(kThreads)
    rows_block_kernel(const In* __restrict__ in, Out* __restrict__ out, std::int64_t rows,
                      std::int64_t length, std::int64_t parts, std::int64_t chunk, ReduceOp op,
                      std::int64_t count) {
  const ReduceStep<Acc> step{op};
  for (std::int64_t b = blockIdx.x; b < rows * parts; b += gridDim.x) {
    const std::int64_t row = b / parts, part = b % parts;
    const std::int64_t begin = part * chunk, end = begin + chunk < length ? begin + chunk : length;
    const In* src = in + row * length;
    Acc acc = reduce_identity<Acc>(op);
    for (std::int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
      acc = step(acc, to_acc<In, Acc>(src[j]));
    }
    acc = block_reduce(acc, step, op);
    if (threadIdx.x == 0) store<Final>(out + b, acc, op, count);
  }
}

// A thread per (part, outer, inner) output of an [outer, length, inner] input; part p covers
// [p * chunk, (p + 1) * chunk) of the reduced dimension and writes out[p][outer][inner].
template <class In, class Acc, class Out, bool Final>
__global__ void __launch_bounds__(kThreads)
    columns_kernel(const In* __restrict__ in, Out* __restrict__ out, std::int64_t outer,
                   std::int64_t length, std::int64_t inner, std::int64_t parts, std::int64_t chunk,
                   ReduceOp op, std::int64_t count) {
  const ReduceStep<Acc> step{op};
  const std::int64_t outputs = outer * inner;
  const std::int64_t total = outputs * parts;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t part = t / outputs, output = t % outputs;
    const std::int64_t o = output / inner, i = output % inner;
    const std::int64_t begin = part * chunk, end = begin + chunk < length ? begin + chunk : length;
    const In* src = in + o * length * inner + i;
    Acc acc = reduce_identity<Acc>(op);
    for (std::int64_t r = begin; r < end; ++r)
      acc = step(acc, to_acc<In, Acc>(src[r * inner]));
    store<Final>(out + t, acc, op, count);
  }
}

// ---- all elements -------------------------------------------------------------------------

constexpr int kAllUnroll = 4;  // vectors per thread per grid step

// This thread's share of the n elements at `in` (n < 2^31), combined with Op (a compile-time
// constant, so the per-element step has no switch). The body is the 16-byte vectors after a head
// of up to V - 1 elements that reaches the first 16-byte boundary, walked in grid steps of
// kAllUnroll vectors as the pointwise kernels do (cuda_apply.cuh: one predicated loop body, the
// last step's missing vectors skipped); the head and the tail are taken by the first threads, one
// element each.
template <ReduceOp Op, class T, class Acc>
__device__ __forceinline__ Acc reduce_share(const T* in, std::uint32_t n, std::uint64_t policy) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  using Vector = cuda_apply::Vec<T, V>;
  const ReduceStep<Acc> step{Op};
  const ToAcc<T> convert_to_acc;
  const std::uint32_t misaligned =
      static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(in) % 16 / sizeof(T));
  const std::uint32_t to_boundary =
      misaligned == 0 ? 0u : static_cast<std::uint32_t>(V) - misaligned;
  const std::uint32_t head = to_boundary < n ? to_boundary : n;
  const std::uint32_t vectors = (n - head) / V;
  const Vector* body = reinterpret_cast<const Vector*>(in + head);
  const std::uint32_t thread = blockIdx.x * kThreads + threadIdx.x;
  const std::uint32_t threads = gridDim.x * kThreads;
  // One accumulator per unrolled vector: kAllUnroll independent chains of adds.
  Acc acc[kAllUnroll];
#pragma unroll
  for (int k = 0; k < kAllUnroll; ++k)
    acc[k] = reduce_identity<Acc>(Op);
  for (std::uint32_t first = thread; first < vectors; first += kAllUnroll * threads) {
    Vector x[kAllUnroll];
    // All loads of a step are issued before any add.
#pragma unroll
    for (int k = 0; k < kAllUnroll; ++k) {
      const std::uint32_t at = first + static_cast<std::uint32_t>(k) * threads;
      if (at < vectors) x[k] = cuda_apply::load_vector(body + at, policy);
    }
#pragma unroll
    for (int k = 0; k < kAllUnroll; ++k) {
      const std::uint32_t at = first + static_cast<std::uint32_t>(k) * threads;
      if (at < vectors) {
#pragma unroll
        for (int j = 0; j < V; ++j)
          acc[k] = step(acc[k], convert_to_acc(x[k].v[j]));
      }
    }
  }
  const std::uint32_t tail_begin = head + vectors * V;
  const std::uint32_t singles = head + (n - tail_begin);
  if (thread < singles) {
    const std::uint32_t i = thread < head ? thread : tail_begin + (thread - head);
    acc[0] = step(acc[0], convert_to_acc(in[i]));
  }
#pragma unroll
  for (int k = 1; k < kAllUnroll; ++k)
    acc[0] = step(acc[0], acc[k]);
  return acc[0];
}

// One block's partial of n elements (n < 2^31): into partials[blockIdx.x], or, with `out` set
// (a grid of one block and a single piece), the finished result.
template <class T, class Acc>
__global__ void __launch_bounds__(kThreads)
    reduce_all_kernel(const T* in, std::uint32_t n, ReduceOp op, bool evict_first, Acc* partials,
                      T* out, std::int64_t count) {
  const std::uint64_t policy = cuda_apply::l2_policy(evict_first);
  Acc acc;
  switch (op) {
    case ReduceOp::Max:
      acc = reduce_share<ReduceOp::Max, T, Acc>(in, n, policy);
      break;
    case ReduceOp::Min:
      acc = reduce_share<ReduceOp::Min, T, Acc>(in, n, policy);
      break;
    default:  // Sum and Mean add
      acc = reduce_share<ReduceOp::Sum, T, Acc>(in, n, policy);
      break;
  }
  acc = block_reduce(acc, ReduceStep<Acc>{op}, op);
  if (threadIdx.x == 0) {
    if (out != nullptr) {
      *out = reduce_finish<T>(acc, op, count);
    } else {
      partials[blockIdx.x] = acc;
    }
  }
}

// One block: the partials in a fixed order (each thread a strided share, then the block's tree),
// converted into the result.
template <class T, class Acc>
__global__ void __launch_bounds__(kThreads)
    reduce_partials_kernel(const Acc* partials, std::uint32_t count_partials, T* out, ReduceOp op,
                           std::int64_t count) {
  const ReduceStep<Acc> step{op};
  Acc acc = reduce_identity<Acc>(op);
  for (std::uint32_t i = threadIdx.x; i < count_partials; i += kThreads)
    acc = step(acc, partials[i]);
  acc = block_reduce(acc, step, op);
  if (threadIdx.x == 0) *out = reduce_finish<T>(acc, op, count);
}

void check_launch() {
  EMBER_CUDA_CHECK_LAUNCH();
}

// Scratch memory for work queued on `stream`.
Tensor scratch(std::int64_t elements, DType dtype, int device, StreamHandle stream) {
  Tensor t = Tensor::empty({elements}, dtype, Place::cuda(device));
  if (stream != current_stream(device)) t.allocation()->record_stream(stream);
  return t;
}

template <class Acc>
DType acc_dtype() {
  return dtype_of<Acc>();
}

// `in` packed so that `dim` is the last dimension (a transposing copy).
Tensor with_dim_last(const Tensor& in, int dim, StreamHandle stream) {
  Dims order;
  for (int d = 0; d < in.rank(); ++d) {
    if (d != dim) order.push_back(d);
  }
  order.push_back(dim);
  const Tensor view = in.permute(order);
  Tensor packed = Tensor::empty(view.shape(), in.dtype(), in.place());
  if (stream != current_stream(in.place().device())) packed.allocation()->record_stream(stream);
  copy(packed, view, stream);
  return packed;
}

template <class T>
void reduce_dim_typed(ReduceOp op, T* out, const T* in, std::int64_t outer, std::int64_t length,
                      std::int64_t inner, int device, StreamHandle stream) {
  using Acc = ReduceAcc<T>;
  const int sms = multiprocessor_count();
  // Enough threads for every multiprocessor to be full a couple of times over.
  const std::int64_t full = static_cast<std::int64_t>(sms) * 2048;
  if (inner == 1 && length > 16) {
    const std::int64_t rows = outer;
    if (rows * 32 >= 2 * full) {
      const auto kernel = rows_warp_kernel<T, Acc, T, true>;
      kernel<<<grid_for(reinterpret_cast<const void*>(kernel), kThreads, rows * 32), kThreads, 0,
               stream>>>(in, out, rows, length, op, length);
      check_launch();
      return;
    }
    // Few rows: a block per row, or several (each at least 4096 elements) when that is still
    // too few blocks to fill the GPU.
    const std::int64_t wanted_blocks = full / kThreads * 2;
    const std::int64_t parts = std::clamp<std::int64_t>((wanted_blocks + rows - 1) / rows, 1,
                                                        std::max<std::int64_t>(1, length / 4096));
    const std::int64_t chunk = (length + parts - 1) / parts;
    if (parts == 1) {
      const auto kernel = rows_block_kernel<T, Acc, T, true>;
      kernel<<<grid_for(reinterpret_cast<const void*>(kernel), kThreads, rows * kThreads), kThreads,
               0, stream>>>(in, out, rows, length, 1, chunk, op, length);
      check_launch();
      return;
    }
    Tensor partial = scratch(rows * parts, acc_dtype<Acc>(), device, stream);
    Acc* const p = static_cast<Acc*>(partial.data());
    const auto first = rows_block_kernel<T, Acc, Acc, false>;
    first<<<grid_for(reinterpret_cast<const void*>(first), kThreads, rows * parts * kThreads),
            kThreads, 0, stream>>>(in, p, rows, length, parts, chunk, op, length);
    check_launch();
    const auto second = rows_warp_kernel<Acc, Acc, T, true>;
    second<<<grid_for(reinterpret_cast<const void*>(second), kThreads, rows * 32), kThreads, 0,
             stream>>>(p, out, rows, parts, op, length);
    check_launch();
    return;
  }
  // Columns (or very short rows: a thread per row reads its few elements).
  const std::int64_t outputs = outer * inner;
  const std::int64_t parts = std::clamp<std::int64_t>((2 * full + outputs - 1) / outputs, 1,
                                                      std::max<std::int64_t>(1, length / 64));
  const std::int64_t chunk = (length + parts - 1) / parts;
  if (parts == 1) {
    const auto kernel = columns_kernel<T, Acc, T, true>;
    kernel<<<grid_for(reinterpret_cast<const void*>(kernel), kThreads, outputs), kThreads, 0,
             stream>>>(in, out, outer, length, inner, 1, chunk, op, length);
    check_launch();
    return;
  }
  Tensor partial = scratch(outputs * parts, acc_dtype<Acc>(), device, stream);
  Acc* const p = static_cast<Acc*>(partial.data());
  const auto first = columns_kernel<T, Acc, Acc, false>;
  first<<<grid_for(reinterpret_cast<const void*>(first), kThreads, outputs * parts), kThreads, 0,
          stream>>>(in, p, outer, length, inner, parts, chunk, op, length);
  check_launch();
  // The partials are [parts, outputs]: columns again, with one outer row.
  const auto second = columns_kernel<Acc, Acc, T, true>;
  second<<<grid_for(reinterpret_cast<const void*>(second), kThreads, outputs), kThreads, 0,
           stream>>>(p, out, 1, parts, outputs, 1, parts, op, length);
  check_launch();
}

}  // namespace

void reduce_dim_cuda(ReduceOp op, const Tensor& out, const Tensor& in, int dim,
                     StreamHandle stream) {
  const int device = in.place().device();
  DeviceGuard guard(device);
  Tensor src = in;
  int d = dim;
  if (!src.is_contiguous()) {
    src = with_dim_last(in, dim, stream);
    d = src.rank() - 1;
  }
  std::int64_t outer = 1, inner = 1;
  for (int k = 0; k < d; ++k)
    outer *= src.size(k);
  for (int k = d + 1; k < src.rank(); ++k)
    inner *= src.size(k);
  const std::int64_t length = src.size(d);
  if (inner > 1 && inner < 32 && length > 16) {
    // Columns this narrow would not coalesce: transpose them into rows.
    src = with_dim_last(src, d, stream);
    outer *= inner;
    inner = 1;
  }
  // The result in out's row-major order; through a dense temporary when out is strided.
  Tensor target = out.is_contiguous() ? out : Tensor::empty(out.shape(), out.dtype(), out.place());
  if (target.data() != out.data() && stream != current_stream(device)) {
    target.allocation()->record_stream(stream);
  }
  dispatch_numeric(in.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_dim_typed<T>(op, static_cast<T*>(target.data()), static_cast<const T*>(src.data()),
                        outer, length, inner, device, stream);
  });
  if (target.data() != out.data()) copy(out, target, stream);
}

void reduce_all_cuda(ReduceOp op, const Tensor& out, const Tensor& in, StreamHandle stream) {
  const int device = in.place().device();
  DeviceGuard guard(device);
  // Any dense layout is reduced straight from memory, from its lowest address (the first
  // element, since strides are positive).
  Tensor src = in;
  if (!covers_extent_once(in.shape(), in.strides())) {
    src = Tensor::empty(in.shape(), in.dtype(), in.place());
    if (stream != current_stream(device)) src.allocation()->record_stream(stream);
    copy(src, in, stream);
  }
  const std::int64_t n = in.numel();
  dispatch_numeric(in.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = ReduceAcc<T>;
    constexpr int V = 16 / static_cast<int>(sizeof(T));
    const T* data = static_cast<const T*>(src.data());
    T* const result = static_cast<T*>(out.data());
    // Pieces that fit 32-bit indexing (each finds its own first 16-byte boundary).
    constexpr std::int64_t kPiece = std::int64_t{1} << 30;
    const std::int64_t pieces = (n + kPiece - 1) / kPiece;
    const auto kernel = reduce_all_kernel<T, Acc>;
    const auto grid_of = [&](std::int64_t elements) {
      const std::int64_t steps = (elements / V + kAllUnroll - 1) / kAllUnroll;
      const unsigned grid = grid_for(reinterpret_cast<const void*>(kernel), kThreads,
                                     std::max<std::int64_t>(steps, 2 * V));
      EMBER_CHECK(grid_steps_fit_32bit(std::uint64_t{grid} * kThreads,
                                       static_cast<std::uint64_t>(elements / V), kAllUnroll),
                  "reduce_all: a grid of ", grid, " blocks over ", elements,
                  " elements overflows 32-bit indexing");
      return grid;
    };
    const bool evict_first = streaming_evict_first(static_cast<std::uint64_t>(n) * sizeof(T));
    if (pieces == 1 && grid_of(n) == 1) {
      kernel<<<1, kThreads, 0, stream>>>(data, static_cast<std::uint32_t>(n), op, evict_first,
                                         nullptr, result, n);
      check_launch();
      return;
    }
    const std::int64_t max_partials = pieces * grid_of(std::min(n, kPiece));
    Tensor partials = scratch(max_partials, acc_dtype<Acc>(), device, stream);
    Acc* const p = static_cast<Acc*>(partials.data());
    std::int64_t written = 0;
    for (std::int64_t begin = 0; begin < n; begin += kPiece) {
      const std::int64_t elements = std::min(kPiece, n - begin);
      const unsigned grid = grid_of(elements);
      kernel<<<grid, kThreads, 0, stream>>>(data + begin, static_cast<std::uint32_t>(elements), op,
                                            evict_first, p + written, nullptr, n);
      check_launch();
      written += grid;
    }
    const auto finish = reduce_partials_kernel<T, Acc>;
    finish<<<1, kThreads, 0, stream>>>(p, static_cast<std::uint32_t>(written), result, op, n);
    check_launch();
  });
}

}  // namespace ember::ops::detail
