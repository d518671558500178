#include "ember/network/layer_parts.hpp"

#include <string_view>
#include <unordered_set>

#include "ember/network/layers/loss_layers.hpp"

namespace ember::network {

const char* layer_part_name(LayerPart part) {
  switch (part) {
    case LayerPart::BottomMlp:
      return "bottom MLP";
    case LayerPart::Interaction:
      return "interaction";
    case LayerPart::TopMlp:
      return "top MLP";
    case LayerPart::Loss:
      return "loss";
    case LayerPart::Other:
      return "other dense layers";
  }
  return "?";
}

namespace {
bool is_interaction(std::string_view type) {
  return type == "Interaction" || type == "MultiCross" || type == "FmOrder2";
}
bool is_fully_connected(std::string_view type) {
  return type == "InnerProduct" || type == "FusedInnerProduct";
}
}  // namespace

std::vector<LayerPart> classify_layer_parts(const std::vector<LayerPtr>& layers) {
  std::unordered_set<const Blob*> after_interaction;
  std::vector<LayerPart> parts;
  parts.reserve(layers.size());
  for (const LayerPtr& layer : layers) {
    bool downstream = false;
    for (const BlobPtr& b : layer->bottoms())
      downstream = downstream || after_interaction.count(b.get()) > 0;
    LayerPart part = LayerPart::Other;
    if (dynamic_cast<const LossLayer*>(layer.get()) != nullptr) {
      part = LayerPart::Loss;
    } else if (is_interaction(layer->type())) {
      part = LayerPart::Interaction;
    } else if (is_fully_connected(layer->type())) {
      part = downstream ? LayerPart::TopMlp : LayerPart::BottomMlp;
    }
    if (downstream || part == LayerPart::Interaction) {
      for (const BlobPtr& t : layer->tops())
        after_interaction.insert(t.get());
    }
    parts.push_back(part);
  }
  return parts;
}

}  // namespace ember::network
