// What one sparse embedding layer is: read from HugeCTR's layer JSON plus the Data layer's
// sparse input it consumes.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/embedding/storage_config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::embedding {

enum class EmbeddingType : std::uint8_t {
  DistributedSlotHash,  // DistributedSlotSparseEmbeddingHash: key k lives on rank k mod D
  LocalizedSlotHash,    // LocalizedSlotSparseEmbeddingHash: slot s lives on rank s mod D
  LocalizedSlotOneHot,  // LocalizedSlotSparseEmbeddingOneHot: row = key, no hash table
};
enum class Combiner : std::uint8_t { Sum, Mean };

const char* embedding_type_name(EmbeddingType type);
const char* combiner_name(Combiner combiner);
constexpr bool is_localized(EmbeddingType t) {
  return t != EmbeddingType::DistributedSlotHash;
}

// The Data layer's sparse input an embedding reads (one entry of its "sparse" list).
struct SparseInputSpec {
  std::string top;
  std::int64_t slot_num = 1;
  std::int64_t max_feature_num_per_sample = 0;  // 0: unchecked
};

struct EmbeddingConfig {
  std::string name = "sparse_embedding";  // the layer's name, used in every message
  EmbeddingType type = EmbeddingType::DistributedSlotHash;
  std::string bottom, top;
  std::int64_t vec_size = 16;
  Combiner combiner = Combiner::Sum;
  // Capacity: exactly one of these when the layer is read from JSON (OneHot and LocalizedSlot
  // with slot_size_array size their tables from the slot sizes instead).
  double workspace_size_per_gpu_in_mb = 0;
  std::int64_t max_vocabulary_size_per_gpu = 0;
  std::vector<std::int64_t> slot_size_array;
  // The layer's own optimizer block, else the model's.
  std::optional<optim::OptimizerConfig> optimizer;
  // Where the rows live (Ember's "storage" object): device, host with a device cache, or auto.
  StorageConfig storage;
  // From the Data layer and the solver.
  std::int64_t slot_num = 1;
  std::int64_t max_feature_num_per_sample = 0;
  DType key_dtype = DType::U32;
  std::uint64_t seed = 0;
  // New rows start uniform in [-init_bound, init_bound] (HugeCTR's hash embeddings: 0.05).
  float init_bound = 0.05f;
  // How the vectors are stored: F32, F16 or BF16 (the solver's "embedding_dtype"). Optimizer
  // states stay f32; a 16-bit weight is stepped in f32 and rounded stochastically, or to
  // nearest (embedding_values.hpp says why stochastic is the default).
  DType value_dtype = DType::F32;
  bool stochastic_rounding = true;

  // Rows one rank can hold, for hash types sized from the workspace or vocabulary keys:
  // workspace_size_per_gpu_in_mb * 2^20 / (4 * vec_size), or max_vocabulary_size_per_gpu.
  std::int64_t configured_capacity() const;
  // How messages name the layer: `layer '<name>' (<type>)`, as the configuration reader does.
  std::string where() const;
  // Checks the numbers; throws ConfigError naming the layer and key.
  void validate() const;
};

// Parses one embedding layer object of HugeCTR's "layers" list through the configuration reader
// (core/config_reader.hpp): unknown keys are a ConfigError naming the layer and the key path
// ("sparse_embedding_hparam.combiner"); "load_factor" is accepted and ignored; the optional
// "storage" object is Ember's (storage_config.hpp). `input` is the Data
// layer's sparse input named by "bottom"; `key_dtype` is u32 (solver input_key_type I32) or i64
// (I64).
EmbeddingConfig parse_embedding_layer(const nlohmann::json& layer, const SparseInputSpec& input,
                                      DType key_dtype, std::uint64_t seed);

}  // namespace ember::embedding
