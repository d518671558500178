#include "train/training_support.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "ember/data/datagen.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train::testing_support {

nlohmann::json sample_config(const std::string& name) {
  std::ifstream in(ember::testing::source_dir() / "configs" / (name + ".json"));
  return nlohmann::json::parse(in);
}

const std::vector<std::string>& all_config_names() {
  static const std::vector<std::string> names = [] {
    // Every file of configs/, so a configuration added there is covered without editing tests.
    std::vector<std::string> all;
    for (const auto& entry :
         std::filesystem::directory_iterator(ember::testing::source_dir() / "configs")) {
      if (entry.path().extension() == ".json") all.push_back(entry.path().stem().string());
    }
    std::sort(all.begin(), all.end());
    all.push_back("reference/dlrm_small");
    return all;
  }();
  return names;
}

nlohmann::json test_sized_config(const std::string& name) {
  if (name.rfind("reference/", 0) == 0) {
    std::ifstream in(ember::testing::source_dir() / "tests" / (name + ".json"));
    return nlohmann::json::parse(in);
  }
  nlohmann::json c = sample_config(name);
  auto cut = [](nlohmann::json& object) {
    const auto it = object.find("slot_size_array");
    if (it == object.end()) return;
    for (auto& rows : *it)
      rows = std::min<std::int64_t>(rows.get<std::int64_t>(), 1000);
  };
  for (auto& layer : c["layers"]) {
    cut(layer);
    const auto hparam = layer.find("sparse_embedding_hparam");
    if (hparam != layer.end()) cut(*hparam);
  }
  return c;
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
  d->raw = desc.format == data::DataFormat::Raw;
  d->train_list = d->raw ? desc.train.files.at(0) : desc.train.file_list;
  d->eval_list = d->raw ? desc.eval.files.at(0) : desc.eval.file_list;
  d->float_label_dense = desc.float_label_dense;
  d->train_samples = desc.train.samples;
  d->eval_samples = desc.eval.samples;
  d->teacher_auc = desc.extra.value("teacher_auc", 0.0);
  return d;
}

ModelConfig tiny_config(nlohmann::json config, const TinyDataset& data, std::int64_t batch,
                        std::int64_t iterations, const std::vector<std::string>& overrides) {
  config["layers"][0]["source"] = data.train_list;
  config["layers"][0]["eval_source"] = data.eval_list;
  config["layers"][0]["num_workers"] = 2;
  if (data.raw) {
    config["layers"][0]["num_samples"] = data.train_samples;
    config["layers"][0]["eval_num_samples"] = data.eval_samples;
    // What datagen wrote: the configuration's own float_label_dense (int32 by default).
    config["layers"][0]["float_label_dense"] = data.float_label_dense;
  }
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

OneRankFailure one_rank_failure_config(std::int64_t samples) {
  OneRankFailure f;
  f.good = sample_config("dlrm");
  for (auto& layer : f.good["layers"]) {
    if (layer["type"] == "LocalizedSlotSparseEmbeddingHash") {
      layer["type"] = "LocalizedSlotSparseEmbeddingOneHot";
    }
  }
  f.data = make_dataset(f.good, samples);
  f.bad = f.good;
  for (auto& layer : f.bad["layers"]) {
    if (layer["type"] == "LocalizedSlotSparseEmbeddingOneHot") {
      auto& sizes = layer["sparse_embedding_hparam"]["slot_size_array"];
      sizes[sizes.size() - 1] = 1;
    }
  }
  return f;
}

SessionOptions quiet_options(const std::string& device, int cpu_ranks) {
  static std::ostringstream sink;
  SessionOptions o;
  o.progress = false;
  o.out = &sink;
  o.device = device;
  if (cpu_ranks > 0) o.cpu_ranks = cpu_ranks;
  return o;
}

std::vector<double> losses_of(const TrainResult& r) {
  std::vector<double> out;
  for (const auto& [iteration, loss] : r.losses)
    out.push_back(loss);
  return out;
}

RunOutcome train_and_evaluate(ModelConfig config, SessionOptions options) {
  Session s(std::move(config), std::move(options));
  RunOutcome out;
  out.losses = losses_of(s.train());
  out.auc = s.evaluate().auc;
  out.gathered = s.gathered_embeddings();
  return out;
}

namespace {

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::string merged_saved_file(const std::filesystem::path& embedding_dir, const std::string& name,
                              std::size_t key_bytes) {
  namespace fs = std::filesystem;
  if (fs::exists(embedding_dir / "keys")) return file_bytes(embedding_dir / name);
  struct Row {
    std::uint64_t key;
    std::size_t shard, index;
  };
  std::vector<Row> rows;
  std::vector<std::string> files;
  for (std::size_t r = 0; fs::is_directory(embedding_dir / ("rank_" + std::to_string(r))); ++r) {
    const fs::path shard = embedding_dir / ("rank_" + std::to_string(r));
    const std::string keys = file_bytes(shard / "keys");
    for (std::size_t i = 0; i < keys.size() / key_bytes; ++i) {
      std::uint64_t key = 0;
      std::memcpy(&key, keys.data() + i * key_bytes, key_bytes);
      rows.push_back({key, r, i});
    }
    files.push_back(file_bytes(shard / name));
  }
  if (rows.empty()) return {};
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.key < b.key; });
  const std::size_t total = [&] {
    std::size_t n = 0;
    for (const auto& f : files)
      n += f.size();
    return n;
  }();
  const std::size_t width = total / rows.size();
  std::string out;
  for (const Row& row : rows)
    out += files[row.shard].substr(row.index * width, width);
  return out;
}

}  // namespace ember::train::testing_support
