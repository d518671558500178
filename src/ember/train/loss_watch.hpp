// Reads the training loss of recent steps without making the host wait for the device: on a GPU
// each capture queues a copy of the loss into pinned memory and records an event, two captures
// deep, so the training loop can check step i - 1 while step i runs; on the CPU the value is
// read at once.
#pragma once

#include <array>
#include <cstdint>

#include "ember/core/stream.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::train {

class LossWatch {
 public:
  explicit LossWatch(Place place);

  // Captures `loss` ([1], f32 or f64, at the watch's place) after the work queued on `stream`.
  void capture(const Tensor& loss, StreamHandle stream);
  // The loss captured `back` captures ago (0: the last one, 1: the one before), waiting for the
  // device if needed. Requires back < 2 and back < captures().
  double read(int back) const;
  std::int64_t captures() const { return count_; }

 private:
  Place place_;
  std::array<Tensor, 2> host_;  // pinned, on a GPU
  std::array<Event, 2> ready_;
  std::array<double, 2> value_{};  // on the CPU
  std::int64_t count_ = 0;
};

}  // namespace ember::train
