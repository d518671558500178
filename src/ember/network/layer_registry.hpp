// Building dense layers and losses from their HugeCTR JSON objects (spec/config.md).
//
// The caller (the network parser) resolves the "bottom" names to blobs; create_layer reads the
// rest: type, name, the layer's own keys (unknown keys, missing keys and wrong types are
// ConfigErrors naming the layer and the key), checks the bottoms' shapes (errors show expected
// and actual shapes) and creates the layer with its tops named from "top".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ember/core/config_reader.hpp"
#include "ember/network/layer.hpp"

namespace ember::network {

// The "name", "type", "bottom" and "top" of a layer object ("bottom"/"top": a string or a list).
struct LayerHeader {
  std::string name;
  std::string type;
  std::vector<std::string> bottoms;
  std::vector<std::string> tops;
};
// Reads the header through `layer` and names its owner `layer '<name>' (<type>)`, as every
// message about the layer does.
LayerHeader read_layer_header(ConfigReader& layer);
LayerHeader read_layer_header(const nlohmann::json& layer);

// True for the dense layer and loss types create_layer knows (not Data, not embeddings).
bool is_dense_layer_type(const std::string& type);
// What a layer type computes in on CUDA: in its bottoms' dtype (f32, f16 or bf16, accumulating
// in f32), or in f32 only: a network built for 16-bit activations casts around such a layer
// (create_layer_with_casts, precision.hpp). Unknown types answer BottomDtype.
enum class CudaCompute : std::uint8_t { BottomDtype, F32 };
CudaCompute cuda_compute(const std::string& type);
bool is_loss_type(const std::string& type);
std::vector<std::string> dense_layer_types();

// One layer of the graph, exactly as configured: its bottoms must already have dtypes it computes
// in (networks build through create_layer_with_casts, which sees to that).
LayerPtr create_layer(const nlohmann::json& layer, const std::vector<BlobPtr>& bottoms,
                      BuildContext& ctx);

}  // namespace ember::network
