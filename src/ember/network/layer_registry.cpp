#include "ember/network/layer_registry.hpp"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "ember/network/layers/factories.hpp"

namespace ember::network {

namespace {

struct LayerType {
  factories::Factory factory;
  CudaCompute cuda = CudaCompute::BottomDtype;
};

const std::map<std::string, LayerType>& registry() {
  static const std::map<std::string, LayerType> table = {
      {"Add", {factories::add}},
      {"BatchNorm", {factories::batch_norm}},
      {"BinaryCrossEntropyLoss", {factories::binary_cross_entropy_loss}},
      {"Cast", {factories::cast}},
      {"Concat", {factories::concat}},
      {"CrossEntropyLoss", {factories::cross_entropy_loss}},
      {"DotProduct", {factories::dot_product}},
      {"Dropout", {factories::dropout}},
      {"ELU", {factories::elu}},
      {"ElementwiseMultiply", {factories::elementwise_multiply}},
      {"FmOrder2", {factories::fm_order2}},
      {"FusedInnerProduct", {factories::fused_inner_product}},
      {"FusedReshapeConcat", {factories::fused_reshape_concat}},
      {"FusedReshapeConcatGeneral", {factories::fused_reshape_concat_general}},
      {"GRU", {factories::gru, CudaCompute::F32}},
      {"Gather", {factories::gather}},
      {"InnerProduct", {factories::inner_product}},
      {"Interaction", {factories::interaction}},
      {"MatrixMultiply", {factories::matrix_multiply}},
      {"MultiCross", {factories::multi_cross}},
      {"MultiCrossEntropyLoss", {factories::multi_cross_entropy_loss}},
      {"MultiHeadAttention", {factories::multi_head_attention}},
      {"PReLU_Dice", {factories::prelu_dice}},
      {"ReLU", {factories::relu}},
      {"ReLUHalf", {factories::relu}},
      {"ReduceMean", {factories::reduce_mean}},
      {"ReduceSum", {factories::reduce_sum}},
      {"Reshape", {factories::reshape}},
      {"Scale", {factories::scale}},
      {"Sigmoid", {factories::sigmoid}},
      {"Slice", {factories::slice}},
      {"Softmax", {factories::softmax}},
      {"Sub", {factories::sub}},
      {"WeightMultiply", {factories::weight_multiply}},
  };
  return table;
}

// A tensor name or a non-empty list of them.
std::vector<std::string> tensor_names(ConfigReader& r, const char* key) {
  std::vector<std::string> names = r.string_list(key);
  const bool any_empty =
      std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); });
  if (names.empty() || any_empty) {
    r.invalid(key, "a tensor name or a non-empty list of names", r.raw(key));
  }
  return names;
}

// How messages name a layer before its name is known: by its JSON.
std::string unnamed(const nlohmann::json& layer) {
  return layer.is_object() ? cat("the layer ", config_detail::describe(layer)) : "a layer";
}

}  // namespace

LayerHeader read_layer_header(ConfigReader& r) {
  LayerHeader h;
  h.name = r.string("name");
  if (h.name.empty()) r.invalid("name", "a non-empty string", h.name);
  r.set_owner(cat("layer '", h.name, "'"));
  h.type = r.string("type");
  r.set_owner(cat("layer '", h.name, "' (", h.type, ")"));
  h.bottoms = tensor_names(r, "bottom");
  h.tops = tensor_names(r, "top");
  return h;
}

LayerHeader read_layer_header(const nlohmann::json& layer) {
  ConfigReader r(layer, unnamed(layer));
  return read_layer_header(r);
}

bool is_dense_layer_type(const std::string& type) {
  return registry().count(type) != 0;
}

bool is_loss_type(const std::string& type) {
  return type == "BinaryCrossEntropyLoss" || type == "CrossEntropyLoss" ||
         type == "MultiCrossEntropyLoss";
}

CudaCompute cuda_compute(const std::string& type) {
  const auto it = registry().find(type);
  return it == registry().end() ? CudaCompute::BottomDtype : it->second.cuda;
}

std::vector<std::string> dense_layer_types() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry())
    out.push_back(name);
  return out;
}

LayerPtr create_layer(const nlohmann::json& layer, const std::vector<BlobPtr>& bottoms,
                      BuildContext& ctx) {
  ConfigReader json(layer, unnamed(layer));
  const LayerHeader h = read_layer_header(json);
  const std::string& owner = json.owner();
  const auto it = registry().find(h.type);
  if (it == registry().end()) {
    std::string known;
    for (const auto& t : dense_layer_types())
      known += (known.empty() ? "" : ", ") + t;
    throw ConfigError(cat("layer '", h.name, "': unknown layer type '", h.type,
                          "' (dense layer types: ", known, ")"));
  }
  if (bottoms.size() != h.bottoms.size()) {
    throw ConfigError(cat(owner, ": ", h.bottoms.size(), " bottom name(s) but ", bottoms.size(),
                          " tensor(s) were given"));
  }
  for (std::size_t i = 0; i < bottoms.size(); ++i) {
    if (bottoms[i] == nullptr) {
      throw ConfigError(cat(owner, ": bottom '", h.bottoms[i], "' does not exist"));
    }
    for (const auto& t : h.tops) {
      if (t == h.bottoms[i]) {
        throw ConfigError(cat(owner, ": tensor '", t, "' is both a bottom and a top"));
      }
    }
  }
  LayerSpec spec{h.name, h.type, bottoms, h.tops};
  LayerPtr out = it->second.factory(json, spec, ctx);
  json.finish();
  return out;
}

}  // namespace ember::network
