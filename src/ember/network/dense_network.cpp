#include "ember/network/dense_network.hpp"

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
    if (timer_ != nullptr) timer_->begin(forward_parts_[i], stream);
    layers_[i]->forward(training, stream);
  }
}

void DenseNetwork::backward(StreamHandle stream) {
  for (std::size_t i = layers_.size(); i-- > 0;) {
    if (!layers_[i]->needs_backward()) continue;
    if (timer_ != nullptr) timer_->begin(backward_parts_[i], stream);
    layers_[i]->backward(stream);
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
