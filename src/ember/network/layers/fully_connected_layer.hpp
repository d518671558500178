// InnerProduct and FusedInnerProduct: y = act(x W + b) with W [in, out], b [1, out] (HugeCTR's
// shapes and weight order), act ReLU (FusedInnerProduct's default) or identity (InnerProduct,
// or FusedInnerProduct with "activation": "None"). A bottom of rank > 2 is treated as
// [prod(leading), in].
//
// On CUDA every product is one cuBLASLt call with an epilogue:
//   forward   x W + b (+ ReLU) in one pass over the output (epilogue bias / relu+bias)
//   backward  dW = x^T dZ with db computed in the same call (bias-gradient epilogue), and
//             dX = dZ W^T, skipped when the bottom needs no gradient (the first layer).
// With ReLU, dZ = dY * (y > 0) is one extra pass over the output (done in place in the top's
// gradient), unless the layer is chained (fc_chain.hpp): then the next FC layer computes dZ in
// its own dX product (ReLU-gradient epilogue, from a bit mask this layer writes in forward).
// When cuBLASLt has no algorithm for an epilogue, the layer falls back to a plain product and
// its own bias/ReLU/column-sum kernels.
//
// Mixed precision: f16/bf16 activations, f32 master weights and gradients; the products read
// the weights' 16-bit compute copy and write f32 weight gradients.
#pragma once

#include <memory>

#include "ember/network/initializer.hpp"
#include "ember/network/layer.hpp"

namespace ember::nn {

namespace cuda {
class LtMatmul;
}

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
  bool chain_from(FullyConnectedLayer& producer);
  bool chained_to_consumer() const { return writes_mask_; }
  bool chained_from_producer() const { return producer_ != nullptr; }
  // Which epilogues the planned products use (for benchmarks and tests); empty before planning.
  std::string plan_summary() const;
  // With epilogues off every product is a plain cuBLASLt product followed by Ember's own bias,
  // ReLU and column-sum kernels (the fallback path; benchmarks use it as the unfused baseline and
  // tests to cover it). On by default; a chained layer cannot turn them off.
  void set_epilogues(bool enabled);
  bool epilogues() const { return epilogues_; }

 private:
  void plan_cuda();
  void forward_cpu();
  void backward_cpu();
  void forward_cuda(StreamHandle stream);
  void backward_cuda(StreamHandle stream);

  Config config_;
  std::int64_t in_ = 0, rows_ = 0;
  ParameterPtr weight_, bias_;
  TensorSlot mask_slot_;  // CUDA + ReLU: ReLU bit mask [rows, relu_mask_ld(out) / 8] bytes
  Tensor mask_;
  TensorSlot colsum_slot_;  // CUDA: workspace of the fallback bias-gradient column sum
  bool writes_mask_ = false;                  // producer side of a chain
  FullyConnectedLayer* producer_ = nullptr;   // consumer side of a chain
  bool planned_ = false;
  bool epilogues_ = true;
  std::unique_ptr<cuda::LtMatmul> fwd_, wgrad_, dgrad_;
  bool fwd_epilogue_ = false, wgrad_epilogue_ = false;
};

}  // namespace ember::nn
