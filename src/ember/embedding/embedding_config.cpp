#include "ember/embedding/embedding_config.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

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
  }
  return "?";
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
      type == EmbeddingType::LocalizedSlotOneHot ||
      (type == EmbeddingType::LocalizedSlotHash && !slot_size_array.empty());
  if (type == EmbeddingType::LocalizedSlotOneHot && slot_size_array.empty()) {
    fail(
        "LocalizedSlotSparseEmbeddingOneHot needs \"sparse_embedding_hparam.slot_size_array\" "
        "(the row of a key is the key itself)");
  }
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

namespace {

constexpr Named<EmbeddingType> kEmbeddingTypes[] = {
    {"DistributedSlotSparseEmbeddingHash", EmbeddingType::DistributedSlotHash},
    {"LocalizedSlotSparseEmbeddingHash", EmbeddingType::LocalizedSlotHash},
    {"LocalizedSlotSparseEmbeddingOneHot", EmbeddingType::LocalizedSlotOneHot},
};

// Keys HugeCTR's embeddings took that mean nothing here.
constexpr IgnoredKey kIgnoredHparamKeys[] = {
    {"load_factor", "tables size their hash slots themselves"},
};

// The one tensor name of "bottom" or "top": a string or a list of one string.
std::string one_name(ConfigReader& r, const char* key) {
  const auto names = r.string_list(key);
  if (names.size() != 1) r.invalid(key, "one tensor name", r.raw(key));
  return names.front();
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
