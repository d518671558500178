// Internal: one factory per configuration type, each defined next to its layer (where its JSON
// keys are read). The registry (layer_registry.cpp) maps type names to these.
#pragma once

#include "ember/core/config_reader.hpp"
#include "ember/network/layer.hpp"

namespace ember::network::factories {

using Factory = LayerPtr (*)(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx);

LayerPtr relu(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr sigmoid(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr elu(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr prelu_dice(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr dropout(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr cast(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr inner_product(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr fused_inner_product(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr batch_norm(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr concat(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr reshape(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr slice(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr gather(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr fused_reshape_concat(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr fused_reshape_concat_general(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr gru(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr multi_head_attention(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr scale(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr interaction(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr fm_order2(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr multi_cross(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr weight_multiply(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr add(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr sub(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr elementwise_multiply(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr dot_product(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr reduce_sum(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr reduce_mean(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr softmax(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr matrix_multiply(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr binary_cross_entropy_loss(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr cross_entropy_loss(ConfigReader&, const LayerSpec&, BuildContext&);
LayerPtr multi_cross_entropy_loss(ConfigReader&, const LayerSpec&, BuildContext&);

}  // namespace ember::network::factories
