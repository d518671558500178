#include "ember/embedding/embedding_config.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <utility>

#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"
#include "ember/optim/optimizer_json.hpp"

namespace ember::embedding {

const char* embedding_type_name(EmbeddingType type) {
  switch (type) {
    case EmbeddingType::DistributedSlotHash:
      return "DistributedSlotSparseEmbeddingHash";
    case EmbeddingType::LocalizedSlotHash:
      return "LocalizedSlotSparseEmbeddingHash";
    case EmbeddingType::LocalizedSlotOneHot:
      return "LocalizedSlotSparseEmbeddingOneHot";
    case EmbeddingType::Hybrid:
      return "HybridSparseEmbedding";
  }
  return "?";
}

const char* hybrid_communication_name(HybridCommunication c) {
  switch (c) {
    case HybridCommunication::IB_NVLink:
      return "IB_NVLink";
    case HybridCommunication::IB_NVLink_Hierarchical:
      return "IB_NVLink_Hierarchical";
    case HybridCommunication::NVLink_SingleNode:
      return "NVLink_SingleNode";
  }
  return "?";
}

const char* frequent_rule_name(FrequentRule r) {
  return r == FrequentRule::HugeCTR ? "hugectr" : "traffic";
}

const char* combiner_name(Combiner combiner) {
  return combiner == Combiner::Sum ? "sum" : "mean";
}

std::int64_t EmbeddingConfig::configured_capacity() const {
  if (max_vocabulary_size_per_gpu > 0) return max_vocabulary_size_per_gpu;
  const double rows =
      workspace_size_per_gpu_in_mb * 1048576.0 / (4.0 * static_cast<double>(vec_size));
  return static_cast<std::int64_t>(std::floor(rows));
}

std::int64_t EmbeddingConfig::vocabulary() const {
  std::int64_t total = 0;
  for (std::int64_t s : slot_size_array)
    total += s;
  return total;
}

std::string EmbeddingConfig::where() const {
  return cat("layer '", name, "' (", embedding_type_name(type), ")");
}

void EmbeddingConfig::validate() const {
  const std::string w = where();
  if (vec_size < 1) {
    invalid_config(w, "sparse_embedding_hparam.embedding_vec_size", ">= 1", vec_size);
  }
  for (std::size_t i = 0; i < slot_size_array.size(); ++i) {
    if (slot_size_array[i] < 1) {
      invalid_config(w, cat("sparse_embedding_hparam.slot_size_array[", i, "]"), ">= 1",
                     slot_size_array[i]);
    }
  }
  auto fail = [&](auto... message) { EMBER_THROW_AS(ConfigError, w, ": ", message...); };
  if (slot_num < 1) fail("the sparse input has slot_num ", slot_num, "; it must be >= 1");
  if (key_dtype != DType::U32 && key_dtype != DType::I64) {
    fail("keys must be u32 (input_key_type I32) or i64 (I64), got ", dtype_name(key_dtype));
  }
  if (!(init_bound >= 0)) fail("init bound must be >= 0, got ", init_bound);
  if (value_dtype != DType::F32 && value_dtype != DType::F16 && value_dtype != DType::BF16) {
    fail("vectors are stored as f32, f16 or bf16 (the solver's \"embedding_dtype\"), not ",
         dtype_name(value_dtype));
  }
  if (!slot_size_array.empty() && static_cast<std::int64_t>(slot_size_array.size()) != slot_num) {
    fail("\"sparse_embedding_hparam.slot_size_array\" has ", slot_size_array.size(),
         " entries but the sparse input has slot_num ", slot_num);
  }
  const bool sized_by_slots =
      is_onehot(type) || (type == EmbeddingType::LocalizedSlotHash && !slot_size_array.empty());
  if (is_onehot(type) && slot_size_array.empty()) {
    fail(embedding_type_name(type),
         " needs \"sparse_embedding_hparam.slot_size_array\" (the row of a key is the key "
         "itself)");
  }
  if (type == EmbeddingType::Hybrid) validate_hybrid();
  if (!sized_by_slots) {
    if (workspace_size_per_gpu_in_mb <= 0 && max_vocabulary_size_per_gpu <= 0) {
      fail(
          "\"sparse_embedding_hparam\" needs workspace_size_per_gpu_in_mb or "
          "max_vocabulary_size_per_gpu");
    }
    if (configured_capacity() < 1) {
      fail("\"sparse_embedding_hparam.workspace_size_per_gpu_in_mb\" = ",
           workspace_size_per_gpu_in_mb, " holds no row of ", vec_size, " floats");
    }
  }
  if (optimizer) ember::optim::validate(*optimizer, w, "optimizer.");
  storage.validate(w);
}

void EmbeddingConfig::validate_hybrid() const {
  const std::string w = where();
  const HybridConfig& h = hybrid;
  const std::string hp = "sparse_embedding_hparam.";
  if (h.num_iterations_statistics < -1) {
    invalid_config(w, hp + "num_iterations_statistics", "an integer >= 0",
                   h.num_iterations_statistics);
  }
  if (h.max_num_frequent_categories < 0) {
    invalid_config(w, hp + "max_num_frequent_categories", "an integer >= 0",
                   h.max_num_frequent_categories);
  }
  const std::int64_t total = vocabulary();
  if (h.max_num_frequent_categories > total) {
    EMBER_THROW_AS(ConfigError, w, ": \"", hp,
                   "max_num_frequent_categories\" = ", h.max_num_frequent_categories,
                   " exceeds the vocabulary of ", total,
                   " keys (the sum of slot_size_array); the key counts in batch sizes, as in "
                   "HugeCTR: at most max_num_frequent_categories x the batch size keys are "
                   "frequent, so 1 already allows a whole batch's worth");
  }
  if (!(h.p_dup_max > 0 && h.p_dup_max <= 1)) {
    invalid_config(w, hp + "p_dup_max", "a number in (0, 1]", h.p_dup_max);
  }
  for (const auto& [key, value] :
       {std::pair<const char*, double>{"max_all_reduce_bandwidth", h.max_all_reduce_bandwidth},
        {"max_all_to_all_bandwidth", h.max_all_to_all_bandwidth},
        {"efficiency_bandwidth_ratio", h.efficiency_bandwidth_ratio}}) {
    if (!(value > 0) || !std::isfinite(value)) invalid_config(w, hp + key, "a number > 0", value);
  }
  if (storage.location == StorageLocation::Host) {
    EMBER_THROW_AS(ConfigError, w,
                   ": \"storage.location\" \"host\" is not supported by HybridSparseEmbedding "
                   "(its frequent rows are replicated on every device); use \"device\" or "
                   "\"auto\", or LocalizedSlotSparseEmbeddingOneHot for a host table");
  }
  const auto& keys = h.frequent_keys;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] < 0 || keys[i] >= total) {
      EMBER_THROW_AS(ConfigError, w, ": frequent category ", i, " is key ", keys[i],
                     ", outside the vocabulary [0, ", total, ") of slot_size_array");
    }
    if (i > 0 && keys[i] <= keys[i - 1]) {
      EMBER_THROW_AS(ConfigError, w, ": the frequent categories must be ascending and distinct; ",
                     "key ", keys[i], " (", i, ") follows ", keys[i - 1]);
    }
  }
}

