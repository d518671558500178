#include "ember/network/layers/fully_connected_layer.hpp"

#include <cmath>

#include "ember/network/cublaslt_matmul.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"
#include "ember/tensor/gemm.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::network {

FullyConnectedLayer::FullyConnectedLayer(const LayerSpec& spec, BuildContext& ctx,
                                         const Config& config)
    : Layer(spec, ctx), config_(config) {
  require_bottoms(1 + config_.extra_bottoms, 1 + config_.extra_bottoms);
  require_tops(1 + config_.extra_tops);
  for (std::size_t i = 1; i < bottoms().size(); ++i) {
    if (bottom(i).shape().numel() != 0) {
      fail("bottom ", bottom(i).describe(),
           " must be a placeholder top of another FusedInnerProduct (position Head or Body)");
    }
  }
  require_supported_dtype(0, true);
  const Shape& in_shape = bottom(0).shape();
  if (in_shape.size() < 2) {
    fail("bottom ", bottom(0).describe(), " must be at least 2-D [batch, features], got shape ",
         in_shape);
  }
  if (config_.num_output <= 0)
    fail("fc_param.num_output must be positive, got ", config_.num_output);
  in_ = in_shape.back();
  if (in_ <= 0) fail("bottom ", bottom(0).describe(), " has no features");
  rows_ = in_shape.numel() / in_;
  const auto in_f = static_cast<double>(in_), out_f = static_cast<double>(config_.num_output);
  // HugeCTR's defaults: XavierNorm weights; biases N(0, sqrt(1 / out)) truncated to 2 sigma.
  weight_ = add_parameter("weight", {in_, config_.num_output},
                          InitSpec{config_.weight_init, in_f, out_f, xavier_norm(in_f, out_f)});
  bias_ = add_parameter("bias", {1, config_.num_output},
                        InitSpec{config_.bias_init, 0.0, out_f,
                                 Distribution::truncated_normal(0.0, std::sqrt(1.0 / out_f), 2.0)});
  Shape out_shape = in_shape;
  out_shape[out_shape.size() - 1] = config_.num_output;
  add_top(0, out_shape, bottom(0).dtype());
  for (std::size_t i = 1; i <= config_.extra_tops; ++i)
    add_placeholder_top(i);
  in_ld_ = in_;
  fusion_ = options_.algorithm_search ? FcFusion::Auto : FcFusion::Epilogues;
  // One output and no activation: row dot products and Ember's kernels instead of cuBLASLt's
  // one-column products (single_output_forward in launchers.hpp), on rows of any length.
  single_output_ = on_cuda() && config_.num_output == 1 && !config_.relu;
  if (on_cuda()) {
    const DType t = bottom(0).dtype();
    // cuBLASLt's fast kernels want 16-byte aligned rows (TMA strides on Hopper); 13 bf16
    // features are 26 bytes. Pad to a multiple of 8 elements (16 bytes in 16-bit, 32 in f32).
    if (!single_output_ && (in_ * static_cast<std::int64_t>(dtype_size(t))) % 16 != 0) {
      in_ld_ = (in_ + 7) / 8 * 8;
      x_pad_slot_ = add_workspace({rows_, in_ld_}, t);
      w_pad_slot_ = add_workspace({in_ld_, config_.num_output}, t);
      if (bottom(0).requires_grad()) dx_pad_slot_ = add_workspace({rows_, in_ld_}, t);
    }
    if (config_.relu && top(0).requires_grad()) {
      mask_slot_ = add_workspace({rows_, cuda::relu_mask_ld(config_.num_output) / 8}, DType::U8);
    }
    if (top(0).requires_grad()) {
      // The single-output backward sums a column per input feature and one for the bias.
      const std::int64_t cols = single_output_ ? in_ + 1 : config_.num_output;
      colsum_slot_ = add_workspace({cuda::column_sum_workspace(rows_, cols)}, DType::F32);
    }
  }
}

const char* fusion_name(FcFusion f) {
  switch (f) {
    case FcFusion::Auto:
      return "auto";
    case FcFusion::Epilogues:
      return "epilogues";
    case FcFusion::Plain:
      return "plain";
  }
  return "?";
}

FullyConnectedLayer::~FullyConnectedLayer() = default;

void FullyConnectedLayer::bind() {
  Layer::bind();
  if (mask_slot_) mask_ = mask_slot_.tensor();
  if (x_pad_slot_) x_pad_ = x_pad_slot_.tensor();
  if (w_pad_slot_) w_pad_ = w_pad_slot_.tensor();
  if (dx_pad_slot_) dx_pad_ = dx_pad_slot_.tensor();
  if (pads_input() && top(0).requires_grad()) {
    // The weight gradient over the padded width too: with 13 columns a product runs cuBLASLt's
    // unaligned kernels (65536 x 13 by 512 in f16: 0.07 ms, four times its bytes' time). The
    // padding's rows are the zero columns' products; backward_cuda drops them.
    dw_pad_ = Tensor::empty({in_ld_, config_.num_output}, weight_->grad().dtype(), place());
  }
  planned_ = false;
}

