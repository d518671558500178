#include "ember/train/model_config.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/path_check.hpp"
#include "ember/network/dense_network.hpp"
#include "ember/network/layer_registry.hpp"
#include "ember/optim/optimizer_json.hpp"

namespace ember::train {

namespace {

using nlohmann::json;

bool is_embedding_type(const std::string& type) {
  return type == "DistributedSlotSparseEmbeddingHash" ||
         type == "LocalizedSlotSparseEmbeddingHash" ||
         type == "LocalizedSlotSparseEmbeddingOneHot" || type == "HybridSparseEmbedding";
}

void note_alias(const std::string& where, const std::string& old_name,
                const std::string& new_name) {
  log_once("alias:" + where + old_name, spdlog::level::info,
           where + ": accepting HugeCTR's older '" + old_name + "' as '" + new_name + "'");
}

// Rewrites older HugeCTR spellings into the v3 ones the parsers know.
void normalise_aliases(json& root) {
  if (auto opt = root.find("optimizer"); opt != root.end() && opt->is_object()) {
    if (auto hp = opt->find("adam_hparam"); hp != opt->end() && hp->is_object()) {
      if (hp->contains("alpha") && !hp->contains("learning_rate")) {
        (*hp)["learning_rate"] = (*hp)["alpha"];
        hp->erase("alpha");
        note_alias("optimizer.adam_hparam", "alpha", "learning_rate");
      }
    }
  }
  auto layers = root.find("layers");
  if (layers == root.end() || !layers->is_array()) return;
  for (json& layer : *layers) {
    if (!layer.is_object()) continue;
    const std::string name = layer.value("name", std::string("?"));
    if (layer.value("type", std::string()) == "Multiply") {
      layer["type"] = "WeightMultiply";
      note_alias("layer '" + name + "'", "Multiply", "WeightMultiply");
    }
    if (auto opt = layer.find("optimizer"); opt != layer.end() && opt->is_object()) {
      if (auto hp = opt->find("adam_hparam"); hp != opt->end() && hp->is_object() &&
                                              hp->contains("alpha") &&
                                              !hp->contains("learning_rate")) {
        (*hp)["learning_rate"] = (*hp)["alpha"];
        hp->erase("alpha");
        note_alias("layer '" + name + "' optimizer", "alpha", "learning_rate");
      }
    }
    if (auto hp = layer.find("sparse_embedding_hparam"); hp != layer.end() && hp->is_object()) {
      if (hp->contains("vocabulary_size") && !hp->contains("max_vocabulary_size_per_gpu") &&
          !hp->contains("workspace_size_per_gpu_in_mb")) {
        // HugeCTR 2.x sized the table for the whole vocabulary; holding all of it on every
        // device is the safe reading.
        (*hp)["max_vocabulary_size_per_gpu"] = (*hp)["vocabulary_size"];
        note_alias("layer '" + name + "'", "vocabulary_size", "max_vocabulary_size_per_gpu");
      }
      if (hp->contains("vocabulary_size")) hp->erase("vocabulary_size");
    }
  }
}

// Checks the graph of tensor names (see the header comment).
void check_graph(const ModelConfig& c, const std::vector<network::LayerHeader>& headers) {
  struct Producer {
    std::string layer;
    std::size_t index;
  };
  std::map<std::string, Producer> produced;
  std::map<std::string, std::string> consumer;
  std::vector<std::string> order;  // tops in production order, for the unused check
  auto produce = [&](const std::string& top, const std::string& layer, std::size_t index) {
    if (auto it = produced.find(top); it != produced.end()) {
      EMBER_THROW_AS(ConfigError, "layer '", layer, "': top '", top,
                     "' is already produced by layer '", it->second.layer, "'");
    }
    produced[top] = {layer, index};
    order.push_back(top);
  };
  const std::string data_name = c.data.name;
  produce(c.data.label_top, data_name, 0);
  if (c.data.dense_dim > 0) produce(c.data.dense_top, data_name, 0);
  for (const auto& s : c.data.sparse)
    produce(s.top, data_name, 0);
  for (std::size_t i = 1; i < headers.size(); ++i) {
    const network::LayerHeader& h = headers[i];
    const std::string& name = h.name;
    const std::string where = "layer '" + name + "'";
    const auto& bottoms = h.bottoms;
    const auto& tops = h.tops;
    for (const std::string& b : bottoms) {
      if (std::find(tops.begin(), tops.end(), b) != tops.end()) {
        EMBER_THROW_AS(ConfigError, where, ": bottom '", b, "' is also its own top");
      }
      if (produced.count(b) == 0) {
        EMBER_THROW_AS(ConfigError, where, ": bottom '", b,
                       "' is not the top of any earlier layer (layers are listed bottom to top)");
      }
      if (auto it = consumer.find(b); it != consumer.end()) {
        EMBER_THROW_AS(ConfigError, where, ": tensor '", b, "' is already read by layer '",
                       it->second,
                       "'; a tensor has one reader (duplicate it with a Slice layer, "
                       "as HugeCTR's configurations do)");
      }
      consumer[b] = name;
    }
    for (const std::string& t : tops)
      produce(t, name, i);
  }
  for (const std::string& t : order) {
    if (consumer.count(t) == 0 && t != c.loss_top) {
      EMBER_THROW_AS(ConfigError, "layer '", produced[t].layer, "': top '", t,
                     "' is never used (only the loss's top may be left unread)");
    }
  }
}

// Builds the dense layers once on the host, reserving but allocating nothing, so that unknown or
// missing keys and shape mismatches are reported when the configuration is read, not later.
void dry_build(const ModelConfig& c) {
  auto store = std::make_shared<network::ParameterStore>(Place::host());
  network::BuildContext ctx(network::BuildOptions{}, store);
  std::map<std::string, network::BlobPtr> inputs;
  const Place host = Place::host();
  inputs[c.data.label_top] =
      network::make_input_blob(c.data.label_top, {1, c.data.label_dim}, DType::F32, host, false);
  if (c.data.dense_dim > 0) {
    inputs[c.data.dense_top] =
        network::make_input_blob(c.data.dense_top, {1, c.data.dense_dim}, DType::F32, host, false);
  }
  for (const auto& e : c.embeddings) {
    inputs[e.top] =
        network::make_input_blob(e.top, {1, e.slot_num, e.vec_size}, DType::F32, host, true);
  }
  network::DenseNetwork network(c.dense_layers, inputs, ctx);
}

// Every layer's name and type, and past the Data layer its bottoms and tops, so that the checks
// can name layers by name.
std::vector<network::LayerHeader> read_headers(const json& layers) {
  std::vector<network::LayerHeader> headers;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    ConfigReader layer(layers[i], cat("layers[", i, "]"));
    if (i > 0) {
      headers.push_back(network::read_layer_header(layer));
      continue;
    }
    // The Data layer has no "bottom" or "top"; parse_data_layer reads it whole.
    headers.push_back({layer.string("name"), layer.string("type"), {}, {}});
    if (headers[0].type != "Data") {
      EMBER_THROW_AS(ConfigError, "layer '", headers[0].name,
                     "': the first layer must be the Data layer, got type '", headers[0].type, "'");
    }
  }
  return headers;
}

// Keys of HugeCTR's top level that Ember accepts and ignores.
constexpr IgnoredKey kIgnoredTopLevelKeys[] = {
    {"all_reduce", "Ember's all-reduce needs no tuning keys"},
};

}  // namespace