namespace {

constexpr Named<EmbeddingType> kEmbeddingTypes[] = {
    {"DistributedSlotSparseEmbeddingHash", EmbeddingType::DistributedSlotHash},
    {"LocalizedSlotSparseEmbeddingHash", EmbeddingType::LocalizedSlotHash},
    {"LocalizedSlotSparseEmbeddingOneHot", EmbeddingType::LocalizedSlotOneHot},
    {"HybridSparseEmbedding", EmbeddingType::Hybrid},
};

constexpr Named<HybridCommunication> kHybridCommunication[] = {
    {"IB_NVLink", HybridCommunication::IB_NVLink},
    {"IB_NVLink_Hierarchical", HybridCommunication::IB_NVLink_Hierarchical},
    {"NVLink_SingleNode", HybridCommunication::NVLink_SingleNode},
};

constexpr Named<FrequentRule> kFrequentRules[] = {
    {"hugectr", FrequentRule::HugeCTR},
    {"traffic", FrequentRule::Traffic},
};

// HugeCTR's only hybrid_embedding_type.
enum class HybridLayout : std::uint8_t { Distributed };
constexpr Named<HybridLayout> kHybridLayouts[] = {{"Distributed", HybridLayout::Distributed}};

// HybridSparseEmbedding keys that size HugeCTR's buffers or choose whether it precomputes
// indices ahead: they change neither the model nor its results.
constexpr IgnoredKey kIgnoredHybridKeys[] = {
    {"max_num_infrequent_samples",
     "it sizes HugeCTR's all-to-all buffers; Ember sizes them from each batch"},
    {"use_train_precompute_indices",
     "Ember always finds a training batch's indices ahead, during the step before (the "
     "session's prefetch), with the same results"},
    {"use_eval_precompute_indices",
     "Ember finds an evaluation batch's indices in its forward, with the same results"},
};

// Keys HugeCTR's embeddings took that mean nothing here.
constexpr IgnoredKey kIgnoredHparamKeys[] = {
    {"load_factor", "tables size their hash slots themselves"},
};

// Layer keys of HugeCTR's embeddings that mean nothing here.
constexpr IgnoredKey kIgnoredLayerKeys[] = {
    {"plan_file",
     "HugeCTR's all-to-all plan for a localized embedding over several GPUs (its DCN and "
     "Wide&Deep multi-GPU samples name one); NCCL plans Ember's exchanges"},
};

// The one tensor name of "bottom" or "top": a string or a list of one string.
std::string one_name(ConfigReader& r, const char* key) {
  const auto names = r.string_list(key);
  if (names.size() != 1) r.invalid(key, "one tensor name", r.raw(key));
  return names.front();
}

void read_hybrid(ConfigReader& hp, HybridConfig& h) {
  h.num_iterations_statistics =
      hp.integer_or("num_iterations_statistics", -1, IntRange::at_least(0));
  h.max_num_frequent_categories = hp.integer_or(
      "max_num_frequent_categories", h.max_num_frequent_categories, IntRange::at_least(0));
  h.p_dup_max = hp.number_or("p_dup_max", h.p_dup_max, NumberRange{0, 1, true});
  h.max_all_reduce_bandwidth =
      hp.number_or("max_all_reduce_bandwidth", h.max_all_reduce_bandwidth, NumberRange::above(0));
  h.max_all_to_all_bandwidth =
      hp.number_or("max_all_to_all_bandwidth", h.max_all_to_all_bandwidth, NumberRange::above(0));
  h.efficiency_bandwidth_ratio = hp.number_or("efficiency_bandwidth_ratio",
                                              h.efficiency_bandwidth_ratio, NumberRange::above(0));
  h.communication = hp.choice_or("communication_type", h.communication, kHybridCommunication);
  h.rule = hp.choice_or("frequent_rule", h.rule, kFrequentRules);
  (void)hp.choice_or("hybrid_embedding_type", HybridLayout::Distributed, kHybridLayouts);
  hp.ignore(kIgnoredHybridKeys);
}

void read_hparams(ConfigReader& hp, EmbeddingConfig& c) {
  c.vec_size = hp.integer("embedding_vec_size");
  if (hp.has("combiner")) {
    // "sum" / "mean", or HugeCTR's 0 / 1.
    const auto& v = hp.raw("combiner");
    const auto index = ConfigReader::integer_value(v);
    if (v == "sum" || v == "mean") {
      c.combiner = v == "sum" ? Combiner::Sum : Combiner::Mean;
    } else if (index && (*index == 0 || *index == 1)) {
      c.combiner = *index == 0 ? Combiner::Sum : Combiner::Mean;
    } else {
      hp.invalid("combiner", "\"sum\", \"mean\", 0 or 1", v);
    }
  }
  c.workspace_size_per_gpu_in_mb =
      hp.number_or("workspace_size_per_gpu_in_mb", 0, NumberRange::at_least(0));
  c.max_vocabulary_size_per_gpu =
      hp.integer_or("max_vocabulary_size_per_gpu", 0, IntRange::at_least(0));
  if (hp.has("slot_size_array")) c.slot_size_array = hp.integers("slot_size_array");
  if (c.type == EmbeddingType::Hybrid) read_hybrid(hp, c.hybrid);
  hp.ignore(kIgnoredHparamKeys);
  if (c.workspace_size_per_gpu_in_mb > 0 && c.max_vocabulary_size_per_gpu > 0) {
    hp.fail(cat("give \"", hp.key_path("workspace_size_per_gpu_in_mb"), "\" or \"",
                hp.key_path("max_vocabulary_size_per_gpu"), "\", not both"));
  }
}

}  // namespace

EmbeddingConfig parse_embedding_layer(const nlohmann::json& layer, const SparseInputSpec& input,
                                      DType key_dtype, std::uint64_t seed) {
  ConfigReader r(layer, "embedding layer");
  EmbeddingConfig c;
  c.name = r.string_or("name", c.name);
  r.set_owner(cat("layer '", c.name, "'"));
  c.type = r.choice("type", kEmbeddingTypes);
  r.set_owner(c.where());
  c.bottom = one_name(r, "bottom");
  c.top = one_name(r, "top");
  ConfigReader hp = r.object("sparse_embedding_hparam");
  read_hparams(hp, c);
  if (auto block = r.optional_object("optimizer")) c.optimizer = optim::parse_optimizer(*block);
  c.storage = read_storage(r);
  r.ignore(kIgnoredLayerKeys);
  r.finish();
  if (!input.top.empty() && input.top != c.bottom) {
    r.fail("bottom",
           cat("is '", c.bottom, "', not the sparse input it was given ('", input.top, "')"));
  }
  c.slot_num = input.slot_num;
  c.max_feature_num_per_sample = input.max_feature_num_per_sample;
  c.key_dtype = key_dtype;
  c.seed = seed;
  c.validate();
  return c;
}

}  // namespace ember::embedding
