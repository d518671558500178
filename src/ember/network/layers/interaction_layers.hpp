// Second-order feature interactions.
//
// Interaction (DLRM's dot interaction, HugeCTR's layout): bottoms [mlp [b, w], emb [b, F, w]].
// Row 0 is the MLP vector, rows 1..F the embeddings; the top [b, w + F(F+1)/2 + 1] holds the MLP
// vector, then the dot products of every pair i > j in the order (1,0), (2,0), (2,1), (3,0), ...
// (pair (i, j) at w + i(i-1)/2 + j), then one zero (HugeCTR's padding). 480 for w = 128, F = 26.
// With BuildOptions::allow_tf32 an f32 network's dots and gradients run on TF32 tensor cores on
// CUDA (inputs rounded to a 10-bit mantissa, f32 sums), as the FC layers' products do; the CPU
// computes in exact f32 either way.
//
// FmOrder2 (factorisation machine, order 2): bottom [b, slots * w] (or [b, slots, w]), top
// [b, w] = 0.5 ((sum_s v_s)^2 - sum_s v_s^2) with out_dim = w.
#pragma once

#include "ember/network/layer.hpp"
#include "ember/tensor/row_gather.hpp"

namespace ember::network {

class InteractionLayer : public Layer {
 public:
  InteractionLayer(const LayerSpec& spec, BuildContext& ctx);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

  std::int64_t batch() const { return batch_; }
  std::int64_t num_embeddings() const { return num_emb_; }
  std::int64_t width() const { return width_; }
  static std::int64_t output_width(std::int64_t num_emb, std::int64_t width) {
    return width + num_emb * (num_emb + 1) / 2 + 1;
  }

  // Whether the embeddings can be read through an index here: on the CPU always, on CUDA where
  // the 16-bit tensor-core kernels run this dtype and shape.
  bool can_gather() const;
  // From now on reads embedding i of sample b where code gather.index[b * num_embeddings() + i]
  // says (row_gather.hpp): a row of gather.table (width() values of bottom 1's dtype), zeros, or
  // a row of bottom 1, which then holds only the rows the codes name; forward and backward read
  // the same rows, so the table must not change between them. The gradient still goes to bottom
  // 1's gradient. An undefined gather reads bottom 1 again.
  void gather_embeddings(const RowGather& gather);
  const RowGather& embedding_gather() const { return gather_; }

 private:
  std::int64_t batch_ = 0, num_emb_ = 0, width_ = 0;
  RowGather gather_;
};

class FmOrder2Layer : public Layer {
 public:
  FmOrder2Layer(const LayerSpec& spec, BuildContext& ctx, std::int64_t out_dim);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  std::int64_t batch_ = 0, slots_ = 0, width_ = 0;
};

}  // namespace ember::network
