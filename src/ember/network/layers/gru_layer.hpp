// GRU (HugeCTR's "GRU", the interest extractor of DIN-style models): one unidirectional layer
// over each sample's sequence, h_0 = 0, cuDNN's gate equations with one bias per gate (HugeCTR's
// CUDNN_RNN_SINGLE_INP_BIAS):
//   r_t = sigmoid(x_t W_r + h_{t-1} R_r + b_r)
//   z_t = sigmoid(x_t W_z + h_{t-1} R_z + b_z)
//   n_t = tanh(x_t W_n + r_t * (h_{t-1} R_n) + b_n)
//   h_t = (1 - z_t) * n_t + z_t * h_{t-1}
// The bottom holds batch sequences of SeqLength vectors of vector_size: [batch, SeqLength,
// vector_size] or [batch, SeqLength * vector_size], each sample's sequence contiguous (the layout
// of an embedding output). The top holds every step's hidden state, [batch, SeqLength,
// num_output] or [batch, SeqLength * num_output] (the bottom's rank).
// Parameters: weight W [vector_size, 3 H] and recurrent_weight R [H, 3 H] with the gates' columns
// in the order r, z, n (cuDNN's), and bias [1, 3 H]. Default init: W XavierUniform (vector_size,
// H), R XavierUniform (H, H), bias zero.
// The layer computes in f32 (f64 in the CPU's gradient tests): the recurrence carries its state
// through every step, and its products are one [rows, vector_size] x [vector_size, 3 H] over all
// steps plus one [batch, H] x [H, 3 H] per step. A 16-bit network casts around it
// (precision.hpp).
#pragma once

#include "ember/network/initializer.hpp"
#include "ember/network/layer.hpp"

namespace ember::network {

class GruLayer : public Layer {
 public:
  struct Config {
    std::int64_t hidden = 0;      // num_output
    std::int64_t seq_length = 0;  // SeqLength
    std::int64_t vector_size = 0;
    InitKind weight_init = InitKind::Default;
    InitKind bias_init = InitKind::Default;
  };
  GruLayer(const LayerSpec& spec, BuildContext& ctx, const Config& config);

  void bind() override;
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  // [batch, steps, width] views of the bottom, the top and the workspaces.
  Tensor steps_view(const Tensor& t, std::int64_t width) const;
  void step_forward(std::int64_t t, StreamHandle stream);
  void step_backward(std::int64_t t, StreamHandle stream);

  Config config_;
  std::int64_t batch_ = 0;
  ParameterPtr weight_, recurrent_, bias_;
  // gx: x W for every step [batch, steps, 3 H] (its gradient in backward); gh: h_{t-1} R
  // [batch, 3 H] (its gradient in backward); gates: r, z, n and h_{t-1} R_n per step
  // [batch, steps, 4 H]; dh: the gradient flowing to h_{t-1} [batch, H].
  TensorSlot gx_slot_, gh_slot_, gates_slot_, dh_slot_, colsum_slot_;
  Tensor gx_, gh_, gates_, dh_, colsum_;
};

}  // namespace ember::network
