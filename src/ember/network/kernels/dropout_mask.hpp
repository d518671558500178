// The dropout mask, shared by the CPU and the CUDA kernels so both drop the same elements.
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/tensor/random.hpp"

namespace ember::network {

EMBER_HOST_DEVICE inline std::uint64_t dropout_stream(std::uint64_t seed, std::uint64_t step) {
  return random::mix64(seed ^ (step * 0x9e3779b97f4a7c15ull));
}

// Element i of a step survives when its uniform draw u = m * 2^-53 in [0, 1)
// (random::uniform01) is at least `rate`. Since m is an integer below 2^53 and rate * 2^53 is
// exact in double, that is m >= ceil(rate * 2^53): one integer comparison per element, with the
// stream's own mixing done once, instead of a conversion and a comparison in double.
struct DropoutMask {
  std::uint64_t mixed_stream = 0;
  std::uint64_t threshold = 0;

  static DropoutMask of(std::uint64_t stream, float rate) {
    return DropoutMask{random::mix64(stream),
                       static_cast<std::uint64_t>(std::ceil(static_cast<double>(rate) * 0x1.0p53))};
  }
  EMBER_HOST_DEVICE bool keeps(std::uint64_t i) const {
    return (random::bits_of_mixed(mixed_stream, i) >> 11) >= threshold;
  }
};

}  // namespace ember::network
