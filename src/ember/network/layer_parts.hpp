// Which part of a recommendation model each dense layer belongs to, for the per-part step times
// of a profiling pass (core/part_timer.hpp, DenseNetwork::set_part_timer):
//   loss          the loss layer;
//   interaction   the feature-interaction layers: Interaction (DLRM), MultiCross (DCN),
//                 FmOrder2 (DeepFM);
//   top MLP       fully connected layers that read, directly or through other layers, an
//                 interaction layer's output (DLRM's top MLP, DCN's last layer);
//   bottom MLP    the other fully connected layers (DLRM's bottom MLP, the deep branches of DCN,
//                 DeepFM and Wide&Deep);
//   other         everything else: casts, reshapes, concatenations, dropout, sums.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/network/layer.hpp"

namespace ember::network {

enum class LayerPart : std::uint8_t { BottomMlp, Interaction, TopMlp, Loss, Other };

// "bottom MLP", "interaction", "top MLP", "loss", "other dense layers".
const char* layer_part_name(LayerPart part);

// The part of each layer of `layers` (in execution order: every layer after the layers producing
// its bottoms).
std::vector<LayerPart> classify_layer_parts(const std::vector<LayerPtr>& layers);

}  // namespace ember::network