void FullyConnectedLayer::leave_relu_gradient_to_consumer() {
  EMBER_CHECK(on_cuda() && config_.relu && !writes_mask_, "layer ", describe(),
              ": only an unchained ReLU layer on CUDA leaves its ReLU gradient to its consumer");
  relu_grad_in_consumer_ = true;
}

bool FullyConnectedLayer::can_produce_mask() const {
  return on_cuda() && config_.relu && mask_.defined() && top(0).requires_grad();
}

// ---- CPU ------------------------------------------------------------------------------------

namespace {
template <class T>
void add_bias_act(std::int64_t rows, std::int64_t cols, const T* bias, bool relu, T* y) {
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = y + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const T v = row[c] + bias[c];
      row[c] = relu && v < T(0) ? T(0) : v;
    }
  }
}

template <class T>
void relu_grad_inplace(std::int64_t n, const T* y, T* dy) {
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    if (!(y[i] > T(0))) dy[i] = T(0);
  }
}

template <class T>
void column_sums(std::int64_t rows, std::int64_t cols, const T* in, T* out) {
  for (std::int64_t c = 0; c < cols; ++c)
    out[c] = T(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * cols;
    for (std::int64_t c = 0; c < cols; ++c)
      out[c] += row[c];
  }
}
}  // namespace

void FullyConnectedLayer::forward_cpu() {
  const Tensor x = bottom(0).value().reshape({rows_, in_});
  const Tensor y = top(0).value().reshape({rows_, config_.num_output});
  ops::gemm(x, weight_->value(), y);
  dispatch_cpu(x.dtype(), "InnerProduct", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_bias_act<T>(rows_, config_.num_output, bias_->value().data<T>(), config_.relu, y.data<T>());
  });
}

void FullyConnectedLayer::backward_cpu() {
  const std::int64_t n = config_.num_output;
  const Tensor x = bottom(0).value().reshape({rows_, in_});
  const Tensor y = top(0).value().reshape({rows_, n});
  const Tensor dz = top(0).grad().reshape({rows_, n});
  dispatch_cpu(x.dtype(), "InnerProduct", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (config_.relu) relu_grad_inplace<T>(rows_ * n, y.data<T>(), dz.data<T>());
    column_sums<T>(rows_, n, dz.data<T>(), bias_->grad().data<T>());
  });
  ops::gemm(x, dz, weight_->grad(), {.transpose_a = true});
  if (bottom(0).requires_grad()) {
    ops::gemm(dz, weight_->value(), bottom(0).grad().reshape({rows_, in_}), {.transpose_b = true});
  }
}

// ---- CUDA -----------------------------------------------------------------------------------

// Operand pointers of the products (the padded copies where the layer pads).
const void* FullyConnectedLayer::forward_weights() const {
  return pads_input() ? w_pad_.data() : weight_->compute(bottom(0).dtype()).data();
}

const void* FullyConnectedLayer::forward_input() const {
  return pads_input() ? x_pad_.data() : bottom(0).value().data();
}

void* FullyConnectedLayer::wgrad_output() const {
  return dw_pad_.defined() ? dw_pad_.data() : weight_->grad().data();
}

void* FullyConnectedLayer::dgrad_output() const {
  return pads_input() ? dx_pad_.data() : bottom(0).grad().data();
}

void FullyConnectedLayer::forward_cuda(StreamHandle stream) {
#if EMBER_WITH_CUDA
  if (!planned_) plan_cuda(stream);
  const DType t = bottom(0).dtype();
  const std::int64_t n = config_.num_output;
  if (single_output_) {
    cuda::single_output_forward(t, rows_, in_, bottom(0).value().data(), weight_->compute(t).data(),
                                bias_->compute(t).data(), top(0).value().data(), stream);
    return;
  }
  if (pads_input()) {
    // Zero columns after the input's and zero rows after the weights' (the weights change at
    // every optimizer step, so the copy is refreshed here).
    cuda::pad_copy_2d(t, rows_, in_, bottom(0).value().data(), in_, rows_, in_ld_, x_pad_.data(),
                      stream);
    cuda::pad_copy_2d(t, in_, n, weight_->compute(t).data(), n, in_ld_, n, w_pad_.data(), stream);
  }
  const void* b = bias_->compute(t).data();
  void* y = top(0).value().data();
  switch (fwd_form_) {
    case ForwardForm::Epilogue:
      fwd_->run(forward_weights(), forward_input(), y, b, writes_mask_ ? mask_.data() : nullptr,
                1.0f, 0.0f, stream);
      break;
    case ForwardForm::BiasEpilogueThenRelu:
      fwd_->run(forward_weights(), forward_input(), y, b, nullptr, 1.0f, 0.0f, stream);
      cuda::activation_forward(cuda::Activation::Relu, t, rows_ * n, y, y, 0.0f, stream);
      break;
    case ForwardForm::PlainThenKernel:
      fwd_->run(forward_weights(), forward_input(), y, nullptr, nullptr, 1.0f, 0.0f, stream);
      cuda::bias_activation(t, rows_, n, b, config_.relu, y, stream);
      break;
  }
#else
  (void)stream;
#endif
}

