#include "ember/network/layers/fully_connected_layer.hpp"

#include <cmath>

#include "ember/network/cublaslt_matmul.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"
#include "ember/tensor/gemm.hpp"

namespace ember::nn {

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
  if (config_.num_output <= 0) fail("fc_param.num_output must be positive, got ", config_.num_output);
  in_ = in_shape.back();
  if (in_ <= 0) fail("bottom ", bottom(0).describe(), " has no features");
  rows_ = in_shape.numel() / in_;
  const auto in_f = static_cast<double>(in_), out_f = static_cast<double>(config_.num_output);
  // HugeCTR's defaults: XavierNorm weights; biases N(0, sqrt(1 / out)) truncated to 2 sigma.
  weight_ = add_parameter("weight", {in_, config_.num_output},
                          InitSpec{config_.weight_init, in_f, out_f, xavier_norm(in_f, out_f)});
  bias_ = add_parameter(
      "bias", {1, config_.num_output},
      InitSpec{config_.bias_init, 0.0, out_f,
               Distribution::truncated_normal(0.0, std::sqrt(1.0 / out_f), 2.0)});
  Shape out_shape = in_shape;
  out_shape[out_shape.size() - 1] = config_.num_output;
  add_top(0, out_shape, bottom(0).dtype());
  for (std::size_t i = 1; i <= config_.extra_tops; ++i) add_placeholder_top(i);
  if (on_cuda()) {
    if (config_.relu && top(0).requires_grad()) {
      mask_slot_ = add_workspace({rows_, cuda::relu_mask_ld(config_.num_output) / 8}, DType::U8);
    }
    if (top(0).requires_grad()) {
      colsum_slot_ =
          add_workspace({cuda::column_sum_workspace(rows_, config_.num_output)}, DType::F32);
    }
  }
}

FullyConnectedLayer::~FullyConnectedLayer() = default;

void FullyConnectedLayer::bind() {
  Layer::bind();
  if (mask_slot_) mask_ = mask_slot_.tensor();
  planned_ = false;
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
  for (std::int64_t c = 0; c < cols; ++c) out[c] = T(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) out[c] += row[c];
  }
}
}  // namespace

void FullyConnectedLayer::forward_cpu() {
  const Tensor x = bottom(0).value().reshape({rows_, in_});
  const Tensor y = top(0).value().reshape({rows_, config_.num_output});
  ops::gemm(x, weight_->value(), y);
  dispatch_cpu(x.dtype(), "InnerProduct", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_bias_act<T>(rows_, config_.num_output, bias_->value().data<T>(), config_.relu,
                    y.data<T>());
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
    ops::gemm(dz, weight_->value(), bottom(0).grad().reshape({rows_, in_}),
              {.transpose_b = true});
  }
}

// ---- CUDA -----------------------------------------------------------------------------------

void FullyConnectedLayer::plan_cuda() {
  const int device = place().device();
  const DType t = bottom(0).dtype();
  const std::int64_t n = config_.num_output;
  const void* w = weight_->compute(t).data();
  const void* b = bias_->compute(t).data();
  const void* x = bottom(0).value().data();
  const void* y = top(0).value().data();

  cuda::MatmulProblem f;
  f.m = n;
  f.n = rows_;
  f.k = in_;
  f.lda = n;
  f.ldb = in_;
  f.ldd = n;
  f.ab_dtype = t;
  f.d_dtype = t;
  f.allow_tf32 = options_.allow_tf32;
  f.epilogue = writes_mask_ ? cuda::Epilogue::ReluAuxBias
                            : (config_.relu ? cuda::Epilogue::ReluBias : cuda::Epilogue::Bias);
  f.aux_ld = cuda::relu_mask_ld(n);
  fwd_epilogue_ = false;
  if (epilogues_) {
    fwd_ = cuda::LtMatmul::plan(f, device, w, x, y, b, writes_mask_ ? mask_.data() : nullptr);
    fwd_epilogue_ = fwd_->supported();
  }
  if (!fwd_epilogue_) {
    EMBER_CHECK(!writes_mask_, "layer ", describe(), ": chained without a mask epilogue");
    f.epilogue = cuda::Epilogue::None;
    fwd_ = cuda::LtMatmul::plan(f, device, w, x, y, nullptr, nullptr);
    EMBER_CHECK(fwd_->supported(), "layer ", describe(), ": cuBLASLt has no algorithm for a ",
                dtype_name(t), " product ", rows_, "x", in_, " by ", in_, "x", n);
  }

  if (!top(0).requires_grad()) {
    wgrad_.reset();
    dgrad_.reset();
    planned_ = true;
    return;
  }
  const void* dz = top(0).grad().data();
  void* dw = weight_->grad().data();
  void* db = bias_->grad().data();
  cuda::MatmulProblem g;
  g.transpose_b = true;
  g.m = n;
  g.n = in_;
  g.k = rows_;
  g.lda = n;
  g.ldb = in_;
  g.ldd = n;
  g.ab_dtype = t;
  g.d_dtype = weight_->grad().dtype();
  g.allow_tf32 = options_.allow_tf32;
  g.epilogue = cuda::Epilogue::BiasGradA;
  wgrad_epilogue_ = false;
  if (epilogues_) {
    wgrad_ = cuda::LtMatmul::plan(g, device, dz, x, dw, db, nullptr);
    wgrad_epilogue_ = wgrad_->supported();
  }
  if (!wgrad_epilogue_) {
    g.epilogue = cuda::Epilogue::None;
    wgrad_ = cuda::LtMatmul::plan(g, device, dz, x, dw, nullptr, nullptr);
    EMBER_CHECK(wgrad_->supported(), "layer ", describe(),
                ": cuBLASLt has no algorithm for the weight-gradient product");
  }

  dgrad_.reset();
  if (bottom(0).requires_grad()) {
    cuda::MatmulProblem d;
    d.transpose_a = true;
    d.m = in_;
    d.n = rows_;
    d.k = n;
    d.lda = n;
    d.ldb = n;
    d.ldd = in_;
    d.ab_dtype = t;
    d.d_dtype = t;
    d.allow_tf32 = options_.allow_tf32;
    d.epilogue = producer_ != nullptr ? cuda::Epilogue::Drelu : cuda::Epilogue::None;
    d.aux_ld = cuda::relu_mask_ld(in_);
    const void* dx = bottom(0).grad().data();
    dgrad_ = cuda::LtMatmul::plan(d, device, w, dz, dx, nullptr,
                                  producer_ != nullptr ? producer_->mask_.data() : nullptr);
    EMBER_CHECK(dgrad_->supported(), "layer ", describe(), ": cuBLASLt has no algorithm for the ",
                producer_ != nullptr ? "chained " : "", "input-gradient product");
  }
  planned_ = true;
}

