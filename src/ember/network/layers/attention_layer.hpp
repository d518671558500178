// MultiHeadAttention (HugeCTR's): bottoms Q [batch, from, D], K [batch, to, D], V [batch, to, D]
// and optionally a mask M [batch, 1, from, to]; top O [batch, from, D]. With num_attention_heads
// h heads of d = D / h columns each (head i owns columns [i d, (i + 1) d) of Q, K, V and O):
//   S_i = Q_i K_i^T / sqrt(d) - 10000 (1 - M)      (the mask term only with a mask)
//   P_i = softmax(S_i) over `to`,   O_i = P_i V_i
// backward (exact): dV_i = P_i^T dO_i, dP_i = dO_i V_i^T, dS_i = P_i (dP_i - rowsum(dP_i P_i)),
// dQ_i = dS_i K_i / sqrt(d), dK_i = dS_i^T Q_i / sqrt(d). The mask is data (it must not require
// a gradient). HugeCTR adds 1e-6 to the softmax's denominator; Ember normalises exactly.
// Products are batched GEMMs over the batch, one per head, on strided views (no transposes);
// scores and the softmax are f32. With 16-bit activations the products read 16-bit operands and
// accumulate in f32, and the probabilities P and their gradient dS are stored in 16 bits for the
// second products, as PyTorch's autocast does.
#pragma once

#include "ember/network/layer.hpp"

namespace ember::network {

class MultiHeadAttentionLayer : public Layer {
 public:
  MultiHeadAttentionLayer(const LayerSpec& spec, BuildContext& ctx, std::int64_t heads);

  void bind() override;
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  // Head i's [batch, rows, d] view of a [batch, rows, D] tensor.
  Tensor head(const Tensor& t, std::int64_t i) const;
  bool masked() const { return bottoms().size() == 4; }

  std::int64_t heads_, batch_ = 0, from_ = 0, to_ = 0, width_ = 0, head_width_ = 0;
  // scores: S (forward), dP (backward), [batch, heads, from, to] in f32 (f64 in the CPU's
  // gradient tests); probs: P and dprobs: dS in the activation dtype.
  TensorSlot scores_slot_, probs_slot_, dscores_slot_;
  Tensor scores_, probs_, dscores_;
};

}  // namespace ember::network
