#include "ember/network/fc_chain.hpp"

#include <unordered_map>

#include "ember/core/log.hpp"
#include "ember/network/layers/dropout_layer.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"

namespace ember::network {

int chain_fully_connected_layers(const std::vector<Layer*>& layers, StreamHandle stream) {
  std::unordered_map<const Blob*, int> consumers;
  std::unordered_map<const Blob*, FullyConnectedLayer*> producer_of;
  for (Layer* layer : layers) {
    for (const auto& b : layer->bottoms())
      ++consumers[b.get()];
    if (auto* fc = dynamic_cast<FullyConnectedLayer*>(layer)) {
      producer_of[fc->tops()[0].get()] = fc;
    }
  }
  int chained = 0;
  for (Layer* layer : layers) {
    auto* fc = dynamic_cast<FullyConnectedLayer*>(layer);
    if (fc == nullptr || !fc->place().is_cuda()) continue;
    const Blob* input = fc->bottoms()[0].get();
    const auto it = producer_of.find(input);
    if (it == producer_of.end() || consumers[input] != 1) continue;
    FullyConnectedLayer* producer = it->second;
    if (producer->chained_to_consumer() || !producer->can_produce_mask()) continue;
    if (fc->chain_from(*producer, stream)) ++chained;
  }
  // FC(ReLU) -> Dropout: the dropout's backward applies the ReLU gradient as it applies its
  // mask (both zero an element's gradient), which saves the FC layer's pass over its output.
  for (Layer* layer : layers) {
    auto* dropout = dynamic_cast<DropoutLayer*>(layer);
    if (dropout == nullptr || !dropout->place().is_cuda()) continue;
    const Blob* input = dropout->bottoms()[0].get();
    const auto it = producer_of.find(input);
    if (it == producer_of.end() || consumers[input] != 1) continue;
    FullyConnectedLayer* fc = it->second;
    if (!fc->relu() || fc->chained_to_consumer() || fc->leaves_relu_gradient_to_consumer()) {
      continue;
    }
    fc->leave_relu_gradient_to_consumer();
    dropout->apply_relu_gradient_of_bottom();
  }
  for (Layer* layer : layers) {
    auto* fc = dynamic_cast<FullyConnectedLayer*>(layer);
    if (fc == nullptr) continue;
    fc->plan(stream);
    // What each product runs as, and what the search compared (EMBER_LOG_LEVEL=debug).
    if (fc->place().is_cuda()) EMBER_LOG_DEBUG("{}: {}", fc->name(), fc->plan_summary());
  }
  return chained;
}

}  // namespace ember::network