void FullyConnectedLayer::set_epilogues(bool enabled) {
  EMBER_CHECK(enabled || (!writes_mask_ && producer_ == nullptr), "layer ", describe(),
              ": a chained layer needs its epilogues");
  epilogues_ = enabled;
  planned_ = false;
}

bool FullyConnectedLayer::chain_from(FullyConnectedLayer& producer) {
  if (!on_cuda() || !producer.can_produce_mask() || !bottom(0).requires_grad()) return false;
  if (!epilogues_ || !producer.epilogues_) return false;
  if (bottoms()[0] != producer.tops()[0] || bottom(0).dtype() != producer.top(0).dtype()) {
    return false;
  }
  const int device = place().device();
  const DType t = bottom(0).dtype();
  // Both chained products must exist before anything changes.
  cuda::MatmulProblem f;
  f.m = producer.config_.num_output;
  f.n = producer.rows_;
  f.k = producer.in_;
  f.lda = f.m;
  f.ldb = f.k;
  f.ldd = f.m;
  f.ab_dtype = t;
  f.d_dtype = t;
  f.allow_tf32 = options_.allow_tf32;
  f.epilogue = cuda::Epilogue::ReluAuxBias;
  f.aux_ld = cuda::relu_mask_ld(f.m);
  auto fwd = cuda::LtMatmul::plan(f, device, producer.weight_->compute(t).data(),
                                  producer.bottom(0).value().data(), producer.top(0).value().data(),
                                  producer.bias_->compute(t).data(), producer.mask_.data());
  cuda::MatmulProblem d;
  d.transpose_a = true;
  d.m = in_;
  d.n = rows_;
  d.k = config_.num_output;
  d.lda = d.k;
  d.ldb = d.k;
  d.ldd = in_;
  d.ab_dtype = t;
  d.d_dtype = t;
  d.allow_tf32 = options_.allow_tf32;
  d.epilogue = cuda::Epilogue::Drelu;
  d.aux_ld = cuda::relu_mask_ld(in_);
  auto dgrad = cuda::LtMatmul::plan(d, device, weight_->compute(t).data(),
                                    top(0).requires_grad() ? top(0).grad().data() : nullptr,
                                    bottom(0).grad().data(), nullptr, producer.mask_.data());
  if (!fwd->supported() || !dgrad->supported() || !top(0).requires_grad()) return false;
  producer.writes_mask_ = true;
  producer.planned_ = false;
  producer_ = &producer;
  planned_ = false;
  return true;
}

