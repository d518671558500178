#include "ember/network/layers/dropout_layer.hpp"

#include "ember/network/kernels/dropout_mask.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::network {

namespace {
template <class T>
void cpu_dropout(std::int64_t n, const T* x, T* y, float rate, std::uint64_t stream) {
  const T scale = T(1) / (T(1) - static_cast<T>(rate));
  const DropoutMask mask = DropoutMask::of(stream, rate);
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    y[i] = mask.keeps(static_cast<std::uint64_t>(i)) ? x[i] * scale : T(0);
  }
}
}  // namespace

DropoutLayer::DropoutLayer(const LayerSpec& spec, BuildContext& ctx, float rate)
    : Layer(spec, ctx), rate_(rate), seed_(ctx.next_layer_seed()) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, true);
  if (!(rate > 0.0f && rate < 1.0f)) fail("rate must be in (0, 1), got ", rate);
  add_top(0, bottom(0).shape(), bottom(0).dtype());
}

void DropoutLayer::do_forward(bool training, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (!training) {
    ops::copy(y, x, stream_or_default(stream));
    return;
  }
  last_step_ = steps_++;
  const std::uint64_t s = dropout_stream(seed_, last_step_);
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::dropout(x.dtype(), x.numel(), x.data(), y.data(), rate_, seed_, last_step_,
                  stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "Dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_dropout<T>(x.numel(), x.data<T>(), y.data<T>(), rate_, s);
  });
}

void DropoutLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  // Same mask and scale as the forward of this step: dx = keep ? dy / (1 - rate) : 0.
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::dropout(dy.dtype(), dy.numel(), dy.data(), dx.data(), rate_, seed_, last_step_,
                  stream_or_default(stream), relu_gradient_ ? bottom(0).value().data() : nullptr);
#endif
    return;
  }
  dispatch_cpu(dy.dtype(), "Dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_dropout<T>(dy.numel(), dy.data<T>(), dx.data<T>(), rate_,
                   dropout_stream(seed_, last_step_));
  });
}

namespace factories {
LayerPtr dropout(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  const double rate = json.number_or("rate", 0.5);  // HugeCTR's default
  return std::make_unique<DropoutLayer>(spec, ctx, static_cast<float>(rate));
}
}  // namespace factories

}  // namespace ember::network
