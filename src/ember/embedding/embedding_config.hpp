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
  // HybridSparseEmbedding: the frequent keys replicated on every rank (data parallel, their
  // gradients all-reduced), the others as LocalizedSlotOneHot (slot s on rank s mod D).
  Hybrid,
};
enum class Combiner : std::uint8_t { Sum, Mean };

const char* embedding_type_name(EmbeddingType type);
const char* combiner_name(Combiner combiner);
constexpr bool is_localized(EmbeddingType t) {
  return t != EmbeddingType::DistributedSlotHash;
}
// Types whose row is the key minus its slot's offset (every key of slot_size_array has a row).
constexpr bool is_onehot(EmbeddingType t) {
  return t == EmbeddingType::LocalizedSlotOneHot || t == EmbeddingType::Hybrid;
}

// HugeCTR's hybrid "communication_type": which of its collectives HugeCTR runs. Ember runs its
// own collectives either way; the type picks HugeCTR's count threshold for frequent categories
// (hybrid_frequent.hpp).
enum class HybridCommunication : std::uint8_t {
  IB_NVLink,
  IB_NVLink_Hierarchical,
  NVLink_SingleNode
};
const char* hybrid_communication_name(HybridCommunication c);

// How a HybridSparseEmbedding picks its frequent categories (Ember's "frequent_rule"): HugeCTR's
// threshold for the communication_type, or the one that minimises the bytes the layer moves per
// step (hybrid_frequent.hpp). Which rows are frequent never changes what the model computes.
enum class FrequentRule : std::uint8_t { HugeCTR, Traffic };
const char* frequent_rule_name(FrequentRule r);

// HybridSparseEmbedding's keys of sparse_embedding_hparam (HugeCTR's names and defaults).
struct HybridConfig {
  // Training batches counted to find the frequent categories (HugeCTR's statistics pass); unset
  // (-1): the solver's num_iterations_statistics, 20 by default.
  std::int64_t num_iterations_statistics = -1;
  // At most this many x the larger of the training and evaluation batch sizes are frequent
  // (HugeCTR's unit for the key).
  std::int64_t max_num_frequent_categories = 1;
  double p_dup_max = 0.01;
  double max_all_reduce_bandwidth = 1.3e11;
  double max_all_to_all_bandwidth = 1.9e11;
  double efficiency_bandwidth_ratio = 1.0;
  HybridCommunication communication = HybridCommunication::IB_NVLink;
  FrequentRule rule = FrequentRule::HugeCTR;
  // The frequent categories (keys with their slot offsets), ascending, the same on every rank:
  // chosen from the training data before the layer is built (choose_frequent_categories); empty
  // until then (every key infrequent: the layer then trains as LocalizedSlotSparseEmbeddingOneHot).
  std::vector<std::int64_t> frequent_keys;
};

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
  // HybridSparseEmbedding only.
  HybridConfig hybrid;
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
  // The vocabulary of slot_size_array (the sum of the slot sizes).
  std::int64_t vocabulary() const;
  // Checks the numbers; throws ConfigError naming the layer and key.
  void validate() const;
  // The hybrid keys and the frequent categories (part of validate()).
  void validate_hybrid() const;
};

// Parses one embedding layer object of HugeCTR's "layers" list through the configuration reader
// (core/config_reader.hpp): unknown keys are a ConfigError naming the layer and the key path
// ("sparse_embedding_hparam.combiner"); "load_factor" is accepted and ignored; the optional
// "storage" object is Ember's (storage_config.hpp); HybridSparseEmbedding also reads HugeCTR's
// hybrid keys (HybridConfig; the buffer-sizing and index-precomputing ones are accepted and
// ignored). `input` is the Data
// layer's sparse input named by "bottom"; `key_dtype` is u32 (solver input_key_type I32) or i64
// (I64).
EmbeddingConfig parse_embedding_layer(const nlohmann::json& layer, const SparseInputSpec& input,
                                      DType key_dtype, std::uint64_t seed);

}  // namespace ember::embedding
