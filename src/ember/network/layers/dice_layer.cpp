#include "ember/network/layers/dice_layer.hpp"

#include <cmath>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

DiceLayer::DiceLayer(const LayerSpec& spec, BuildContext& ctx, double alpha, double epsilon)
    : Layer(spec, ctx), alpha_(alpha), eps_(epsilon) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, true);
  const Shape& s = bottom(0).shape();
  if (s.size() < 2 || s[0] == 0) {
    fail("bottom ", bottom(0).describe(), " must be [batch, features...] with a batch");
  }
  if (!(eps_ >= 0)) fail("prelu_dice_param.epsilon must not be negative, got ", eps_);
  rows_ = s[0];
  cols_ = s.numel() / rows_;
  add_top(0, s, bottom(0).dtype());
  const DType stats = parameter_dtype();
  mean_slot_ = add_workspace({cols_}, stats);
  var_slot_ = add_workspace({cols_}, stats);
  if (on_cuda()) {
    workspace_slot_ = add_workspace({cuda::dice_workspace(rows_, cols_)}, DType::F32);
  }
}

void DiceLayer::bind() {
  Layer::bind();
  mean_ = mean_slot_.tensor();
  var_ = var_slot_.tensor();
  if (workspace_slot_) workspace_ = workspace_slot_.tensor();
}

namespace {

template <class T>
void cpu_forward(std::int64_t rows, std::int64_t cols, const T* x, double alpha, double eps, T* y,
                 T* mean_out, T* var_out) {
  for (std::int64_t c = 0; c < cols; ++c) {
    double s = 0, s2 = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double v = x[r * cols + c];
      s += v;
      s2 += v * v;
    }
    const double mean = s / static_cast<double>(rows);
    const double var = s2 / static_cast<double>(rows) - mean * mean;
    mean_out[c] = static_cast<T>(mean);
    var_out[c] = static_cast<T>(var);
    const double sd = std::sqrt(var + eps);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double v = x[r * cols + c];
      const double p = 1.0 / (1.0 + std::exp(-(v - mean) / sd));
      y[r * cols + c] = static_cast<T>(v * (alpha + (1.0 - alpha) * p));
    }
  }
}

// dx_i = q_i (alpha + (1 - alpha) p_i) + r_i / sd - A / (m sd) - (x_i - E) B / (m sd^3), with
// r_i = q_i (1 - alpha) x_i p_i (1 - p_i), A = sum r, B = sum r (x - E): the chain rule through
// z_i = (x_i - E) / sd, E = mean(x) and V = mean(x^2) - E^2.
template <class T>
void cpu_backward(std::int64_t rows, std::int64_t cols, const T* x, const T* mean_in,
                  const T* var_in, double alpha, double eps, const T* dy, T* dx) {
  const auto m = static_cast<double>(rows);
  for (std::int64_t c = 0; c < cols; ++c) {
    const double mean = mean_in[c];
    const double sd = std::sqrt(static_cast<double>(var_in[c]) + eps);
    double a = 0, b = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double v = x[r * cols + c];
      const double p = 1.0 / (1.0 + std::exp(-(v - mean) / sd));
      const double rr = static_cast<double>(dy[r * cols + c]) * (1.0 - alpha) * v * p * (1.0 - p);
      a += rr;
      b += rr * (v - mean);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const double v = x[r * cols + c];
      const double q = dy[r * cols + c];
      const double p = 1.0 / (1.0 + std::exp(-(v - mean) / sd));
      const double rr = q * (1.0 - alpha) * v * p * (1.0 - p);
      dx[r * cols + c] = static_cast<T>(q * (alpha + (1.0 - alpha) * p) + rr / sd - a / (m * sd) -
                                        (v - mean) * b / (m * sd * sd * sd));
    }
  }
}

}  // namespace

void DiceLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::dice_forward(x.dtype(), rows_, cols_, x.data(), static_cast<float>(alpha_),
                       static_cast<float>(eps_), y.data(), mean_.data<float>(), var_.data<float>(),
                       workspace_.data<float>(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "PReLU_Dice", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_forward<T>(rows_, cols_, x.data<T>(), alpha_, eps_, y.data<T>(), mean_.data<T>(),
                   var_.data<T>());
  });
}

void DiceLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& x = bottom(0).value();
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::dice_backward(x.dtype(), rows_, cols_, x.data(), mean_.data<float>(), var_.data<float>(),
                        static_cast<float>(alpha_), static_cast<float>(eps_), dy.data(), dx.data(),
                        workspace_.data<float>(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "PReLU_Dice", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_backward<T>(rows_, cols_, x.data<T>(), mean_.data<T>(), var_.data<T>(), alpha_, eps_,
                    dy.data<T>(), dx.data<T>());
  });
}

namespace factories {
LayerPtr prelu_dice(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  ConfigReader p = json.object("prelu_dice_param");
  const double alpha = p.number("alpha");
  const double eps = p.number("epsilon");
  p.finish();
  return std::make_unique<DiceLayer>(spec, ctx, alpha, eps);
}
}  // namespace factories

}  // namespace ember::network
