// Layers with their own small weights, and the plain matrix product:
//   MultiCross      DCN's cross network, num_layers layers over a [batch, n] bottom:
//                   x_{l+1} = x0 (x_l . w_l) + b_l + x_l, weights w_l, b_l of [1, n] in the
//                   order w_0, b_0, w_1, b_1, ... (HugeCTR's). Default init: w XavierUniform
//                   (fan n, n), b zero. On CUDA one fused kernel runs all layers each way
//                   (kernels/multi_cross.cu) for rows up to cuda::kCrossFusedMaxWidth; wider rows
//                   run the per-layer kernels, which store every hidden state.
//   WeightMultiply  [batch, slots] -> [batch, slots * vec]: y[b, i vec + j] = x[b, i] W[i, j]
//                   with W [slots, vec] = weight_dims. Default init XavierUniform (slots,
//                   slots * vec).
//   MatrixMultiply  two bottoms [m, n] x [n, k], or batched [b, m, n] x [b, n, k] (4-D: two batch
//                   dimensions).
#pragma once

#include <vector>

#include "ember/network/initializer.hpp"
#include "ember/network/layer.hpp"

namespace ember::network {

class MultiCrossLayer : public Layer {
 public:
  MultiCrossLayer(const LayerSpec& spec, BuildContext& ctx, int num_layers, InitKind weight_init,
                  InitKind bias_init);
  void bind() override;
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;
  // Whether this layer runs the fused CUDA kernels (cuda::cross_fused).
  bool fused() const { return fused_; }

 private:
  void fused_forward(StreamHandle stream);
  void fused_backward(StreamHandle stream);

  int num_layers_;
  std::int64_t batch_ = 0, width_ = 0;
  bool fused_ = false;
  std::vector<ParameterPtr> weights_, biases_;
  // Per-layer path (CPU, wide rows on CUDA): x_1 .. x_{L-1}; s_0 .. s_{L-1}.
  std::vector<TensorSlot> hidden_slots_, s_slots_;
  TensorSlot t_slot_, workspace_slot_, g_slot_, dx_slot_;
  TensorSlot s_all_slot_;  // fused: s [num_layers, batch]
  std::vector<Tensor> hidden_, s_;
  Tensor t_, workspace_, g32_, dx32_, s_all_;
};

class WeightMultiplyLayer : public Layer {
 public:
  WeightMultiplyLayer(const LayerSpec& spec, BuildContext& ctx, std::int64_t slots,
                      std::int64_t vec, InitKind weight_init);
  void bind() override;
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  std::int64_t batch_ = 0, slots_ = 0, vec_ = 0;
  ParameterPtr weight_;
  TensorSlot workspace_slot_;
  Tensor workspace_;
};

class MatrixMultiplyLayer : public Layer {
 public:
  MatrixMultiplyLayer(const LayerSpec& spec, BuildContext& ctx);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  // The bottoms and top as 2-D (batch_ == 0) or batched 3-D views.
  Tensor view(const Tensor& t, std::int64_t rows, std::int64_t cols) const;
  std::int64_t batch_ = 0, m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace ember::network
