// The arithmetic of reductions, shared by the CPU and the CUDA code so that both compute the same
// thing: the accumulator type of each dtype, the combining step, its identity and the final
// conversion. Floating inputs accumulate in double (f32 sums over millions of elements stay
// accurate to f32 rounding, and the GPU's f64 adds are far from the bottleneck of a memory-bound
// reduction); integers in 64 bits, wrapping like the pointwise integer ops.
//
// Free of fmt (included by .cu files).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "ember/core/half.hpp"
#include "ember/tensor/convert.hpp"
#include "ember/tensor/op_functors.hpp"
#include "ember/tensor/reduce.hpp"

namespace ember::ops {

template <class T>
using ReduceAcc =
    std::conditional_t<std::is_floating_point_v<OpMath<T>>, double,
                       std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;

// acc (op) value; Sum and Mean add, Max and Min propagate NaN.
template <class Acc>
struct ReduceStep {
  ReduceOp op;
  EMBER_HOST_DEVICE Acc operator()(Acc a, Acc b) const {
    switch (op) {
      case ReduceOp::Max:
        return fn::max_nan(a, b);
      case ReduceOp::Min:
        return fn::min_nan(a, b);
      default:
        if constexpr (std::is_floating_point_v<Acc>) {
          return a + b;
        } else {
          return fn::wrap_add(a, b);
        }
    }
  }
};

template <class Acc>
EMBER_HOST_DEVICE inline Acc reduce_identity(ReduceOp op) {
  if (op == ReduceOp::Max) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return -std::numeric_limits<Acc>::infinity();
    } else {
      return std::numeric_limits<Acc>::lowest();
    }
  }
  if (op == ReduceOp::Min) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return std::numeric_limits<Acc>::infinity();
    } else {
      return std::numeric_limits<Acc>::max();
    }
  }
  return Acc(0);
}

// An element as an accumulator.
template <class T>
struct ToAcc {
  EMBER_HOST_DEVICE ReduceAcc<T> operator()(T v) const {
    return static_cast<ReduceAcc<T>>(static_cast<OpMath<T>>(v));
  }
};

// The result of `count` elements: the mean divides (integer means truncate toward zero), the
// rest convert (integer sums wrap into T).
template <class T, class Acc>
EMBER_HOST_DEVICE inline T reduce_finish(Acc acc, ReduceOp op, std::int64_t count) {
  if (op == ReduceOp::Mean) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return convert<T>(acc / static_cast<double>(count));
    } else if constexpr (std::is_signed_v<Acc>) {
      return static_cast<T>(acc / count);
    } else {
      return static_cast<T>(acc / static_cast<std::uint64_t>(count));
    }
  }
  if constexpr (std::is_floating_point_v<Acc>) {
    return convert<T>(acc);
  } else {
    return static_cast<T>(acc);
  }
}

}  // namespace ember::ops
