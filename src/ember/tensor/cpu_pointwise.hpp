// The CPU side of a pointwise op: an element function (op_functors.hpp) applied over an output
// and its inputs (already expanded to the output's shape) by cpu_apply's OpenMP loops. Loads are
// converted to OpMath before the call and the result to the output's type after it, exactly as
// the CUDA kernels do.
#pragma once

#include <array>

#include "ember/tensor/convert.hpp"
#include "ember/tensor/cpu_apply.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::ops::detail {

template <class Out, class... In, class F>
void cpu_pointwise(F f, const Tensor& out, const std::array<const Tensor*, sizeof...(In)>& in) {
  constexpr int N = 1 + static_cast<int>(sizeof...(In));
  std::array<Strides, N> strides{};
  strides[0] = out.strides();
  for (std::size_t k = 0; k < sizeof...(In); ++k)
    strides[k + 1] = in[k]->strides();
  const IterationPlan<N> plan = make_iteration_plan<N>(out.shape(), strides);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    cpu_apply(
        plan, [f](Out& o, const In&... x) { o = convert<Out>(f(static_cast<OpMath<In>>(x)...)); },
        static_cast<Out*>(out.data()), static_cast<const In*>(in[K]->data())...);
  }
  (std::index_sequence_for<In...>{});
}

}  // namespace ember::ops::detail
