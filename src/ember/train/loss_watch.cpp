#include "ember/train/loss_watch.hpp"

#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"

namespace ember::train {

LossWatch::LossWatch(Place place) : place_(place) {}

void LossWatch::capture(const Tensor& loss, StreamHandle stream) {
  EMBER_CHECK(loss.numel() == 1, "LossWatch: the loss has ", loss.numel(), " elements");
  const auto slot = static_cast<std::size_t>(count_ % 2);
  if (!place_.is_cuda()) {
    value_[slot] = loss.dtype() == DType::F64 ? loss.to_vector<double>()[0]
                                              : static_cast<double>(loss.to_vector<float>()[0]);
  } else {
    Tensor& host = host_[slot];
    if (!host.defined() || host.dtype() != loss.dtype()) {
      host = Tensor::empty({1}, loss.dtype(), Place::pinned());
    }
    if (!ready_[slot]) ready_[slot] = Event::create(place_.device());
    copy_bytes(host.data(), Place::pinned(), loss.data(), place_, loss.nbytes(), stream);
    ready_[slot].record(stream);
  }
  ++count_;
}

double LossWatch::read(int back) const {
  EMBER_CHECK(back >= 0 && back < 2 && back < count_, "LossWatch: no capture ", back, " back (",
              count_, " captured)");
  const auto slot = static_cast<std::size_t>((count_ - 1 - back) % 2);
  if (!place_.is_cuda()) return value_[slot];
  ready_[slot].synchronize();
  const Tensor& host = host_[slot];
  return host.dtype() == DType::F64 ? *host.data<double>()
                                    : static_cast<double>(*host.data<float>());
}

}  // namespace ember::train
