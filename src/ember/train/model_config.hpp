// A whole HugeCTR v3 model configuration, read and checked: solver, optimizer, the Data layer,
// the sparse embeddings and the dense layers, connected by tensor names.
//
// Checks (each error names the layer and the key or tensor): unknown top-level keys; the first
// layer must be Data; embeddings read sparse inputs of the Data layer; every bottom must be a top
// of an earlier layer; a top may be produced once; a layer may not read its own top; each tensor
// has exactly one consumer (HugeCTR's configurations duplicate a tensor with Slice); every top
// but the loss's is consumed; exactly one loss layer, last.
//
// Every block is read by the configuration reader (core/config_reader.hpp): its rules and its
// message format, `<where>: "<key>" must be ..., got ...`. Older HugeCTR spellings are
// rewritten before reading and logged once: Adam's "alpha" (learning_rate), layer type
// "Multiply" (WeightMultiply), embeddings' "vocabulary_size" (max_vocabulary_size_per_gpu); the
// solver reads "eval_batches" as max_eval_batches. Keys accepted and ignored are listed with
// their readers (the top level's "all_reduce", the solver's CUDA-graph switches, the Data
// layer's "async_param", the embeddings' "load_factor").
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "ember/data/data_config.hpp"
#include "ember/embedding/embedding_config.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/train/solver_config.hpp"

namespace ember::train {

struct ModelConfig {
  std::string source;   // the file it came from, for messages ("" when built in memory)
  nlohmann::json json;  // after overrides and alias normalisation
  SolverConfig solver;
  optim::OptimizerConfig optimizer;
  data::DataConfig data;
  std::vector<embedding::EmbeddingConfig> embeddings;
  std::vector<nlohmann::json> dense_layers;  // in order, the loss last
  std::string loss_top;                      // the loss layer's top

  // The embedding reading a given sparse input, by the input's top name (nullptr: none).
  const embedding::EmbeddingConfig* embedding_reading(const std::string& sparse_top) const;
};

// Reads and checks a configuration. `where` names it in messages (usually its path).
ModelConfig parse_model_config(nlohmann::json json, const std::string& where);

// Reads the file (JSON syntax errors name the file, line and column), applies the overrides
// ("solver.batchsize=1024", "optimizer.sgd_hparam.learning_rate=0.5", "layers.data.source=x",
// "layers.3.fc_param.num_output=64": a layer by name or index) in order, then checks it.
ModelConfig load_model_config(const std::filesystem::path& path,
                              const std::vector<std::string>& overrides = {});

// Applies one "path=value" override; the value is read as JSON when it parses, else as a string.
// "path=null" deletes the key (or the list entry). Throws ConfigError naming the path when a
// segment does not exist (the last may be new, unless it is being deleted).
void apply_override(nlohmann::json& json, const std::string& assignment);

}  // namespace ember::train
