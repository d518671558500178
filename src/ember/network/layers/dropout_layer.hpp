// Dropout (HugeCTR's): in training each element is kept with probability 1 - rate and scaled by
// 1 / (1 - rate); in evaluation the top is a copy of the bottom. The mask of step t is a pure
// function of (layer seed, t, element), so CPU and GPU drop the same elements, and backward
// recomputes it instead of storing it.
#pragma once

#include "ember/network/layer.hpp"

namespace ember::network {

class DropoutLayer : public Layer {
 public:
  DropoutLayer(const LayerSpec& spec, BuildContext& ctx, float rate);

  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

  float rate() const { return rate_; }
  std::uint64_t seed() const { return seed_; }
  // Training forwards run so far; the next one uses mask number steps().
  std::uint64_t steps() const { return steps_; }
  void set_steps(std::uint64_t steps) { steps_ = steps; }
  // CUDA: the bottom is the output of a ReLU layer that leaves its gradient to this layer
  // (fc_chain.hpp): backward also zeroes where the bottom is not positive.
  void apply_relu_gradient_of_bottom() { relu_gradient_ = true; }
  bool applies_relu_gradient_of_bottom() const { return relu_gradient_; }

 private:
  bool relu_gradient_ = false;
  float rate_;
  std::uint64_t seed_;
  std::uint64_t steps_ = 0;
  std::uint64_t last_step_ = 0;  // the mask backward must reproduce
};

}  // namespace ember::network
