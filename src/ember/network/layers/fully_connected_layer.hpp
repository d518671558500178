// InnerProduct and FusedInnerProduct: y = act(x W + b) with W [in, out], b [1, out] (HugeCTR's
// shapes and weight order), act ReLU (FusedInnerProduct's default) or identity (InnerProduct,
// or FusedInnerProduct with "activation": "None"). A bottom of rank > 2 is treated as
// [prod(leading), in].
//
// On CUDA each pass is one cuBLASLt product, in one of these forms:
//   forward   x W + b (+ ReLU): epilogue bias / relu+bias; or the bias epilogue then a ReLU pass;
//             or a plain product then Ember's bias(+ReLU) kernel
//   backward  dW = x^T dZ with db from the bias-gradient epilogue, or a plain product then
//             Ember's column-sum kernel; dX = dZ W^T, skipped when the bottom needs no gradient
//             (the first layer)
// With ReLU, dZ = dY * (y > 0) is one pass over the output (in place in the top's gradient),
// unless the layer is chained (fc_chain.hpp): then the next FC layer computes dZ in its own dX
// product (ReLU-gradient epilogue, from a bit mask this layer's forward writes). With
// FcFusion::Auto that pass also sums db's columns as it goes (one kernel) before a plain dW
// product, where the search does not time something faster: on the H200, cuBLASLt's
// bias-gradient epilogue made DLRM's 65536-row 16-bit weight gradients 35-115 % slower than plain
// ones, and a separate column sum reads dZ once more.
//
// Which form runs (FcFusion::Auto; the plan and its search are fully_connected_plan.cpp): with
// BuildOptions::algorithm_search every form is timed on the real shapes once
// (cublaslt_matmul.hpp; cached per process) and the fastest wins, since cuBLASLt's epilogue
// kernels can be slower than a plain product plus a pass over the output; without the search the
// epilogues are used wherever cuBLASLt has them. The search also picks each product's algorithm
// among the heuristics' candidates.
//
// Alignment: cuBLASLt's fast kernels need 16-byte aligned rows. When the input width is not a
// multiple of 16 bytes (DLRM's 13 dense features), the layer runs its products on a copy of the
// input with zero columns up to a multiple of 8 elements and on a copy of W with zero rows
// (refreshed each forward; both copies are exact, the zeros add nothing), and computes the input
// gradient into a padded buffer that is copied back.
//
// Mixed precision: f16/bf16 activations, f32 master weights and gradients; the products read
// the weights' 16-bit compute copy and write f32 weight gradients.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ember/network/initializer.hpp"
#include "ember/network/layer.hpp"

namespace ember::network {

namespace cuda {
class LtMatmul;
struct MatmulProblem;
struct PlanRequest;
enum class Epilogue : std::uint8_t;
}  // namespace cuda

// How an FC layer's CUDA products are fused with the bias, ReLU and bias-gradient work.
enum class FcFusion : std::uint8_t {
  Auto,       // with the algorithm search the fastest form; without it the epilogues, save
              // where Ember's fused kernel measured faster (the ReLU gradient with db's sums)
  Epilogues,  // cuBLASLt epilogues wherever cuBLASLt has them (chaining allowed)
  Plain,      // plain products and Ember's kernels (the unfused baseline; never chained)
};
const char* fusion_name(FcFusion f);

class FullyConnectedLayer : public Layer {
 public:
  struct Config {
    std::int64_t num_output = 0;
    bool relu = false;
    InitKind weight_init = InitKind::Default;
    InitKind bias_init = InitKind::Default;
    // HugeCTR's hand-fused MLP positions (FusedInnerProduct "position"): bottoms after the first
    // are ignored placeholders, tops after the first are created as placeholders.
    std::size_t extra_bottoms = 0, extra_tops = 0;
  };
  FullyConnectedLayer(const LayerSpec& spec, BuildContext& ctx, const Config& config);
  ~FullyConnectedLayer() override;

  void bind() override;
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;
  bool uses_compute_copy() const override { return true; }

  bool relu() const { return config_.relu; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return config_.num_output; }
  std::int64_t rows() const { return rows_; }
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }

