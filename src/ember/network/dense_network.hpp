// The dense part of a model, built from the configuration's dense layers connected by tensor
// names: the graph the layer registry's layers form over the input blobs (label, dense features,
// embedding outputs), with its loss last.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "ember/network/blob.hpp"
#include "ember/network/build_context.hpp"
#include "ember/network/layer.hpp"
#include "ember/network/layers/loss_layers.hpp"

namespace ember::network {

class DenseNetwork {
 public:
  // Creates the layers (reserving through `ctx`) on top of `inputs`, named blobs that the caller
  // owns and fills, with the casts mixed precision needs around them (precision.hpp). Call
  // bind() once `ctx` is allocated.
  DenseNetwork(const std::vector<nlohmann::json>& layers,
               const std::map<std::string, BlobPtr>& inputs, BuildContext& ctx);

  void bind();
  void forward(bool training, StreamHandle stream = nullptr);
  // Backward of every layer that needs it, from the loss down to the inputs' gradients.
  void backward(StreamHandle stream = nullptr);

  LossLayer& loss() { return *loss_; }
  const LossLayer& loss() const { return *loss_; }
  // The loss layer's first bottom: the logits the predictions come from.
  const Blob& logits() const { return *loss_->bottoms().at(0); }
  // In execution order, with the casts mixed precision inserts (precision.hpp).
  const std::vector<LayerPtr>& layers() const { return layers_; }
  // Fully connected pairs fused across layers (CUDA; see fc_chain.hpp).
  int chained_pairs() const { return chained_; }

 private:
  std::vector<LayerPtr> layers_;
  LossLayer* loss_ = nullptr;
  int chained_ = 0;
};

}  // namespace ember::network
