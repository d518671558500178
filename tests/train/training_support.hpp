// Shared by the training tests: a small generated dataset shaped like a configuration, and the
// configuration pointed at it with test-sized settings.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ember/train/model_config.hpp"
#include "support/test_support.hpp"

namespace ember::train::testing_support {

struct TinyDataset {
  ember::testing::ScratchDir dir;
  std::string train_list, eval_list;
  double teacher_auc = 0;
};

// The JSON of configs/<name>.json.
nlohmann::json sample_config(const std::string& name);

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

}  // namespace ember::train::testing_support
