#include "ember/network/dense_network.hpp"

#include <algorithm>

#include "ember/core/error.hpp"
#include "ember/network/fc_chain.hpp"
#include "ember/network/layer_parts.hpp"
#include "ember/network/layer_registry.hpp"
#include "ember/network/precision.hpp"

namespace ember::network {

DenseNetwork::DenseNetwork(const std::vector<nlohmann::json>& layers,
                           const std::map<std::string, BlobPtr>& inputs, BuildContext& ctx) {
  std::map<std::string, BlobPtr> blobs = inputs;
  for (const nlohmann::json& j : layers) {
    const LayerHeader h = read_layer_header(j);
    std::vector<BlobPtr> bottoms;
    for (const std::string& name : h.bottoms) {
      const auto it = blobs.find(name);
      bottoms.push_back(it == blobs.end() ? nullptr : it->second);
    }
    for (LayerPtr& layer : create_layer_with_casts(j, bottoms, ctx)) {
      for (const BlobPtr& top : layer->tops())
        blobs[top->name()] = top;
      layers_.push_back(std::move(layer));
    }
  }
  EMBER_CHECK(!layers_.empty(), "a network needs at least its loss layer");
  loss_ = dynamic_cast<LossLayer*>(layers_.back().get());
  if (loss_ == nullptr) {
    EMBER_THROW_AS(ConfigError, "layer ", layers_.back()->describe(),
                   ": the last layer must be a loss");
  }
}

void DenseNetwork::bind() {
  for (LayerPtr& layer : layers_)
    layer->bind();
  std::vector<Layer*> raw;
  for (LayerPtr& layer : layers_)
    raw.push_back(layer.get());
  chained_ = chain_fully_connected_layers(raw);
}

void DenseNetwork::forward(bool training, StreamHandle stream) {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (i == first_use_ && hooks_.before_first_use) hooks_.before_first_use(stream);
    if (timer_ != nullptr) timer_->begin(forward_parts_[i], stream);
    layers_[i]->forward(training, stream);
  }
  if (first_use_ == layers_.size() && hooks_.before_first_use) hooks_.before_first_use(stream);
}

void DenseNetwork::backward(StreamHandle stream) {
  // Every layer that writes a gradient of the hooked inputs reads them (or a view of them) and
  // so comes at or after first_use_: past it, their gradients are final.
  if (first_use_ == layers_.size() && hooks_.gradients_final) hooks_.gradients_final(stream);
  for (std::size_t i = layers_.size(); i-- > 0;) {
    if (layers_[i]->needs_backward()) {
      if (timer_ != nullptr) timer_->begin(backward_parts_[i], stream);
      layers_[i]->backward(stream);
    }
    if (i == first_use_ && hooks_.gradients_final) hooks_.gradients_final(stream);
  }
}

void DenseNetwork::set_input_hooks(InputHooks hooks) {
  hooks_ = std::move(hooks);
  first_use_ = layers_.size();
  for (std::size_t i = 0; i < layers_.size() && first_use_ == layers_.size(); ++i) {
    for (const BlobPtr& bottom : layers_[i]->bottoms()) {
      if (std::find(hooks_.inputs.begin(), hooks_.inputs.end(), bottom.get()) !=
          hooks_.inputs.end()) {
        first_use_ = i;
        break;
      }
    }
  }
}

void DenseNetwork::set_part_timer(PartTimer* timer) {
  timer_ = timer;
  forward_parts_.clear();
  backward_parts_.clear();
  if (timer_ == nullptr) return;
  const std::vector<LayerPart> parts = classify_layer_parts(layers_);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::string name = timer_->by_layer()
                                 ? cat(layer_part_name(parts[i]), ": ", layers_[i]->name(), " (",
                                       layers_[i]->type(), ")")
                                 : std::string(layer_part_name(parts[i]));
    forward_parts_.push_back(name + " forward");
    backward_parts_.push_back(name + " backward");
  }
}

}  // namespace ember::network
