// The dense part of a model, built from the configuration's dense layers connected by tensor
// names: the graph the layer registry's layers form over the input blobs (label, dense features,
// embedding outputs), with its loss last.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ember/core/part_timer.hpp"
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

  // Lets another stream produce some of the inputs and take their gradients, beside the rest of
  // the network: forward() calls `before_first_use(stream)` just before the first layer that
  // reads any of `inputs`, and backward() calls `gradients_final(stream)` as soon as no layer is
  // left that writes their gradients. The caller makes `stream` wait there for the other stream,
  // and records there what the other stream waits for (the embeddings' overlap, replica.hpp).
  struct InputHooks {
    std::vector<const Blob*> inputs;
    std::function<void(StreamHandle)> before_first_use, gradients_final;
  };
  void set_input_hooks(InputHooks hooks);

  // Profiling: with a timer, forward() and backward() open a part before each layer, named
  // "<part> forward" / "<part> backward" by the layer's part of the model (layer_parts.hpp);
  // nullptr (the default) times nothing. The timer must outlive its use here.
  void set_part_timer(PartTimer* timer);

 private:
  std::vector<LayerPtr> layers_;
  LossLayer* loss_ = nullptr;
  int chained_ = 0;
  PartTimer* timer_ = nullptr;
  std::vector<std::string> forward_parts_, backward_parts_;  // per layer, with a timer
  InputHooks hooks_;
  std::size_t first_use_ = 0;  // the first layer reading one of hooks_.inputs (or the count)
};

}  // namespace ember::network
