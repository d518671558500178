#include "ember/network/layers/loss_layers.hpp"

#include <cmath>

#include "ember/core/stream.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

namespace {

// Binary cross entropy of logit x against label y, stable for any |x|.
double bce(double x, double y) {
  return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
}
double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

#if EMBER_WITH_CUDA
cuda::LossKind to_cuda(LossLayer::Kind k) {
  switch (k) {
    case LossLayer::Kind::BinaryCrossEntropy:
      return cuda::LossKind::BinaryCrossEntropy;
    case LossLayer::Kind::CrossEntropy:
      return cuda::LossKind::CrossEntropy;
    case LossLayer::Kind::MultiCrossEntropy:
      return cuda::LossKind::MultiCrossEntropy;
  }
  return cuda::LossKind::BinaryCrossEntropy;
}
#endif

}  // namespace

LossLayer::LossLayer(const LayerSpec& spec, BuildContext& ctx, Kind kind,
                     RegularizerConfig regularizer, std::vector<float> target_weight)
    : Layer(spec, ctx),
      kind_(kind),
      regularizer_(regularizer),
      target_weight_(std::move(target_weight)),
      store_(ctx.parameter_store()) {
  require_bottoms(2, 2);
  require_tops(1);
  require_supported_dtype(0, true);
  require_dtype(1, DType::F32);
  require_rank(0, 2, "[batch, logits]");
  const Shape& x = bottom(0).shape();
  const Shape& y = bottom(1).shape();
  rows_ = x[0];
  cols_ = x[1];
  if (rows_ == 0) fail("bottom ", bottom(0).describe(), " has an empty batch");
  if (y.numel() == 0 || y[0] != rows_) {
    // A Reshape whose leading_dim is a slot's width turns [batch, slots, width] into
    // [batch x slots, width]: HugeCTR's criteo_bin sample does so with 26 slots.
    const bool folded = y.numel() > 0 && y[0] > 0 && rows_ % y[0] == 0;
    fail("labels ", bottom(1).describe(), " must have the batch of ", bottom(0).describe(),
         folded ? cat(" (", rows_ / y[0],
                      " rows of it for each label: does a Reshape before it fold slots into the "
                      "batch? Its leading_dim should be slots x width)")
                : std::string());
  }
  switch (kind) {
    case Kind::BinaryCrossEntropy:
      if (cols_ != 1 || y.numel() != rows_) {
        fail("needs logits [batch, 1] and labels [batch, 1], got ", bottom(0).describe(), " and ",
             bottom(1).describe());
      }
      break;
    case Kind::CrossEntropy:
      if (cols_ != 2 || y.numel() != rows_) {
        fail("needs logits [batch, 2] and labels [batch, 1], got ", bottom(0).describe(), " and ",
             bottom(1).describe());
      }
      break;
    case Kind::MultiCrossEntropy:
      if (y != x) {
        fail("needs logits and labels of one shape [batch, labels], got ", bottom(0).describe(),
             " and ", bottom(1).describe());
      }
      if (static_cast<std::int64_t>(target_weight_.size()) != cols_) {
        fail("target_weight has ", target_weight_.size(), " values but the logits have ", cols_,
             " columns (", bottom(0).describe(), ")");
      }
      break;
  }
  if (bottom(1).requires_grad())
    fail("labels ", bottom(1).describe(), " cannot require a gradient");
  if (regularizer_.active() && !(regularizer_.lambda > 0)) {
    fail("the regularizer's lambda must be positive, got ", regularizer_.lambda);
  }
  regularizer_.batch = rows_;
  const DType loss_dtype = bottom(0).dtype() == DType::F64 ? DType::F64 : DType::F32;
  // The top is a value only: nothing differentiates the loss further.
  const bool grads = options_.build_gradients;
  options_.build_gradients = false;
  add_top(0, {1}, loss_dtype);
  options_.build_gradients = grads;
  if (on_cuda()) {
    if (kind == Kind::MultiCrossEntropy) target_slot_ = add_workspace({cols_}, DType::F32);
    workspace_slot_ = add_workspace({cuda::loss_workspace() + 1}, DType::F32);
  }
}

void LossLayer::bind() {
  Layer::bind();
  if (target_slot_) {
    target_ = target_slot_.tensor();
    target_.copy_from(Tensor::from_vector(target_weight_));
  }
  if (workspace_slot_) workspace_ = workspace_slot_.tensor();
}

double LossLayer::read_loss(StreamHandle stream) const {
  if (on_cuda()) synchronize_stream(stream_or_default(stream));
  return loss().dtype() == DType::F64 ? loss().to_vector<double>()[0]
                                      : static_cast<double>(loss().to_vector<float>()[0]);
}

void LossLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const float* labels = bottom(1).value().data<float>();
  const bool reg = regularizer_.active() && store_->weights().numel() > 0;
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    const StreamHandle s = stream_or_default(stream);
    float* ws = workspace_.data<float>();
    float* reg_term = ws + cuda::loss_workspace();
    if (reg) {
      cuda::regularizer_term(regularizer_.type == RegularizerConfig::Type::L1,
                             store_->weights().numel(), store_->weights().data<float>(),
                             static_cast<float>(regularizer_.loss_coefficient()), reg_term, ws, s);
    }
    cuda::loss_forward(to_cuda(kind_), x.dtype(), rows_, cols_, x.data(), labels,
                       target_.defined() ? target_.data<float>() : nullptr,
                       reg ? reg_term : nullptr, top(0).value().data<float>(), ws, s);
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    double sum = 0;
    std::int64_t count = rows_;
    for (std::int64_t r = 0; r < rows_; ++r) {
      switch (kind_) {
        case Kind::BinaryCrossEntropy:
          sum += bce(static_cast<double>(in[r]), labels[r]);
          break;
        case Kind::CrossEntropy: {
          const double a = in[2 * r], b = in[2 * r + 1];
          const double m = std::max(a, b);
          const double lse = m + std::log(std::exp(a - m) + std::exp(b - m));
          sum += lse - (labels[r] >= 0.5f ? b : a);
          break;
        }
        case Kind::MultiCrossEntropy:
          for (std::int64_t c = 0; c < cols_; ++c) {
            const float y = labels[r * cols_ + c];
            if (y < -0.5f) continue;
            sum += target_weight_[static_cast<std::size_t>(c)] *
                   bce(static_cast<double>(in[r * cols_ + c]), y);
          }
          break;
      }
    }
    if (kind_ == Kind::MultiCrossEntropy) count = rows_ * cols_;
    double value = sum / static_cast<double>(count);
    if (reg) {
      const auto w = store_->weights();
      double acc = 0;
      dispatch_cpu(w.dtype(), "regularizer", [&](auto wtag) {
        using W = typename decltype(wtag)::type;
        const W* p = w.template data<W>();
        for (std::int64_t i = 0; i < w.numel(); ++i) {
          const double v = p[i];
          acc += regularizer_.type == RegularizerConfig::Type::L1 ? std::abs(v) : v * v;
        }
      });
      value += regularizer_.loss_coefficient() * acc;
    }
    if (top(0).dtype() == DType::F64) {
      top(0).value().data<double>()[0] = value;
    } else {
      top(0).value().data<float>()[0] = static_cast<float>(value);
    }
  });
}

void LossLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& x = bottom(0).value();
  const Tensor& dx = bottom(0).grad();
  const float* labels = bottom(1).value().data<float>();
  const std::int64_t count = kind_ == Kind::MultiCrossEntropy ? rows_ * cols_ : rows_;
  const double scale = static_cast<double>(options_.loss_scaler) /
                       (static_cast<double>(count) * static_cast<double>(options_.replicas));
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::loss_backward(to_cuda(kind_), x.dtype(), rows_, cols_, x.data(), labels,
                        target_.defined() ? target_.data<float>() : nullptr,
                        static_cast<float>(scale), dx.data(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* g = dx.data<T>();
    for (std::int64_t r = 0; r < rows_; ++r) {
      switch (kind_) {
        case Kind::BinaryCrossEntropy:
          g[r] = static_cast<T>((sigmoid(static_cast<double>(in[r])) - labels[r]) * scale);
          break;
        case Kind::CrossEntropy: {
          const double a = in[2 * r], b = in[2 * r + 1];
          const double p1 = sigmoid(b - a);  // softmax of two logits
          const double y1 = labels[r] >= 0.5f ? 1.0 : 0.0;
          g[2 * r] = static_cast<T>(((1.0 - p1) - (1.0 - y1)) * scale);
          g[2 * r + 1] = static_cast<T>((p1 - y1) * scale);
          break;
        }
        case Kind::MultiCrossEntropy:
          for (std::int64_t c = 0; c < cols_; ++c) {
            const float y = labels[r * cols_ + c];
            g[r * cols_ + c] =
                y < -0.5f
                    ? T(0)
                    : static_cast<T>(target_weight_[static_cast<std::size_t>(c)] *
                                     (sigmoid(static_cast<double>(in[r * cols_ + c])) - y) * scale);
          }
          break;
      }
    }
  });
}

namespace factories {

namespace {
RegularizerConfig read_regularizer(ConfigReader& json) {
  RegularizerConfig r;
  if (json.has("regularizer")) {
    r.type = json.choice("regularizer", kRegularizerNames);
    r.lambda = json.number("lambda", NumberRange::above(0));
  } else if (json.has("lambda")) {
    json.fail("lambda", "is given without a \"regularizer\" (L1 or L2)");
  }
  return r;
}
}  // namespace

LayerPtr binary_cross_entropy_loss(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<LossLayer>(spec, ctx, LossLayer::Kind::BinaryCrossEntropy,
                                     read_regularizer(json));
}

LayerPtr cross_entropy_loss(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<LossLayer>(spec, ctx, LossLayer::Kind::CrossEntropy,
                                     read_regularizer(json));
}

LayerPtr multi_cross_entropy_loss(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  const RegularizerConfig reg = read_regularizer(json);
  std::vector<float> weights;
  for (double w : json.numbers("target_weight"))
    weights.push_back(static_cast<float>(w));
  return std::make_unique<LossLayer>(spec, ctx, LossLayer::Kind::MultiCrossEntropy, reg,
                                     std::move(weights));
}

}  // namespace factories

}  // namespace ember::network
