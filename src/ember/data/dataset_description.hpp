// The JSON description written beside a generated or converted dataset (DIR/dataset.json): its
// shape, file lists, sample counts and vocabulary per slot, plus a ready Data layer, so that a
// model configuration can be written against it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/data/data_config.hpp"

namespace ember::data {

struct DatasetSplitDescription {
  std::string file_list;           // Norm and Parquet: the list; Raw: empty
  std::vector<std::string> files;  // Norm and Parquet: the data files; Raw: the one file
  std::int64_t samples = 0;
};

struct SparseInputDescription {
  std::string name;
  std::int64_t slot_num = 0;
  std::int64_t max_nnz = 1;  // per slot
  std::int64_t max_feature_num_per_sample = 1;
};

struct DatasetDescription {
  std::string generator;  // "ember datagen", "ember convert criteo"
  DataFormat format = DataFormat::Norm;
  CheckMode check = CheckMode::Sum;
  DType key_type = DType::U32;
  std::int64_t label_dim = 1;
  std::int64_t dense_dim = 0;
  std::vector<SparseInputDescription> sparse;
  std::vector<std::int64_t> slot_size_array;  // vocabulary per slot
  bool float_label_dense = false;             // Raw
  DatasetSplitDescription train, eval;
  // Generator-specific fields (teacher AUC, seed, parameters, malformed-line report, ...),
  // merged into the top level of the JSON.
  nlohmann::json extra = nlohmann::json::object();

  std::int64_t slot_num() const;
  // A HugeCTR Data layer that reads this dataset.
  DataConfig data_config() const;
  // Norm: writes DIR/train.txt and DIR/eval.txt for the splits that have files, and records them.
  void write_file_lists(const std::string& dir);
  nlohmann::json to_json() const;
  static DatasetDescription from_json(const nlohmann::json& j);
  void write(const std::string& path) const;
  static DatasetDescription read(const std::string& path);
};

// Creates `dir` and its parents for a tool's output (DataError naming the tool and `dir`).
void create_output_directory(const std::string& dir, std::string_view tool);
// `name` in `dir` as an absolute, normalised path: what file lists and dataset.json record.
std::string output_path(const std::string& dir, const std::string& name);

}  // namespace ember::data
