// The Data layer of a HugeCTR v3 model configuration (layers[0]), checked strictly: what the
// readers, the pipeline, `ember datagen --like` and the trainer's config parser build from.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::data {

enum class DataFormat { Norm, Raw, Parquet };
enum class CheckMode { None, Sum };
enum class SparseInputType { DistributedSlot, LocalizedSlot };
// What the readers do with a sample whose label or dense values are not finite, or whose labels
// are outside the range the loss takes: stop with a DataError naming the file, the sample and the
// column (the default), or drop it, count it and log the first few (as a checksum mismatch).
enum class BadSamplePolicy { Error, Drop };

// "Norm" / "Raw" / "Parquet" and "None" / "Sum", as HugeCTR spells them (and HugeCTR's Python
// spelling "Non" for None); parse_* also accept lower case (the command line uses it). Anything
// else is a ConfigError naming `what`.
std::string_view to_string(DataFormat format);
std::string_view to_string(CheckMode check);
std::string_view to_string(SparseInputType type);
std::string_view to_string(BadSamplePolicy policy);  // "error" / "drop"
DataFormat parse_data_format(std::string_view text, std::string_view what);
CheckMode parse_check_mode(std::string_view text, std::string_view what);

struct SparseInputConfig {
  std::string top;
  SparseInputType type = SparseInputType::DistributedSlot;
  // Most keys one sample may have over all slots of this input (sizes the CSR buffers).
  std::int64_t max_feature_num_per_sample = 0;
  // Most keys in one slot; HugeCTR defaults it to max_feature_num_per_sample.
  std::int64_t max_nnz = 0;
  std::int64_t slot_num = 0;
  // HugeCTR's promise that every sample holds exactly nnz_per_slot[k] keys in slot k (max_nnz in
  // every slot when nnz_per_slot is not given). The Norm reader checks it (a sample that breaks
  // it is a DataError); HugeCTR trusts it to reuse the CSR row offsets between batches.
  bool is_fixed_length = false;
  // Parquet's per-slot key counts (empty when not given).
  std::vector<std::int64_t> nnz_per_slot;
  // The key count of each slot under is_fixed_length (empty when it is false).
  std::vector<std::int64_t> fixed_nnz() const;
};

struct DataConfig {
  std::string name = "data";
  DataFormat format = DataFormat::Norm;
  // Norm and Parquet: a file list; Raw: the data file itself.
  std::string source;
  std::string eval_source;
  CheckMode check = CheckMode::None;
  // Reader shards, one thread each (HugeCTR's reader workers); 0: the pipeline's default, a
  // shard per file (at most 128) and threads by the machine's cores (docs/data.md, "Shards").
  int num_workers = 0;
  // HugeCTR's cache_eval_data: false/0 off, true (-1) the whole evaluation set, N batches: the
  // evaluation batches are kept (on the training devices) after the first evaluation and used
  // again at the later ones, when the evaluation takes at most that many batches.
  std::int64_t cache_eval_data = 0;
  // Ember's "bad_sample_policy": "error" (default) or "drop".
  BadSamplePolicy bad_sample_policy = BadSamplePolicy::Error;
  std::string label_top = "label";
  std::int64_t label_dim = 1;
  std::string dense_top = "dense";
  std::int64_t dense_dim = 0;
  std::vector<SparseInputConfig> sparse;
  // Raw only: samples in the training and evaluation files.
  std::int64_t num_samples = 0;
  std::int64_t eval_num_samples = 0;
  // Raw and Parquet: vocabulary size per slot; the key offset of slot i is the sum of the sizes
  // before it. Empty when not given (keys are used as stored).
  std::vector<std::int64_t> slot_size_array;
  // Raw only: label and dense are float32 as stored (true) or int32 to convert (false).
  bool float_label_dense = false;

  std::int64_t total_slots() const;
  // Exclusive prefix sums of slot_size_array (empty when it is).
  std::vector<std::int64_t> slot_offsets() const;
};

// Parses a Data layer object. `where` names it in messages, e.g. "layers[0] (\"data\")".
// Unknown keys are a ConfigError naming the key and the layer; so is a missing required key, a
// value of the wrong type or range, and inconsistent values (slot_size_array of the wrong
// length, Raw without num_samples, ...).
DataConfig parse_data_layer(const nlohmann::json& layer, const std::string& where);

// The Data layer object for `config`, in HugeCTR's schema (what datagen and convert write into
// their dataset descriptions so a model configuration can be pasted together from it).
nlohmann::json to_json(const DataConfig& config);

}  // namespace ember::data