std::string FullyConnectedLayer::plan_summary() const {
  if (!planned_ || !fwd_) return {};
  std::string s = cat("forward ", cuda::epilogue_name(fwd_->problem().epilogue));
  if (!fwd_epilogue_) s += " + bias/activation kernel";
  if (wgrad_) {
    s += cat(", weight grad ", cuda::epilogue_name(wgrad_->problem().epilogue));
    if (!wgrad_epilogue_) s += " + column-sum kernel";
  }
  if (config_.relu && !writes_mask_ && wgrad_) s += ", ReLU-gradient pass";
  if (dgrad_) s += cat(", input grad ", cuda::epilogue_name(dgrad_->problem().epilogue));
  return s;
}

void FullyConnectedLayer::forward_cuda(StreamHandle stream) {
#if EMBER_WITH_CUDA
  if (!planned_) plan_cuda();
  const DType t = bottom(0).dtype();
  const void* w = weight_->compute(t).data();
  const void* b = bias_->compute(t).data();
  void* y = top(0).value().data();
  fwd_->run(w, bottom(0).value().data(), y, fwd_epilogue_ ? b : nullptr,
            writes_mask_ ? mask_.data() : nullptr, 1.0f, 0.0f, stream);
  if (!fwd_epilogue_) {
    cuda::bias_activation(t, rows_, config_.num_output, b, config_.relu, y, stream);
  }
#else
  (void)stream;
#endif
}

void FullyConnectedLayer::backward_cuda(StreamHandle stream) {
#if EMBER_WITH_CUDA
  if (!planned_) plan_cuda();
  const DType t = bottom(0).dtype();
  const std::int64_t n = config_.num_output;
  void* dz = top(0).grad().data();
  if (config_.relu && !writes_mask_) {
    // dZ = dY * (y > 0), in place: this layer is the only reader of its top's gradient.
    cuda::activation_backward(cuda::Activation::Relu, t, rows_ * n, nullptr,
                              top(0).value().data(), dz, dz, 0.0f, stream);
  }
  float* db = bias_->grad().data<float>();
  wgrad_->run(dz, bottom(0).value().data(), weight_->grad().data(), wgrad_epilogue_ ? db : nullptr,
              nullptr, 1.0f, 0.0f, stream);
  if (!wgrad_epilogue_) {
    cuda::column_sum(t, rows_, n, dz, db, colsum_slot_.tensor().data<float>(), stream);
  }
  if (dgrad_) {
    dgrad_->run(weight_->compute(t).data(), dz, bottom(0).grad().data(), nullptr,
                producer_ != nullptr ? producer_->mask_.data() : nullptr, 1.0f, 0.0f, stream);
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
FullyConnectedLayer::Config read_fc_param(JsonReader& json) {
  FullyConnectedLayer::Config c;
  JsonReader p = json.object("fc_param");
  c.num_output = p.integer("num_output");
  if (c.num_output <= 0) p.fail("num_output", "must be a positive integer, got ", c.num_output);
  if (p.has("weight_init")) {
    c.weight_init = parse_init_kind(p.string("weight_init"), json.owner() + " fc_param.weight_init");
  }
  if (p.has("bias_init")) {
    c.bias_init = parse_init_kind(p.string("bias_init"), json.owner() + " fc_param.bias_init");
  }
  p.finish();
  return c;
}
}  // namespace

namespace factories {

LayerPtr inner_product(JsonReader& json, const LayerSpec& spec, BuildContext& ctx) {
  FullyConnectedLayer::Config c = read_fc_param(json);
  c.relu = false;
  return std::make_unique<FullyConnectedLayer>(spec, ctx, c);
}

LayerPtr fused_inner_product(JsonReader& json, const LayerSpec& spec, BuildContext& ctx) {
  FullyConnectedLayer::Config c = read_fc_param(json);
  c.relu = true;
  if (json.has("activation")) {
    const std::string act = json.string("activation");
    if (act == "Relu") {
      c.relu = true;
    } else if (act == "None") {
      c.relu = false;
    } else {
      json.fail("activation", "must be \"Relu\" or \"None\", got \"", act, "\"");
    }
  }
  // HugeCTR's "position" wires its hand-fused MLPs through three extra tensors (mask, dReLU,
  // bias gradient): Head 1 -> 4, Body 4 -> 4, Tail 4 -> 1, Isolated 1 -> 1. Ember fuses chains by
  // itself (fc_chain.hpp): the extra bottoms are accepted and ignored, the extra tops are empty
  // placeholders that only another FusedInnerProduct may consume.
  if (json.has("position")) {
    const std::string pos = json.string("position");
    if (pos == "Head") {
      c.extra_tops = 3;
    } else if (pos == "Body") {
      c.extra_bottoms = c.extra_tops = 3;
    } else if (pos == "Tail") {
      c.extra_bottoms = 3;
    } else if (pos != "Isolated" && pos != "None") {
      json.fail("position", "must be Head, Body, Tail, Isolated or None, got \"", pos, "\"");
    }
  }
  return std::make_unique<FullyConnectedLayer>(spec, ctx, c);
}

}  // namespace factories

}  // namespace ember::nn