const embedding::EmbeddingConfig* ModelConfig::embedding_reading(
    const std::string& sparse_top) const {
  for (const auto& e : embeddings) {
    if (e.bottom == sparse_top) return &e;
  }
  return nullptr;
}

ModelConfig parse_model_config(json root, const std::string& where) {
  normalise_aliases(root);
  // HugeCTR's first format kept the data reader in a top-level "data" object; v3 (which Ember
  // reads) made it the first layer. Say so rather than name an unknown key.
  if (root.is_object() && root.contains("data") && root["data"].is_object()) {
    EMBER_THROW_AS(ConfigError, where,
                   ": a top-level \"data\" object is HugeCTR's older configuration format; Ember "
                   "reads the v3 format, where the data reader is the first entry of \"layers\" "
                   "(\"type\": \"Data\", with \"source\", \"eval_source\", \"label\", "
                   "\"dense\" and \"sparse\"; configs/ holds examples)");
  }
  ConfigReader r(root, where);
  const json& solver = r.raw("solver");
  const json& optimizer = r.raw("optimizer");
  const json& layers = r.raw("layers");
  r.ignore(kIgnoredTopLevelKeys);
  r.finish();
  ModelConfig c;
  c.source = where;
  c.solver = parse_solver(solver, "solver");
  {
    ConfigReader block(optimizer, "optimizer");
    c.optimizer = optim::parse_optimizer(block);
  }
  if (!layers.is_array() || layers.empty()) r.invalid("layers", "a non-empty list", layers);
  const std::vector<network::LayerHeader> headers = read_headers(layers);
  c.data = data::parse_data_layer(layers[0], cat("layer '", headers[0].name, "' (Data)"));
  c.data.name = headers[0].name;
  std::set<std::string> known_dense;
  for (const std::string& t : network::dense_layer_types())
    known_dense.insert(t);
  std::size_t losses = 0;
  for (std::size_t i = 1; i < layers.size(); ++i) {
    const json& layer = layers[i];
    const std::string& name = headers[i].name;
    const std::string& type = headers[i].type;
    if (type == "Data") {
      EMBER_THROW_AS(ConfigError, "layer '", name, "': only the first layer may be a Data layer");
    }
    if (is_embedding_type(type)) {
      if (!c.dense_layers.empty()) {
        EMBER_THROW_AS(ConfigError, "layer '", name,
                       "': embeddings come before the dense layers (right after the Data layer)");
      }
      const auto& bottoms = headers[i].bottoms;
      const auto input = std::find_if(c.data.sparse.begin(), c.data.sparse.end(),
                                      [&](const data::SparseInputConfig& s) {
                                        return bottoms.size() == 1 && s.top == bottoms[0];
                                      });
      if (input == c.data.sparse.end()) {
        EMBER_THROW_AS(ConfigError, "layer '", name, "' (", type,
                       "): bottom must be one sparse input of the Data layer, got ",
                       layer["bottom"].dump());
      }
      embedding::SparseInputSpec spec{input->top, input->slot_num,
                                      input->max_feature_num_per_sample};
      c.embeddings.push_back(embedding::parse_embedding_layer(
          layer, spec, c.solver.key_type, c.solver.seed + 1000003 * (c.embeddings.size() + 1)));
      c.embeddings.back().value_dtype = c.solver.embedding_dtype;
      c.embeddings.back().stochastic_rounding = c.solver.embedding_stochastic_rounding;
      continue;
    }
    if (known_dense.count(type) == 0) {
      EMBER_THROW_AS(ConfigError, "layer '", name, "': unknown layer type '", type, "'");
    }
    if (losses > 0) {
      EMBER_THROW_AS(ConfigError, "layer '", name,
                     "': layers after the loss layer are not allowed");
    }
    if (network::is_loss_type(type)) {
      ++losses;
      if (headers[i].tops.size() != 1) {
        EMBER_THROW_AS(ConfigError, "layer '", name, "': a loss has exactly one top");
      }
      c.loss_top = headers[i].tops[0];
    }
    c.dense_layers.push_back(layer);
  }
  if (losses == 0) {
    EMBER_THROW_AS(ConfigError, where,
                   ": no loss layer (BinaryCrossEntropyLoss, CrossEntropyLoss or "
                   "MultiCrossEntropyLoss) at the end of 'layers'");
  }
  check_graph(c, headers);
  dry_build(c);
  c.json = std::move(root);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path,
                              const std::vector<std::string>& overrides) {
  if (const std::string problem = file_problem(path); !problem.empty()) {
    EMBER_THROW_AS(ConfigError, "the configuration '", path.string(), "' ", problem);
  }
  std::ifstream in(path);
  if (!in) EMBER_THROW_AS(ConfigError, "cannot open the configuration ", path.string());
  json root;
  try {
    root = json::parse(in, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    // nlohmann reports a byte offset; turn it into a line and column.
    std::ifstream again(path);
    std::string text((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    EMBER_THROW_AS(ConfigError, path.string(), ":", line, ":", column, ": not valid JSON (",
                   e.what(), ")");
  }
  for (const std::string& o : overrides)
    apply_override(root, o);
  return parse_model_config(std::move(root), path.string());
}

void apply_override(json& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    EMBER_THROW_AS(ConfigError, "--set '", assignment,
                   "': expected path=value, e.g. solver.batchsize=1024");
  }
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // a bare string such as a file name
  }
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');)
    parts.push_back(part);
  json* node = &root;
  std::string walked;
  bool in_layer = false;  // node is one layer's object (an element of "layers")
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    walked += (walked.empty() ? "" : ".") + part;
    if (node->is_array()) {
      // A layer (or list entry) by index, or by its "name".
      std::size_t index = node->size();
      if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
        if (part.size() < 10) index = std::min<std::size_t>(std::stoul(part), node->size());
      } else {
        for (std::size_t k = 0; k < node->size(); ++k) {
          const json& item = (*node)[k];
          if (item.is_object() && item.value("name", std::string()) == part) index = k;
        }
      }
      json* next = index < node->size() ? &(*node)[index] : nullptr;
      if (next == nullptr) {
        EMBER_THROW_AS(ConfigError, "--set ", path, ": no entry '", part, "' in '",
                       walked.substr(0, walked.size() - part.size() - 1), "'");
      }
      if (last) {
        if (value.is_null()) {
          node->erase(index);
        } else {
          *next = value;
        }
        return;
      }
      in_layer = i == 1 && parts[0] == "layers" && next->is_object();
      node = next;
    } else if (node->is_object()) {
      if (last && value.is_null()) {
        if (node->erase(part) == 0) {
          EMBER_THROW_AS(ConfigError, "--set ", assignment, ": '", walked,
                         "' does not exist (null deletes a key)");
        }
        return;
      }
      if (last) {
        (*node)[part] = value;
        return;
      }
      // A layer may gain a nested object that it lacks (Ember's extensions, e.g.
      // `layers.e1.storage.location=host`); the strict reader then checks its keys. Elsewhere a
      // missing key on the way is an error here.
      auto it = node->find(part);
      if (it == node->end()) {
        if (!in_layer) {
          EMBER_THROW_AS(ConfigError, "--set ", path, ": '", walked, "' does not exist");
        }
        it = node->emplace(part, json::object()).first;
      }
      in_layer = false;
      node = &*it;
    } else {
      EMBER_THROW_AS(ConfigError, "--set ", path, ": '",
                     walked.substr(0, walked.size() - part.size() - 1),
                     "' is not an object or a list");
    }
  }
}

}  // namespace ember::train
