#include "ember/network/layers/batch_norm_layer.hpp"

#include <cmath>
#include <vector>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

BatchNormLayer::BatchNormLayer(const LayerSpec& spec, BuildContext& ctx, const Config& config)
    : Layer(spec, ctx), config_(config) {
  require_bottoms(1, 1);
  require_tops(1);
  require_rank(0, 2, "[batch, features]");
  require_supported_dtype(0, true);
  if (!(config_.eps > 0)) fail("bn_param.eps must be positive, got ", config_.eps);
  if (!(config_.factor >= 0 && config_.factor <= 1)) {
    fail("bn_param.factor must be in [0, 1], got ", config_.factor);
  }
  rows_ = bottom(0).shape()[0];
  cols_ = bottom(0).shape()[1];
  const auto n = static_cast<double>(cols_);
  gamma_ = add_parameter("gamma", {cols_},
                         InitSpec{config_.gamma_init, n, n, Distribution::constant(1.0)});
  beta_ = add_parameter("beta", {cols_},
                        InitSpec{config_.beta_init, n, n, Distribution::constant(0.0)});
  running_mean_ = add_parameter("running_mean", {cols_},
                                InitSpec{InitKind::Zero, n, n, Distribution::constant(0.0)}, false);
  running_var_ = add_parameter("running_var", {cols_},
                               InitSpec{InitKind::Zero, n, n, Distribution::constant(0.0)}, false);
  add_top(0, bottom(0).shape(), bottom(0).dtype());
  // Statistics in the parameters' dtype (f32; f64 in the CPU's gradient tests).
  const DType stats = parameter_dtype();
  save_mean_slot_ = add_workspace({cols_}, stats);
  save_inv_std_slot_ = add_workspace({cols_}, stats);
  if (on_cuda()) {
    workspace_slot_ = add_workspace({cuda::batch_norm_workspace(rows_, cols_)}, DType::F32);
  }
}

void BatchNormLayer::bind() {
  Layer::bind();
  save_mean_ = save_mean_slot_.tensor();
  save_inv_std_ = save_inv_std_slot_.tensor();
  if (workspace_slot_) workspace_ = workspace_slot_.tensor();
}

namespace {

template <class T>
void cpu_forward_train(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma,
                       const T* beta, double eps, double factor, T* y, T* mean_out, T* inv_out,
                       T* rmean, T* rvar) {
  for (std::int64_t c = 0; c < cols; ++c) {
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      sum += static_cast<double>(x[r * cols + c]);
    const double mean = sum / static_cast<double>(rows);
    double sq = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double d = static_cast<double>(x[r * cols + c]) - mean;
      sq += d * d;
    }
    const double var = sq / static_cast<double>(rows);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double xh = (static_cast<double>(x[r * cols + c]) - mean) * inv;
      y[r * cols + c] =
          static_cast<T>(static_cast<double>(gamma[c]) * xh + static_cast<double>(beta[c]));
    }
    mean_out[c] = static_cast<T>(mean);
    inv_out[c] = static_cast<T>(inv);
    const double unbiased =
        rows > 1 ? var * static_cast<double>(rows) / static_cast<double>(rows - 1) : var;
    rmean[c] = static_cast<T>((1.0 - factor) * static_cast<double>(rmean[c]) + factor * mean);
    rvar[c] = static_cast<T>((1.0 - factor) * static_cast<double>(rvar[c]) + factor * unbiased);
  }
}

template <class T>
void cpu_forward_eval(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma,
                      const T* beta, double eps, const T* rmean, const T* rvar, T* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const double inv = 1.0 / std::sqrt(static_cast<double>(rvar[c]) + eps);
      y[r * cols + c] = static_cast<T>(static_cast<double>(gamma[c]) *
                                           (static_cast<double>(x[r * cols + c]) - rmean[c]) * inv +
                                       static_cast<double>(beta[c]));
    }
  }
}