  // ---- chaining with the FC layer that produces this layer's input (see fc_chain.hpp) -------
  // True when this layer can be a producer: CUDA, ReLU, a mask buffer reserved.
  bool can_produce_mask() const;
  // Makes this layer compute `producer`'s dZ in its dX product. Returns false (and changes
  // nothing) when cuBLASLt has no algorithm for the chained epilogues.
  // Under an algorithm search with FcFusion::Auto the pair is chained only when the chained
  // products beat the unchained ones, the producer's ReLU and weight-gradient work counted on
  // both sides; with Auto and no search it is not chained (the producer's ReLU gradient with
  // column sums measured faster), unless this layer is a one-output layer.
  bool chain_from(FullyConnectedLayer& producer, StreamHandle stream = nullptr);
  bool chained_to_consumer() const { return writes_mask_; }
  bool chained_from_producer() const { return producer_ != nullptr; }
  // CUDA, ReLU, not chained: the only consumer of the output, a Dropout, applies this layer's
  // ReLU gradient in its own backward pass (fc_chain.hpp), so backward skips that pass here.
  void leave_relu_gradient_to_consumer();
  bool leaves_relu_gradient_to_consumer() const { return relu_grad_in_consumer_; }
  // The ReLU bit mask the forward writes for the chained consumer (chained_to_consumer()):
  // [rows, relu_mask_ld(out) / 8] bytes, bit c % 8 of byte c / 8 of row r set where output
  // (r, c) counts as positive; the consumer's ReLU-gradient epilogue reads it. Within rounding
  // distance of the kink it can disagree with the stored output (measured on the H200 for
  // output rows that are not a multiple of 16 bytes: bit 1, output 0); tests align to it.
  const Tensor& relu_mask() const { return mask_; }
  // How each planned product runs and, when searched, what the forms cost (benchmarks print
  // it); empty before planning.
  std::string plan_summary() const;
  // Fusion policy (FcFusion above); changing it re-plans. A chained layer keeps Auto or
  // Epilogues.
  void set_fusion(FcFusion fusion);
  FcFusion fusion() const { return fusion_; }
  // For tests: every product takes the heuristics' candidate with this index (the last one if
  // there are fewer), untimed; -1 restores the normal choice. Implies epilogues where cuBLASLt
  // has them unless the fusion is Plain.
  void force_algorithm(int candidate);
  // The most heuristic candidates any planned product of this layer had (0 before planning).
  int candidate_count() const;
  // Measured milliseconds of the chosen cuBLASLt products alone (forward, weight gradient,
  // input gradient; no element-wise kernels); NaN unless every one was timed by a search.
  double product_ms() const;
  // CUDA, one output and no activation: Ember's row-dot, column-sum and outer-product kernels
  // instead of cuBLASLt (no products to plan or search).
  bool single_output() const { return single_output_; }
  // Whether the products run on zero-padded copies of the input (input width not a multiple of
  // 16 bytes, on CUDA), and the padded width.
  bool pads_input() const { return in_ld_ != in_; }
  std::int64_t padded_in_features() const { return in_ld_; }
  // Plans now (otherwise the first forward does) on `stream` (nullptr: the current stream).
  void plan(StreamHandle stream = nullptr);

 private:
  // The forms of the forward and weight-gradient products, in order of preference (the order
  // of the forms the plan search compares).
  enum class ForwardForm : std::uint8_t { Epilogue, BiasEpilogueThenRelu, PlainThenKernel };
  enum class WgradForm : std::uint8_t { ReluColumnSumThenPlain, Epilogue, PlainThenColumnSum };
  struct PlanSearch;

  void plan_cuda(StreamHandle stream);
  void plan_forward(const PlanSearch& s);
  void plan_weight_gradient(const PlanSearch& s);
  void plan_input_gradient(const PlanSearch& s);
  cuda::PlanRequest plan_request(StreamHandle stream) const;
  // The three products as cuBLASLt sees them, with the epilogue given (padding included).
  cuda::MatmulProblem forward_problem(cuda::Epilogue e) const;
  cuda::MatmulProblem wgrad_problem(cuda::Epilogue e) const;
  cuda::MatmulProblem dgrad_problem(cuda::Epilogue e) const;
  // Operand pointers of the products (the padded copies where the layer pads).
  const void* forward_weights() const;
  const void* forward_input() const;
  void* wgrad_output() const;
  void* dgrad_output() const;
  // Whether backward runs the ReLU gradient itself (a ReLU layer neither chained to its
  // consumer nor leaving it to a Dropout).
  bool runs_relu_gradient() const {
    return config_.relu && !writes_mask_ && !relu_grad_in_consumer_;
  }
  // Milliseconds of Ember's element-wise kernels on this layer's output shape (cached).
  double kernel_ms(const char* kernel, StreamHandle stream) const;
  void forward_cpu();
  void backward_cpu();
  void forward_cuda(StreamHandle stream);
  void backward_cuda(StreamHandle stream);

  Config config_;
  std::int64_t in_ = 0, rows_ = 0;
  std::int64_t in_ld_ = 0;  // row length of the products' input: in_, or in_ padded to 8
  ParameterPtr weight_, bias_;
  TensorSlot mask_slot_;  // CUDA + ReLU: ReLU bit mask [rows, relu_mask_ld(out) / 8] bytes
  Tensor mask_;
  TensorSlot colsum_slot_;  // CUDA: workspace of the bias-gradient column sum
  // Padded input width: x [rows, in_ld], W [in_ld, out], dX [rows, in_ld] (with a gradient).
  TensorSlot x_pad_slot_, w_pad_slot_, dx_pad_slot_;
  Tensor x_pad_, w_pad_, dx_pad_;
  Tensor dw_pad_;  // the weight gradient over the padded width, [in_ld, out] (with a gradient)
  bool single_output_ = false;               // CUDA, one output, no ReLU: Ember's kernels
  bool writes_mask_ = false;                 // producer side of a chain
  bool relu_grad_in_consumer_ = false;       // a Dropout consumer applies the ReLU gradient
  FullyConnectedLayer* producer_ = nullptr;  // consumer side of a chain
  bool planned_ = false;
  FcFusion fusion_ = FcFusion::Auto;
  int forced_candidate_ = -1;
  std::unique_ptr<cuda::LtMatmul> fwd_, wgrad_, dgrad_;
  ForwardForm fwd_form_ = ForwardForm::Epilogue;
  WgradForm wgrad_form_ = WgradForm::Epilogue;
  // Costs measured by the search (NaN when not searched): the chosen forward, weight-gradient
  // and input-gradient work, and the ReLU-gradient pass over the output. wgrad_ms_ leaves out a
  // separate ReLU-gradient pass; backward_ms_ is the ReLU and weight-gradient work together, as
  // the layer runs it, and chained_backward_ms_ the fastest weight-gradient form it would run
  // as a chained producer (no ReLU work): what chain_from weighs.
  double fwd_ms_ = 0, wgrad_ms_ = 0, dgrad_ms_ = 0, relu_grad_ms_ = 0;
  double backward_ms_ = 0, chained_backward_ms_ = 0;
  std::string plan_notes_;  // what the search compared, for plan_summary()
  std::string chain_note_;  // why a chain with the producer was or was not made
};

}  // namespace ember::network