void FullyConnectedLayer::backward_cuda(StreamHandle stream) {
#if EMBER_WITH_CUDA
  if (!planned_) plan_cuda(stream);
  const DType t = bottom(0).dtype();
  const std::int64_t n = config_.num_output;
  void* dz = top(0).grad().data();
  if (single_output_) {
    // A chained producer's ReLU gradient comes with its mask (fc_chain.hpp).
    const bool dx = bottom(0).requires_grad();
    cuda::single_output_backward(
        t, rows_, in_, bottom(0).value().data(), dz, weight_->compute(t).data(),
        producer_ != nullptr ? producer_->mask_.data() : nullptr, cuda::relu_mask_ld(in_),
        dx ? bottom(0).grad().data() : nullptr, weight_->grad().data<float>(),
        bias_->grad().data<float>(), colsum_slot_.tensor().data<float>(), stream);
    return;
  }
  // dZ = dY * (y > 0), in place: this layer is the only reader of its top's gradient.
  float* db = bias_->grad().data<float>();
  float* colsum_workspace = colsum_slot_.tensor().data<float>();
  if (wgrad_form_ == WgradForm::ReluColumnSumThenPlain) {
    cuda::relu_backward_column_sum(t, rows_, n, top(0).value().data(), dz, dz, db, colsum_workspace,
                                   stream);
  } else if (runs_relu_gradient()) {
    cuda::activation_backward(cuda::Activation::Relu, t, rows_ * n, nullptr, top(0).value().data(),
                              dz, dz, 0.0f, stream);
  }
  const bool epilogue_db = wgrad_form_ == WgradForm::Epilogue;
  wgrad_->run(dz, forward_input(), wgrad_output(), epilogue_db ? db : nullptr, nullptr, 1.0f, 0.0f,
              stream);
  if (dw_pad_.defined()) ops::copy(weight_->grad(), dw_pad_.slice(0, 0, in_), stream);
  if (wgrad_form_ == WgradForm::PlainThenColumnSum) {
    cuda::column_sum(t, rows_, n, dz, db, colsum_workspace, stream);
  }
  if (dgrad_) {
    dgrad_->run(weight_->compute(t).data(), dz, dgrad_output(), nullptr,
                producer_ != nullptr ? producer_->mask_.data() : nullptr, 1.0f, 0.0f, stream);
    if (pads_input()) {
      cuda::pad_copy_2d(t, rows_, in_ld_, dx_pad_.data(), in_ld_, rows_, in_,
                        bottom(0).grad().data(), stream);
    }
  }
#else
  (void)stream;
#endif
}

void FullyConnectedLayer::do_forward(bool, StreamHandle stream) {
  if (on_cuda()) {
    forward_cuda(stream_or_default(stream));
  } else {
    forward_cpu();
  }
}

void FullyConnectedLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  if (on_cuda()) {
    backward_cuda(stream_or_default(stream));
  } else {
    backward_cpu();
  }
}

// ---- configuration ----------------------------------------------------------------------------

namespace {
FullyConnectedLayer::Config read_fc_param(ConfigReader& json) {
  FullyConnectedLayer::Config c;
  ConfigReader p = json.object("fc_param");
  c.num_output = p.integer("num_output", IntRange::at_least(1));
  c.weight_init = p.choice_or("weight_init", c.weight_init, kInitKindNames);
  c.bias_init = p.choice_or("bias_init", c.bias_init, kInitKindNames);
  p.finish();
  return c;
}
}  // namespace

namespace factories {

LayerPtr inner_product(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  FullyConnectedLayer::Config c = read_fc_param(json);
  c.relu = false;
  return std::make_unique<FullyConnectedLayer>(spec, ctx, c);
}

LayerPtr fused_inner_product(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  FullyConnectedLayer::Config c = read_fc_param(json);
  static constexpr Named<bool> kActivations[] = {{"Relu", true}, {"None", false}};
  c.relu = json.choice_or("activation", true, kActivations);
  // HugeCTR's "position" wires its hand-fused MLPs through three extra tensors (mask, dReLU,
  // bias gradient): Head 1 -> 4, Body 4 -> 4, Tail 4 -> 1, Isolated 1 -> 1. Ember fuses chains by
  // itself (fc_chain.hpp): the extra bottoms are accepted and ignored, the extra tops are empty
  // placeholders that only another FusedInnerProduct may consume.
  struct Extras {
    int bottoms, tops;
  };
  static constexpr Named<Extras> kPositions[] = {
      {"Head", {0, 3}}, {"Body", {3, 3}}, {"Tail", {3, 0}}, {"Isolated", {0, 0}}, {"None", {0, 0}}};
  const Extras extras = json.choice_or("position", Extras{0, 0}, kPositions);
  c.extra_bottoms = extras.bottoms;
  c.extra_tops = extras.tops;
  return std::make_unique<FullyConnectedLayer>(spec, ctx, c);
}

}  // namespace factories

}  // namespace ember::network
