// Shared by the training tests: a small generated dataset shaped like a configuration, and the
// configuration pointed at it with test-sized settings.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ember/train/model_config.hpp"
#include "ember/train/session.hpp"
#include "support/test_support.hpp"

namespace ember::train::testing_support {

struct TinyDataset {
  ember::testing::ScratchDir dir;
  std::string train_list, eval_list;  // Raw: the files themselves
  std::int64_t train_samples = 0, eval_samples = 0;
  bool raw = false, float_label_dense = false;
  double teacher_auc = 0;
};

// The JSON of configs/<name>.json.
nlohmann::json sample_config(const std::string& name);

// Every configuration of the tree: configs/*.json by name, and the reference check's
// "reference/dlrm_small" (tests/reference/dlrm_small.json).
const std::vector<std::string>& all_config_names();
// One of them at a size tests train in seconds: the layers as written, but DLRM at
// Criteo-Kaggle's 26 tables (up to 6.4 M rows) cut to 1000 rows each.
nlohmann::json test_sized_config(const std::string& name);

// Generates `samples` training samples (and samples / 5 for evaluation) shaped like `config`.
std::unique_ptr<TinyDataset> make_dataset(const nlohmann::json& config, std::int64_t samples,
                                          std::uint64_t seed = 3);

// `config` reading `data`, with the given solver settings (display every iteration, no periodic
// evaluation, no snapshots unless asked).
ModelConfig tiny_config(nlohmann::json config, const TinyDataset& data, std::int64_t batch,
                        std::int64_t iterations, const std::vector<std::string>& overrides = {});

// Rewrites meta.json's recorded sizes and hashes after a test changed a checkpoint's files on
// purpose (a poisoned weight), so that the change reaches the loaders instead of the hash check.
void rehash_checkpoint(const std::filesystem::path& dir);

// Sets the first f32 of `file` (a checkpoint's dense.model, say) to NaN and rehashes `dir`.
void poison_first_value(const std::filesystem::path& dir, const std::string& file);

// "dlrm" as LocalizedSlotSparseEmbeddingOneHot, with its data (keys carry slot offsets), and
// the same configuration with the last slot cut to one row: that slot's keys then fall outside
// its range, and only the rank that owns it (rank 1 of 2) fails (a data error one rank meets).
struct OneRankFailure {
  nlohmann::json good, bad;
  std::unique_ptr<TinyDataset> data;
};
OneRankFailure one_rank_failure_config(std::int64_t samples = 2000);

// Options for a session that shows nothing (its lines go to a sink): on `device` ("" leaves the
// configuration's), with `cpu_ranks` CPU ranks (0 leaves the configuration's).
SessionOptions quiet_options(const std::string& device = "", int cpu_ranks = 0);

// A saved embedding's file `name` (keys, vectors, a state file) as a save of one rank writes
// it, whatever the rank count of the save: the rows of every shard rank_<r>/, in key order
// (keys of `key_bytes` bytes, unsigned; rows of the file's own width). Empty when absent.
std::string merged_saved_file(const std::filesystem::path& embedding_dir, const std::string& name,
                              std::size_t key_bytes = 4);

// A run's losses at its display points, in order.
std::vector<double> losses_of(const TrainResult& r);

// What a session trained from scratch left: its losses (losses_of), the AUC of an evaluation
// after training, and the embeddings an interaction read in place (Session::gathered_embeddings).
struct RunOutcome {
  std::vector<double> losses;
  double auc = 0;
  std::vector<std::string> gathered;
};
RunOutcome train_and_evaluate(ModelConfig config, SessionOptions options);

}  // namespace ember::train::testing_support
