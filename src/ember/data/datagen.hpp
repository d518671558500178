// `ember datagen`: learnable synthetic CTR data in HugeCTR's formats, deterministic by seed.
// Writes the training and evaluation splits (Norm: *.data files and train.txt / eval.txt file
// lists; Raw: train.bin / eval.bin; Parquet: train/ and eval/ folders in HugeCTR's layout, each
// with part_*.parquet, _file_list.txt and _metadata.json) and DIR/dataset.json with the shape, the
// vocabulary per slot and the teacher's AUC on the evaluation split (the best AUC a model can
// reach).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/dataset_description.hpp"
#include "ember/data/parquet/compression.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"
#include "ember/data/synthetic_task.hpp"

namespace ember::data {

struct DatagenOptions {
  std::string out_dir;
  std::int64_t samples = 500000;                     // training samples
  std::int64_t eval_samples = -1;                    // -1: samples / 10 (at least 1)
  int files = 4;                                     // Norm and Parquet training files
  int eval_files = 1;                                // Norm and Parquet evaluation files
  std::vector<std::int64_t> slots_per_input = {26};  // one entry per sparse input
  std::int64_t dense_dim = 13;
  std::int64_t label_dim = 1;
  DataFormat format = DataFormat::Norm;
  // Raw: label and dense columns as f32; false: as HugeCTR's default int32 (labels 0/1, dense
  // counts v that the reader turns into log(v + 1), the values the generator draws).
  bool float_label_dense = true;
  CheckMode check = CheckMode::Sum;
  DType key_type = DType::U32;
  parquet::Codec compression = parquet::default_write_codec();        // Parquet pages
  parquet::PhysicalType parquet_keys = parquet::PhysicalType::Int64;  // or Int32
  // Vocabulary per slot: one entry for every slot, or one per slot.
  std::vector<std::int64_t> vocabulary = {2000};
  double alpha = 1.1;  // power-law exponent of key popularity
  int nnz_min = 1;     // keys per slot
  int nnz_max = 1;
  std::uint64_t seed = 1;
  TeacherOptions teacher;
  int threads = 0;  // 0: hardware threads

  std::int64_t total_slots() const;
  std::int64_t resolved_eval_samples() const;
  // Vocabulary of every slot (the one-entry form expanded).
  std::vector<std::int64_t> slot_sizes() const;
  // ConfigError naming the option for anything out of range.
  void validate() const;
};

// Generates the dataset; returns (and writes to out_dir/dataset.json) its description.
DatasetDescription generate_dataset(const DatagenOptions& options);

// Takes the shape from a HugeCTR model configuration (`ember datagen --like config.json`): the
// Data layer's dims, sparse inputs, check, format and (Raw) sample counts and float_label_dense;
// the key type from
// solver.input_key_type; vocabulary sizes from the Data layer's or the embeddings'
// slot_size_array (or, failing those, a share of max_vocabulary_size_per_gpu). `where` names
// the config in messages.
void apply_model_config(const nlohmann::json& config, const std::string& where,
                        DatagenOptions& options);

}  // namespace ember::data
