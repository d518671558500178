// Planning and cross-layer fusion of a network's fully connected layers on CUDA.
//
// For FC(ReLU) -> FC, the ReLU gradient of the first layer can be applied inside the second
// layer's input-gradient product (cuBLASLt's ReLU-gradient epilogue, reading a bit mask that
// the first layer's forward product writes), so no pass over the first layer's output is left
// in backward. This is what HugeCTR's hand-written "position": Head/Body/Tail configuration does;
// Ember finds the chains itself.
//
// Likewise for FC(ReLU) -> Dropout, the dropout's backward applies the ReLU gradient with its own
// mask (DeepFM's and Wide&Deep's deep branches), when the dropout is the FC layer's only consumer
// and the FC layer is not chained to it otherwise. These are not counted as chained pairs.
//
// Call once per network after every layer is bound and before the first forward (the lead's
// DenseNetwork::bind does). A pair is chained when: both run on CUDA in the same dtype, the
// producer is a ReLU FC layer whose only consumer is the second FC layer, that input needs a
// gradient, neither layer is set to plain products, cuBLASLt has algorithms for both chained
// epilogues, and, under BuildOptions::algorithm_search, the chained products (with the
// producer's fastest weight-gradient form that has no ReLU work) are faster than the unchained
// ones with the producer's ReLU and weight-gradient work as it runs them unchained (timed on the
// real shapes). Anything else stays unchained (and correct). Every FC layer on CUDA is then
// planned, so the search's timing (and its host synchronisation) happens here rather than in the
// first forward.
#pragma once

#include <vector>

#include "ember/core/device.hpp"
#include "ember/network/layer.hpp"

namespace ember::network {

// Returns the number of chained pairs. `stream`: where the search times (nullptr: current).
int chain_fully_connected_layers(const std::vector<Layer*>& layers, StreamHandle stream = nullptr);

}  // namespace ember::network
