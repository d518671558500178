#include "train/training_support.hpp"

#include <fstream>
#include <limits>

#include "ember/data/datagen.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train::testing_support {

nlohmann::json sample_config(const std::string& name) {
  std::ifstream in(ember::testing::source_dir() / "configs" / (name + ".json"));
  return nlohmann::json::parse(in);
}

std::unique_ptr<TinyDataset> make_dataset(const nlohmann::json& config, std::int64_t samples,
                                          std::uint64_t seed) {
  auto d = std::make_unique<TinyDataset>();
  data::DatagenOptions o;
  data::apply_model_config(config, "test config", o);
  o.out_dir = d->dir.path().string();
  o.samples = samples;
  o.eval_samples = samples / 5;
  o.files = 2;
  o.eval_files = 1;
  o.seed = seed;
  o.threads = 1;
  const data::DatasetDescription desc = data::generate_dataset(o);
  d->train_list = desc.train.file_list;
  d->eval_list = desc.eval.file_list;
  d->teacher_auc = desc.extra.value("teacher_auc", 0.0);
  return d;
}

ModelConfig tiny_config(nlohmann::json config, const TinyDataset& data, std::int64_t batch,
                        std::int64_t iterations, const std::vector<std::string>& overrides) {
  config["layers"][0]["source"] = data.train_list;
  config["layers"][0]["eval_source"] = data.eval_list;
  config["layers"][0]["num_workers"] = 2;
  auto& s = config["solver"];
  s["batchsize"] = batch;
  s["batchsize_eval"] = batch;
  s["max_iter"] = iterations;
  s["display"] = 1;
  s["eval_interval"] = 0;
  s["snapshot"] = 0;
  s["device"] = "cpu";
  for (const std::string& o : overrides)
    apply_override(config, o);
  return parse_model_config(config, "test config");
}

void rehash_checkpoint(const std::filesystem::path& dir) {
  nlohmann::json meta;
  {
    std::ifstream in(dir / "meta.json");
    meta = nlohmann::json::parse(in);
  }
  for (auto& f : meta["files"]) {
    const auto path = dir / f["path"].get<std::string>();
    f["bytes"] = static_cast<std::uint64_t>(std::filesystem::file_size(path));
    f["hash"] = hash_file(path);
  }
  std::ofstream(dir / "meta.json") << meta.dump(2) << "\n";
}

void poison_first_value(const std::filesystem::path& dir, const std::string& file) {
  {
    std::fstream f(dir / file, std::ios::in | std::ios::out | std::ios::binary);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  }
  rehash_checkpoint(dir);
}

}  // namespace ember::train::testing_support