template <class T>
void cpu_backward(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma, const T* mean,
                  const T* inv, const T* dy, T* dx, T* dgamma, T* dbeta) {
  const auto b = static_cast<double>(rows);
  for (std::int64_t c = 0; c < cols; ++c) {
    double sdy = 0, sdyx = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double xh = (static_cast<double>(x[r * cols + c]) - mean[c]) * inv[c];
      sdy += dy[r * cols + c];
      sdyx += static_cast<double>(dy[r * cols + c]) * xh;
    }
    dgamma[c] = static_cast<T>(sdyx);
    dbeta[c] = static_cast<T>(sdy);
    if (dx == nullptr) continue;
    const double k = static_cast<double>(gamma[c]) * static_cast<double>(inv[c]) / b;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double xh = (static_cast<double>(x[r * cols + c]) - mean[c]) * inv[c];
      dx[r * cols + c] = static_cast<T>(k * (b * dy[r * cols + c] - sdy - xh * sdyx));
    }
  }
}

}  // namespace

void BatchNormLayer::do_forward(bool training, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    if (training) {
      cuda::batch_norm_forward_train(
          x.dtype(), rows_, cols_, x.data(), gamma_->value().data<float>(),
          beta_->value().data<float>(), static_cast<float>(config_.eps),
          static_cast<float>(config_.factor), y.data(), save_mean_.data<float>(),
          save_inv_std_.data<float>(), running_mean_->value().data<float>(),
          running_var_->value().data<float>(), workspace_.data<float>(), stream_or_default(stream));
    } else {
      cuda::batch_norm_forward_eval(
          x.dtype(), rows_, cols_, x.data(), gamma_->value().data<float>(),
          beta_->value().data<float>(), static_cast<float>(config_.eps),
          running_mean_->value().data<float>(), running_var_->value().data<float>(), y.data(),
          stream_or_default(stream));
    }
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "BatchNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (training) {
      cpu_forward_train<T>(rows_, cols_, x.data<T>(), gamma_->value().data<T>(),
                           beta_->value().data<T>(), config_.eps, config_.factor, y.data<T>(),
                           save_mean_.data<T>(), save_inv_std_.data<T>(),
                           running_mean_->value().data<T>(), running_var_->value().data<T>());
    } else {
      cpu_forward_eval<T>(rows_, cols_, x.data<T>(), gamma_->value().data<T>(),
                          beta_->value().data<T>(), config_.eps, running_mean_->value().data<T>(),
                          running_var_->value().data<T>(), y.data<T>());
    }
  });
}

void BatchNormLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  const Tensor& x = bottom(0).value();
  const Tensor& dy = top(0).grad();
  const bool want_dx = bottom(0).requires_grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::batch_norm_backward(x.dtype(), rows_, cols_, x.data(), gamma_->value().data<float>(),
                              save_mean_.data<float>(), save_inv_std_.data<float>(), dy.data(),
                              want_dx ? bottom(0).grad().data() : nullptr,
                              gamma_->grad().data<float>(), beta_->grad().data<float>(),
                              workspace_.data<float>(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "BatchNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_backward<T>(rows_, cols_, x.data<T>(), gamma_->value().data<T>(), save_mean_.data<T>(),
                    save_inv_std_.data<T>(), dy.data<T>(),
                    want_dx ? bottom(0).grad().data<T>() : nullptr, gamma_->grad().data<T>(),
                    beta_->grad().data<T>());
  });
}

namespace factories {
LayerPtr batch_norm(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  ConfigReader p = json.object("bn_param");
  BatchNormLayer::Config c;
  c.factor = p.number("factor");
  c.eps = p.number("eps");
  c.gamma_init = p.choice_or("gamma_init", c.gamma_init, kInitKindNames);
  c.beta_init = p.choice_or("beta_init", c.beta_init, kInitKindNames);
  p.finish();
  return std::make_unique<BatchNormLayer>(spec, ctx, c);
}
}  // namespace factories

}  // namespace ember::network
