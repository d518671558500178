#include <cstring>

#include "ember/tensor/convert.hpp"
#include "ember/tensor/cpu_apply.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

namespace {
template <int N>
IterationPlan<N> plan_for(const Tensor& out, std::array<const Tensor*, N> operands) {
  std::array<Strides, N> strides;
  for (int k = 0; k < N; ++k) strides[k] = operands[k]->strides();
  return make_iteration_plan<N>(out.shape(), strides);
}
}  // namespace

void fill_cpu(const Tensor& out, double value) {
  const auto plan = plan_for<1>(out, {&out});
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = convert<T>(value);
    cpu_apply(plan, [v](T& o) { o = v; }, static_cast<T*>(out.data()));
  });
}

void copy_cpu(const Tensor& out, const Tensor& in) {
  const auto plan = plan_for<2>(out, {&out, &in});
  if (out.dtype() == in.dtype() && plan.contiguous()) {
    std::memmove(out.data(), in.data(), out.nbytes());
    return;
  }
  dispatch_dtype(out.dtype(), [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    dispatch_dtype(in.dtype(), [&](auto in_tag) {
      using I = typename decltype(in_tag)::type;
      cpu_apply(plan, [](O& o, const I& i) { o = convert<O>(i); }, static_cast<O*>(out.data()),
                static_cast<const I*>(in.data()));
    });
  });
}

}  // namespace ember::ops::detail
