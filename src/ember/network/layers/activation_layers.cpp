#include "ember/network/layers/activation_layers.hpp"

#include <cmath>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

namespace {

template <class T>
void cpu_forward(ActivationLayer::Kind kind, std::int64_t n, const T* x, T* y, T alpha) {
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    switch (kind) {
      case ActivationLayer::Kind::Relu:
        y[i] = v > T(0) ? v : T(0);
        break;
      case ActivationLayer::Kind::Sigmoid:
        y[i] = T(1) / (T(1) + std::exp(-v));
        break;
      case ActivationLayer::Kind::Elu:
        y[i] = v > T(0) ? v : alpha * std::expm1(v);  // exp(v) - 1 loses digits near 0
        break;
    }
  }
}

template <class T>
void cpu_backward(ActivationLayer::Kind kind, std::int64_t n, const T* x, const T* y, const T* dy,
                  T* dx, T alpha) {
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case ActivationLayer::Kind::Relu:
        dx[i] = y[i] > T(0) ? dy[i] : T(0);
        break;
      case ActivationLayer::Kind::Sigmoid:
        dx[i] = dy[i] * y[i] * (T(1) - y[i]);
        break;
      case ActivationLayer::Kind::Elu:
        dx[i] = x[i] > T(0) ? dy[i] : dy[i] * alpha * std::exp(x[i]);
        break;
    }
  }
}

#if EMBER_WITH_CUDA
cuda::Activation to_cuda(ActivationLayer::Kind kind) {
  switch (kind) {
    case ActivationLayer::Kind::Relu:
      return cuda::Activation::Relu;
    case ActivationLayer::Kind::Sigmoid:
      return cuda::Activation::Sigmoid;
    case ActivationLayer::Kind::Elu:
      return cuda::Activation::Elu;
  }
  return cuda::Activation::Relu;
}
#endif

}  // namespace

ActivationLayer::ActivationLayer(const LayerSpec& spec, BuildContext& ctx, Kind kind, double alpha)
    : Layer(spec, ctx), kind_(kind), alpha_(alpha) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, /*half_ok=*/true);
  add_top(0, bottom(0).shape(), bottom(0).dtype());
}

void ActivationLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::activation_forward(to_cuda(kind_), x.dtype(), x.numel(), x.data(), y.data(),
                             static_cast<float>(alpha_), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "activation", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_forward<T>(kind_, x.numel(), x.data<T>(), y.data<T>(), static_cast<T>(alpha_));
  });
}

void ActivationLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::activation_backward(to_cuda(kind_), x.dtype(), x.numel(), x.data(), y.data(), dy.data(),
                              dx.data(), static_cast<float>(alpha_), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "activation", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_backward<T>(kind_, x.numel(), x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(),
                    static_cast<T>(alpha_));
  });
}

namespace factories {

LayerPtr relu(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<ActivationLayer>(spec, ctx, ActivationLayer::Kind::Relu);
}

LayerPtr sigmoid(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<ActivationLayer>(spec, ctx, ActivationLayer::Kind::Sigmoid);
}

LayerPtr elu(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  ConfigReader param = json.object("elu_param");
  const double alpha = param.number("alpha");
  param.finish();
  return std::make_unique<ActivationLayer>(spec, ctx, ActivationLayer::Kind::Elu, alpha);
}

}  // namespace factories

}  // namespace ember::network
