// Cross-layer fusion of fully connected layers on CUDA.
//
// For FC(ReLU) -> FC, the ReLU gradient of the first layer can be applied inside the second
// layer's input-gradient product (cuBLASLt's ReLU-gradient epilogue, reading a bit mask that
// the first layer's forward product writes), so no pass over the first layer's output is left
// in backward. This is what HugeCTR's hand-written "position": Head/Body/Tail configuration does;
// Ember finds the chains itself.
//
// Call once per network after every layer is bound and before the first forward. A pair is
// chained when: both run on CUDA in the same dtype, the producer is a ReLU FC layer whose only
// consumer is the second FC layer, that input needs a gradient, and cuBLASLt has algorithms for
// both chained epilogues. Anything else stays unchained (and correct).
#pragma once

#include <vector>

#include "ember/network/layer.hpp"

namespace ember::nn {

// Returns the number of chained pairs.
int chain_fully_connected_layers(const std::vector<Layer*>& layers);

}  // namespace ember::nn
