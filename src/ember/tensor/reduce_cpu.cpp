// CPU reductions (see reduce_kernels.hpp), through the functors the CUDA code uses.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "ember/tensor/cpu_apply.hpp"
#include "ember/tensor/op_dispatch.hpp"
#include "ember/tensor/reduce_functors.hpp"
#include "ember/tensor/reduce_kernels.hpp"

namespace ember::ops::detail {

namespace {

// Work below which a reduction stays on one thread.
constexpr std::int64_t kGrain = 1 << 16;

template <class T>
void reduce_dim_typed(ReduceOp op, const Tensor& out, const Tensor& in, int dim) {
  using Acc = ReduceAcc<T>;
  const ReduceStep<Acc> step{op};
  const ToAcc<T> to_acc;
  const std::int64_t length = in.size(dim), in_step = in.stride(dim);
  // The outputs, and the input's first element of each, walked together by one plan.
  const Tensor in_first = in.select(dim, 0);
  const IterationPlan<2> plan =
      make_iteration_plan<2>(out.shape(), {out.strides(), in_first.strides()});
  const int inner_dim = std::max(plan.rank - 1, 0);
  const std::int64_t inner = plan.rank == 0 ? 1 : plan.sizes[inner_dim];
  const std::int64_t out_inner = plan.rank == 0 ? 0 : plan.strides[0][inner_dim];
  const std::int64_t in_inner = plan.rank == 0 ? 0 : plan.strides[1][inner_dim];
  const std::int64_t rows = plan.numel / inner;
  T* const out_data = static_cast<T*>(out.data());
  const T* const in_data = static_cast<const T*>(in_first.data());
  // Outputs adjacent in memory of the input (the reduced dimension is an outer one): accumulate
  // whole rows at a time, so that the input is read in order.
  const bool by_rows = in_inner == 1 && in_step != 1 && inner > 1;
  const bool parallel = plan.numel * length >= kGrain && rows > 1;

#pragma omp parallel if (parallel)
  {
    std::vector<Acc> acc(by_rows ? static_cast<std::size_t>(inner) : 0);
#pragma omp for schedule(static)
    for (std::int64_t row = 0; row < rows; ++row) {
      // The row's first output and input offsets, from its coordinates in the outer dimensions.
      std::int64_t out_off = 0, in_off = 0, rest = row;
      for (int d = inner_dim - 1; d >= 0; --d) {
        const std::int64_t coordinate = rest % plan.sizes[d];
        rest /= plan.sizes[d];
        out_off += coordinate * plan.strides[0][d];
        in_off += coordinate * plan.strides[1][d];
      }
      if (by_rows) {
        std::fill(acc.begin(), acc.end(), reduce_identity<Acc>(op));
        for (std::int64_t r = 0; r < length; ++r) {
          const T* src = in_data + in_off + r * in_step;
          for (std::int64_t j = 0; j < inner; ++j) {
            acc[static_cast<std::size_t>(j)] =
                step(acc[static_cast<std::size_t>(j)], to_acc(src[j]));
          }
        }
        for (std::int64_t j = 0; j < inner; ++j) {
          out_data[out_off + j * out_inner] =
              reduce_finish<T>(acc[static_cast<std::size_t>(j)], op, length);
        }
      } else {
        for (std::int64_t j = 0; j < inner; ++j) {
          const T* src = in_data + in_off + j * in_inner;
          Acc a = reduce_identity<Acc>(op);
          for (std::int64_t r = 0; r < length; ++r)
            a = step(a, to_acc(src[r * in_step]));
          out_data[out_off + j * out_inner] = reduce_finish<T>(a, op, length);
        }
      }
    }
  }
}

template <class T>
void reduce_all_typed(ReduceOp op, const Tensor& out, const Tensor& in) {
  using Acc = ReduceAcc<T>;
  const ReduceStep<Acc> step{op};
  const ToAcc<T> to_acc;
  const IterationPlan<1> plan = make_iteration_plan<1>(in.shape(), {in.strides()});
  const std::int64_t n = plan.numel;
  const int threads = n >= kGrain ? omp_get_max_threads() : 1;
  // One partial per thread, combined in thread order.
  std::vector<Acc> partial(static_cast<std::size_t>(threads), reduce_identity<Acc>(op));
  const std::int64_t chunk = (n + threads - 1) / threads;
  const auto base = std::make_tuple(static_cast<const T*>(in.data()));
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin >= end) continue;
    Acc a = reduce_identity<Acc>(op);
    auto accumulate = [&](const T& v) { a = step(a, to_acc(v)); };
    if (plan.contiguous()) {
      const T* p = std::get<0>(base);
      for (std::int64_t i = begin; i < end; ++i)
        accumulate(p[i]);
    } else {
      ember::detail::cpu_apply_range(plan, accumulate, base, begin, end, std::index_sequence<0>{});
    }
    partial[static_cast<std::size_t>(t)] = a;
  }
  Acc total = reduce_identity<Acc>(op);
  for (Acc a : partial)
    total = step(total, a);
  *static_cast<T*>(out.data()) = reduce_finish<T>(total, op, n);
}

}  // namespace

void reduce_dim_cpu(ReduceOp op, const Tensor& out, const Tensor& in, int dim) {
  dispatch_numeric(in.dtype(), op_name(op), [&](auto tag) {
    reduce_dim_typed<typename decltype(tag)::type>(op, out, in, dim);
  });
}

void reduce_all_cpu(ReduceOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(in.dtype(), op_name(op),
                   [&](auto tag) { reduce_all_typed<typename decltype(tag)::type>(op, out, in); });
}

}  // namespace ember::ops::detail
