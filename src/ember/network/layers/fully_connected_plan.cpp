// The CUDA plan of the fully connected layers (see fully_connected_layer.hpp): the cuBLASLt
// problems of the three products, the search over each product's forms (epilogue or plain
// product plus Ember's kernels) and its costs, chaining with the producing layer, and the
// summary benchmarks print.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/cublaslt_matmul.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/network/launch_timing.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"
#include "ember/network/plan_choice.hpp"

namespace ember::network {

namespace {

// The ReLU gradient with the bias gradient's column sums, one pass (kernel_ms's name).
constexpr const char* kReluColumnSumKernel = "relu-gradient-column-sum";

std::string ms_text(double ms) {
  if (!std::isfinite(ms)) return "untimed";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

std::string alternatives_text(const std::vector<PlanAlternative>& alts,
                              const std::vector<const char*>& names) {
  std::string s;
  for (std::size_t i = 0; i < alts.size(); ++i) {
    if (!alts[i].supported) continue;
    if (!s.empty()) s += ", ";
    s += cat(names[i], " ", ms_text(alts[i].ms));
  }
  return s;
}

}  // namespace

cuda::PlanRequest FullyConnectedLayer::plan_request(StreamHandle stream) const {
  cuda::PlanRequest r;
  r.search = options_.algorithm_search && forced_candidate_ < 0;
  r.force_candidate = forced_candidate_;
  r.stream = stream;
  return r;
}

// Row-major y [rows, out] = x [rows, in] W [in, out] is column-major y^T = W^T x^T: A is W
// (column-major [out, in], lda = out), B is x (column-major [in, rows], ldb = in).
cuda::MatmulProblem FullyConnectedLayer::forward_problem(cuda::Epilogue e) const {
  const std::int64_t n = config_.num_output;
  const DType t = bottom(0).dtype();
  return {.m = n,
          .n = rows_,
          .k = in_ld_,
          .lda = n,
          .ldb = in_ld_,
          .ldd = n,
          .ab_dtype = t,
          .d_dtype = t,
          .allow_tf32 = options_.allow_tf32,
          .epilogue = e,
          .aux_ld = cuda::relu_mask_ld(n)};
}

// dW [in, out] = x^T dZ is column-major dW^T [out, in] = dZ^T x: A is dZ (column-major
// [out, rows]), B is x transposed (column-major [in, rows] read as [rows, in]). A padded x gives
// a padded dW [in_ld, out] (wgrad_output), whose first in_ rows are the layer's gradient.
cuda::MatmulProblem FullyConnectedLayer::wgrad_problem(cuda::Epilogue e) const {
  const std::int64_t n = config_.num_output;
  return {.transpose_b = true,
          .m = n,
          .n = dw_pad_.defined() ? in_ld_ : in_,
          .k = rows_,
          .lda = n,
          .ldb = in_ld_,
          .ldd = n,
          .ab_dtype = bottom(0).dtype(),
          .d_dtype = weight_->grad().dtype(),
          .allow_tf32 = options_.allow_tf32,
          .epilogue = e};
}

// dX [rows, in] = dZ W^T is column-major dX^T [in, rows] = W dZ^T: A is W transposed, B is dZ;
// written with row length in_ld_ (the padded buffer when the layer pads).
cuda::MatmulProblem FullyConnectedLayer::dgrad_problem(cuda::Epilogue e) const {
  const std::int64_t n = config_.num_output;
  const DType t = bottom(0).dtype();
  return {.transpose_a = true,
          .m = in_,
          .n = rows_,
          .k = n,
          .lda = n,
          .ldb = n,
          .ldd = in_ld_,
          .ab_dtype = t,
          .d_dtype = t,
          .allow_tf32 = options_.allow_tf32,
          .epilogue = e,
          .aux_ld = cuda::relu_mask_ld(in_)};
}

double FullyConnectedLayer::kernel_ms(const char* kernel, StreamHandle stream) const {
#if !EMBER_WITH_CUDA
  (void)kernel;
  (void)stream;
  return std::numeric_limits<double>::quiet_NaN();
#else
  const int device = place().device();
  const DType t = bottom(0).dtype();
  const std::int64_t n = config_.num_output;
  const std::string name = kernel;
  const std::string key = cat("dev", device, " ", name, " ", dtype_name(t), " ", rows_, "x", n);
  // Scratch in the same alignment as the real buffers (256-byte starts), so the same (packed
  // or scalar) kernel variant is timed: two [rows, out] tensors (the ReLU gradient reads the
  // output and the gradient, like the real pass), the bias, the column-sum workspace and its
  // output.
  const auto round256 = [](std::size_t b) { return (b + 255) / 256 * 256; };
  const std::size_t values = round256(static_cast<std::size_t>(rows_ * n) * dtype_size(t));
  const std::size_t bias_bytes = round256(static_cast<std::size_t>(n) * dtype_size(t));
  const std::size_t sums =
      static_cast<std::size_t>(cuda::column_sum_workspace(rows_, n) + n) * sizeof(float);
  AllocationPtr scratch;
  return cuda::cached_launch_ms(key, device, stream, [&] {
    if (!scratch) {
      scratch = Allocation::create(Place::cuda(device), 2 * values + bias_bytes + sums);
    }
    std::byte* y = scratch->bytes();
    std::byte* dy = y + values;
    std::byte* bias = dy + values;
    auto* colsum_out = reinterpret_cast<float*>(bias + bias_bytes);
    float* workspace = colsum_out + n;
    if (name == "bias" || name == "bias+relu") {
      cuda::bias_activation(t, rows_, n, bias, name == "bias+relu", y, stream);
    } else if (name == "relu") {
      cuda::activation_forward(cuda::Activation::Relu, t, rows_ * n, y, y, 0.0f, stream);
    } else if (name == "relu-gradient") {
      cuda::activation_backward(cuda::Activation::Relu, t, rows_ * n, nullptr, y, dy, dy, 0.0f,
                                stream);
    } else if (name == kReluColumnSumKernel) {
      cuda::relu_backward_column_sum(t, rows_, n, y, dy, dy, colsum_out, workspace, stream);
    } else {
      EMBER_CHECK(name == "column-sum", "FC layer: no kernel '", name, "' to time");
      cuda::column_sum(t, rows_, n, dy, colsum_out, workspace, stream);
    }
  });
#endif
}

void FullyConnectedLayer::plan(StreamHandle stream) {
  if (!on_cuda() || planned_) return;
  EMBER_CHECK(bound_, "layer ", describe(), ": plan() before bind()");
  plan_cuda(stream);
}

// What one planning pass of the layer's products shares.
struct FullyConnectedLayer::PlanSearch {
  int device = 0;
  StreamHandle stream = nullptr;
  cuda::PlanRequest request;
  // Under a search with fusion Auto, every form of a product is timed and the fastest runs;
  // otherwise the epilogue form is preferred (unless the fusion is Plain), or with fusion Auto
  // the forms that the measurements put before it (ProductForm::When::Auto).
  bool compare = false;
  bool epilogues = true;
  bool auto_fusion = false;
};

namespace {

// One form of a product in the search: the epilogue it asks cuBLASLt for, the Ember kernel that
// completes it (timed and added to its cost when forms are compared), and when it is planned.
struct ProductForm {
  enum class When : std::uint8_t {
    Auto,       // with FcFusion::Auto: Ember's fused kernel that beat the epilogue wherever it
                // was measured, preferred over it (first in the list)
    Epilogues,  // whenever epilogues are allowed: the preferred form, first in the list
    Compared,   // when epilogues are allowed and forms are compared
    Fallback,   // when epilogues are not allowed, forms are compared or no earlier form is
                // supported
    Never,      // not a form of this layer
  };
  const char* name;  // in plan_summary's notes
  cuda::Epilogue epilogue;
  const char* kernel;  // Ember's kernel after the product, or nullptr
  When when;
};

struct ChosenForm {
  int index = -1;  // into the forms; -1 when cuBLASLt supports none
  std::unique_ptr<cuda::LtMatmul> product;
  double ms = std::numeric_limits<double>::quiet_NaN();  // what the form costs
  std::string notes;                          // what was compared (empty unless forms are compared)
  std::vector<PlanAlternative> alternatives;  // every form's cost, in the forms' order
};

// The one search of the forward and the weight-gradient products: plans each form of `forms`
// (plan_with(epilogue) plans the product) when its `when` says so, and keeps the one
// pick_alternative chooses. When forms are compared, a form's cost is its product's time plus
// kernel_ms(form.kernel) (kernel_ms takes nullptr too: the work every form shares, if any).
template <class PlanWith, class KernelMs>
ChosenForm choose_form(const std::vector<ProductForm>& forms, bool compare, bool epilogues,
                       bool auto_fusion, const PlanWith& plan_with, const KernelMs& kernel_ms) {
  using When = ProductForm::When;
  std::vector<std::unique_ptr<cuda::LtMatmul>> planned(forms.size());
  std::vector<PlanAlternative> alts(forms.size());
  std::vector<const char*> names;
  bool any_supported = false;
  for (std::size_t i = 0; i < forms.size(); ++i) {
    const ProductForm& f = forms[i];
    names.push_back(f.name);
    const bool wanted = f.when == When::Auto        ? epilogues && auto_fusion
                        : f.when == When::Epilogues ? epilogues
                        : f.when == When::Compared  ? epilogues && compare
                        : f.when == When::Fallback  ? !epilogues || compare || !any_supported
                                                    : false;
    if (!wanted) continue;
    planned[i] = plan_with(f.epilogue);
    double ms = planned[i]->time_ms();
    if (compare) ms += kernel_ms(f.kernel);
    alts[i] = {planned[i]->supported(), ms};
    any_supported = any_supported || alts[i].supported;
  }
  ChosenForm chosen;
  chosen.index = pick_alternative(alts);
  if (chosen.index < 0) return chosen;
  const auto i = static_cast<std::size_t>(chosen.index);
  chosen.product = std::move(planned[i]);
  chosen.ms = compare ? alts[i].ms : chosen.product->time_ms();
  if (compare) chosen.notes = alternatives_text(alts, names);
  chosen.alternatives = std::move(alts);
  return chosen;
}

}  // namespace

void FullyConnectedLayer::plan_cuda(StreamHandle stream) {
  if (single_output_) {
    fwd_.reset();
    wgrad_.reset();
    dgrad_.reset();
    plan_notes_.clear();
    const double untimed = std::numeric_limits<double>::quiet_NaN();
    fwd_ms_ = wgrad_ms_ = dgrad_ms_ = relu_grad_ms_ = untimed;
    backward_ms_ = chained_backward_ms_ = untimed;
    planned_ = true;
    return;
  }
  PlanSearch s;
  s.device = place().device();
  s.stream = stream != nullptr ? stream : current_stream(s.device);
  s.request = plan_request(s.stream);
  s.compare = s.request.search && fusion_ == FcFusion::Auto;
  s.epilogues = fusion_ != FcFusion::Plain;
  s.auto_fusion = fusion_ == FcFusion::Auto;
  plan_notes_.clear();
  plan_forward(s);

  const double untimed = std::numeric_limits<double>::quiet_NaN();
  relu_grad_ms_ = untimed;
  wgrad_ms_ = backward_ms_ = chained_backward_ms_ = untimed;
  dgrad_ms_ = untimed;
  if (!top(0).requires_grad()) {
    wgrad_.reset();
    dgrad_.reset();
    planned_ = true;
    return;
  }
  if (config_.relu && s.compare) relu_grad_ms_ = kernel_ms("relu-gradient", s.stream);
  plan_weight_gradient(s);
  plan_input_gradient(s);
  planned_ = true;
}

void FullyConnectedLayer::plan_forward(const PlanSearch& s) {
  using cuda::Epilogue;
  using When = ProductForm::When;
  const DType t = bottom(0).dtype();
  const void* w = forward_weights();
  const void* x = forward_input();
  const void* b = bias_->compute(t).data();
  const void* y = top(0).value().data();
  if (writes_mask_) {
    // Chained producer (chain_from checked that this product exists).
    fwd_ = cuda::LtMatmul::plan(forward_problem(Epilogue::ReluAuxBias), s.device, w, x, y, b,
                                mask_.data(), s.request);
    EMBER_CHECK(fwd_->supported(), "layer ", describe(), ": chained without a mask epilogue");
    fwd_form_ = ForwardForm::Epilogue;
    fwd_ms_ = fwd_->time_ms();
    if (s.compare) plan_notes_ = cat("forward: chained ", ms_text(fwd_ms_));
    return;
  }
  // In the order of ForwardForm.
  const std::vector<ProductForm> forms = {
      {"epilogue", config_.relu ? Epilogue::ReluBias : Epilogue::Bias, nullptr, When::Epilogues},
      {"bias epilogue + ReLU", Epilogue::Bias, "relu", config_.relu ? When::Compared : When::Never},
      {"plain + kernel", Epilogue::None, config_.relu ? "bias+relu" : "bias", When::Fallback}};
  ChosenForm c = choose_form(
      forms, s.compare, s.epilogues, s.auto_fusion,
      [&](Epilogue e) {
        return cuda::LtMatmul::plan(forward_problem(e), s.device, w, x, y,
                                    e == Epilogue::None ? nullptr : b, nullptr, s.request);
      },
      [&](const char* kernel) { return kernel != nullptr ? kernel_ms(kernel, s.stream) : 0.0; });
  EMBER_CHECK(c.index >= 0, "layer ", describe(), ": cuBLASLt has no algorithm for a ",
              dtype_name(t), " product ", rows_, "x", in_ld_, " by ", in_ld_, "x",
              config_.num_output);
  fwd_form_ = static_cast<ForwardForm>(c.index);
  fwd_ = std::move(c.product);
  fwd_ms_ = c.ms;
  if (s.compare) plan_notes_ = cat("forward: ", c.notes);
}

void FullyConnectedLayer::plan_weight_gradient(const PlanSearch& s) {
  using cuda::Epilogue;
  using When = ProductForm::When;
  const void* dz = top(0).grad().data();
  const void* x = forward_input();
  void* dw = wgrad_output();
  void* db = bias_->grad().data();
  // A layer that runs its ReLU gradient can sum db's columns in that pass (the first form);
  // the other forms pay for the pass on their own, so their costs include it.
  const bool relu_pass = runs_relu_gradient();
  // In the order of WgradForm.
  const std::vector<ProductForm> forms = {
      {"ReLU gradient with column sums + plain", Epilogue::None, kReluColumnSumKernel,
       relu_pass ? When::Auto : When::Never},
      {"epilogue", Epilogue::BiasGradA, nullptr, When::Epilogues},
      {"plain + column sum", Epilogue::None, "column-sum", When::Fallback}};
  const double pass_ms = relu_pass ? relu_grad_ms_ : 0.0;
  ChosenForm c = choose_form(
      forms, s.compare, s.epilogues, s.auto_fusion,
      [&](Epilogue e) {
        return cuda::LtMatmul::plan(wgrad_problem(e), s.device, dz, x, dw,
                                    e == Epilogue::None ? nullptr : db, nullptr, s.request);
      },
      [&](const char* kernel) {
        if (kernel != nullptr && std::string_view(kernel) == kReluColumnSumKernel) {
          return kernel_ms(kernel, s.stream);
        }
        return pass_ms + (kernel != nullptr ? kernel_ms(kernel, s.stream) : 0.0);
      });
  EMBER_CHECK(c.index >= 0, "layer ", describe(),
              ": cuBLASLt has no algorithm for the weight-gradient product");
  wgrad_form_ = static_cast<WgradForm>(c.index);
  wgrad_ = std::move(c.product);
  const bool separate_pass = wgrad_form_ != WgradForm::ReluColumnSumThenPlain;
  backward_ms_ = c.ms;
  wgrad_ms_ = s.compare && separate_pass ? c.ms - pass_ms : c.ms;
  // As a chained producer the layer runs no ReLU work: the two other forms, without the pass.
  chained_backward_ms_ = std::numeric_limits<double>::quiet_NaN();
  if (s.compare) {
    plan_notes_ += cat("; weight grad: ", c.notes);
    double best = std::numeric_limits<double>::infinity();
    for (const auto form : {WgradForm::Epilogue, WgradForm::PlainThenColumnSum}) {
      const PlanAlternative& a = c.alternatives[static_cast<std::size_t>(form)];
      if (a.supported && a.ms - pass_ms < best) best = a.ms - pass_ms;
    }
    if (std::isfinite(best)) chained_backward_ms_ = best;
  }
}

void FullyConnectedLayer::plan_input_gradient(const PlanSearch& s) {
  dgrad_.reset();
  if (!bottom(0).requires_grad()) return;
  const DType t = bottom(0).dtype();
  const cuda::Epilogue e = producer_ != nullptr ? cuda::Epilogue::Drelu : cuda::Epilogue::None;
  dgrad_ = cuda::LtMatmul::plan(
      dgrad_problem(e), s.device, weight_->compute(t).data(), top(0).grad().data(), dgrad_output(),
      nullptr, producer_ != nullptr ? producer_->mask_.data() : nullptr, s.request);
  EMBER_CHECK(dgrad_->supported(), "layer ", describe(), ": cuBLASLt has no algorithm for the ",
              producer_ != nullptr ? "chained " : "", "input-gradient product");
  dgrad_ms_ = dgrad_->time_ms();
}

void FullyConnectedLayer::set_fusion(FcFusion fusion) {
  EMBER_CHECK(fusion != FcFusion::Plain || (!writes_mask_ && producer_ == nullptr), "layer ",
              describe(), ": a chained layer needs its epilogues (fusion ", fusion_name(fusion),
              " refused)");
  fusion_ = fusion;
  planned_ = false;
}

int FullyConnectedLayer::candidate_count() const {
  int n = 0;
  for (const auto* p : {fwd_.get(), wgrad_.get(), dgrad_.get()}) {
    if (p != nullptr) n = std::max(n, p->candidate_count());
  }
  return n;
}

double FullyConnectedLayer::product_ms() const {
  if (!planned_ || !fwd_) return std::numeric_limits<double>::quiet_NaN();
  double ms = 0;
  for (const auto* p : {fwd_.get(), wgrad_.get(), dgrad_.get()}) {
    if (p != nullptr) ms += p->time_ms();
  }
  return ms;
}

void FullyConnectedLayer::force_algorithm(int candidate) {
  forced_candidate_ = candidate < 0 ? -1 : candidate;
  planned_ = false;
}

bool FullyConnectedLayer::chain_from(FullyConnectedLayer& producer, StreamHandle stream) {
  if (!on_cuda() || !producer.can_produce_mask() || !bottom(0).requires_grad() ||
      !top(0).requires_grad()) {
    return false;
  }
  if (fusion_ == FcFusion::Plain || producer.fusion_ == FcFusion::Plain) return false;
  if (bottoms()[0] != producer.tops()[0] || bottom(0).dtype() != producer.top(0).dtype()) {
    return false;
  }
  const int device = place().device();
  if (stream == nullptr) stream = current_stream(device);
  const DType t = bottom(0).dtype();
  const cuda::PlanRequest req = plan_request(stream);
  // Both chained products must exist before anything changes.
  auto fwd = cuda::LtMatmul::plan(producer.forward_problem(cuda::Epilogue::ReluAuxBias), device,
                                  producer.forward_weights(), producer.forward_input(),
                                  producer.top(0).value().data(), producer.bias_->compute(t).data(),
                                  producer.mask_.data(), req);
  if (single_output_) {
    // Its input-gradient kernel reads the mask at no cost of its own: nothing to time.
    if (!fwd->supported()) {
      chain_note_ = "not chained: cuBLASLt has no algorithm for the producer's mask epilogue";
      return false;
    }
    chain_note_ =
        cat("chained to ", producer.name(), " (the input-gradient kernel reads its mask)");
    producer.writes_mask_ = true;
    producer.planned_ = false;
    producer_ = &producer;
    planned_ = false;
    return true;
  }
  if (!req.search && fusion_ == FcFusion::Auto && producer.fusion_ == FcFusion::Auto) {
    // Untimed, Auto keeps the producer's ReLU gradient with its column sums: on every DLRM pair
    // measured (H200, 16-bit, 65536 rows) that beat the chained epilogues with the producer's
    // bias gradient left to do.
    chain_note_ = "not chained: fusion auto prefers the producer's ReLU gradient with column sums";
    return false;
  }
  auto dgrad = cuda::LtMatmul::plan(dgrad_problem(cuda::Epilogue::Drelu), device,
                                    weight_->compute(t).data(), top(0).grad().data(),
                                    dgrad_output(), nullptr, producer.mask_.data(), req);
  if (!fwd->supported() || !dgrad->supported()) {
    chain_note_ = "not chained: cuBLASLt has no algorithm for the chained epilogues";
    return false;
  }
  if (req.search && fusion_ == FcFusion::Auto && producer.fusion_ == FcFusion::Auto) {
    // Unchained costs: both layers planned as they stand (neither is chained to the other).
    if (!producer.planned_) producer.plan_cuda(stream);
    if (!planned_) plan_cuda(stream);
    // The producer's ReLU and weight-gradient work is counted on both sides: chained, its dZ
    // comes from this layer's product and it runs a weight-gradient form without ReLU work.
    const double chained = fwd->time_ms() + dgrad->time_ms() + producer.chained_backward_ms_;
    const double unchained = producer.fwd_ms_ + producer.backward_ms_ + dgrad_ms_;
    const bool wins = chaining_wins(chained, unchained);
    chain_note_ = cat(wins ? "chained" : "not chained", " to ", producer.name(), ": ",
                      ms_text(chained), " chained against ", ms_text(unchained), " unchained");
    if (!wins) return false;
  } else {
    chain_note_ = cat("chained to ", producer.name(), " (epilogues preferred, not timed)");
  }
  producer.writes_mask_ = true;
  producer.planned_ = false;
  producer_ = &producer;
  planned_ = false;
  return true;
}

std::string FullyConnectedLayer::plan_summary() const {
  if (planned_ && single_output_) {
    std::string s = "single output: row dot products, one backward pass for the column sums";
    if (top(0).requires_grad() && bottom(0).requires_grad()) {
      s += producer_ != nullptr ? " and the outer product with the producer's ReLU mask"
                                : " and the outer product";
    }
    if (!chain_note_.empty()) s += cat(" {", chain_note_, "}");
    return s;
  }
  if (!planned_ || !fwd_) return {};
  std::string s = "forward ";
  switch (fwd_form_) {
    case ForwardForm::Epilogue:
      s += cat(cuda::epilogue_name(fwd_->problem().epilogue), " epilogue");
      break;
    case ForwardForm::BiasEpilogueThenRelu:
      s += "bias epilogue + ReLU kernel";
      break;
    case ForwardForm::PlainThenKernel:
      s += config_.relu ? "plain + bias/ReLU kernel" : "plain + bias kernel";
      break;
  }
  if (std::isfinite(fwd_ms_)) s += cat(" ", ms_text(fwd_ms_));
  const bool fused_relu = wgrad_form_ == WgradForm::ReluColumnSumThenPlain;
  if (wgrad_) {
    switch (wgrad_form_) {
      case WgradForm::Epilogue:
        s += ", weight grad bias-gradient epilogue";
        break;
      case WgradForm::PlainThenColumnSum:
        s += ", weight grad plain + column-sum kernel";
        break;
      case WgradForm::ReluColumnSumThenPlain:
        s += ", ReLU gradient with column sums + weight grad plain";
        break;
    }
    if (std::isfinite(wgrad_ms_)) s += cat(" ", ms_text(wgrad_ms_));
  }
  if (relu_grad_in_consumer_ && wgrad_) {
    s += ", ReLU gradient in the consumer's dropout";
  } else if (config_.relu && !writes_mask_ && wgrad_ && !fused_relu) {
    s += ", ReLU-gradient pass";
    if (std::isfinite(relu_grad_ms_)) s += cat(" ", ms_text(relu_grad_ms_));
  }
  if (dgrad_) {
    s += producer_ != nullptr ? ", input grad relu-gradient epilogue (chained)"
                              : ", input grad plain";
    if (std::isfinite(dgrad_ms_)) s += cat(" ", ms_text(dgrad_ms_));
  } else if (wgrad_) {
    s += ", no input grad";
  }
  if (pads_input()) s += cat(", input padded ", in_, " -> ", in_ld_);
  if (forced_candidate_ >= 0) s += cat(", forced algorithm ", forced_candidate_);
  if (!plan_notes_.empty()) s += cat(" [searched ", plan_notes_, "]");
  if (!chain_note_.empty()) s += cat(" {", chain_note_, "}");
  return s;
}

}  // namespace ember::network
