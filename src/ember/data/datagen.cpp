#include "ember/data/datagen.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>

#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/auc.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/norm_writer.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "ember/data/raw_format.hpp"

namespace ember::data {

namespace fs = std::filesystem;

std::int64_t DatagenOptions::total_slots() const {
  std::int64_t n = 0;
  for (auto s : slots_per_input)
    n += s;
  return n;
}

std::int64_t DatagenOptions::resolved_eval_samples() const {
  return eval_samples >= 0 ? eval_samples : std::max<std::int64_t>(1, samples / 10);
}

std::vector<std::int64_t> DatagenOptions::slot_sizes() const {
  if (vocabulary.size() == 1) {
    return std::vector<std::int64_t>(static_cast<std::size_t>(total_slots()), vocabulary[0]);
  }
  return vocabulary;
}

void DatagenOptions::validate() const {
  const auto fail = [](const auto&... parts) {
    EMBER_THROW_AS(ConfigError, "datagen: ", parts...);
  };
  if (out_dir.empty()) fail("an output directory is required");
  if (samples < 1) fail("--samples must be at least 1, got ", samples);
  if (eval_samples < -1) fail("--eval-samples must not be negative, got ", eval_samples);
  if (files < 1 || eval_files < 1) fail("--files and --eval-files must be at least 1");
  if (slots_per_input.empty()) fail("at least one sparse input is needed");
  for (auto s : slots_per_input) {
    if (s < 1) fail("every sparse input needs at least one slot, got ", s);
  }
  if (dense_dim < 0) fail("--dense-dim must not be negative, got ", dense_dim);
  if (label_dim < 1) fail("--label-dim must be at least 1, got ", label_dim);
  if (vocabulary.size() != 1 && static_cast<std::int64_t>(vocabulary.size()) != total_slots()) {
    fail("--vocab has ", vocabulary.size(), " sizes for ", total_slots(),
         " slots (give one for all, or one per slot)");
  }
  std::int64_t total = 0;
  for (auto v : slot_sizes()) {
    if (v < 1) fail("every slot needs a vocabulary of at least 1, got ", v);
    if (v > std::numeric_limits<std::int32_t>::max()) {
      fail("a slot vocabulary of ", v, " does not fit the int32 keys of the formats");
    }
    total += v;
  }
  if (key_type == DType::U32 &&
      total > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) + 1) {
    fail("the vocabularies sum to ", total,
         " keys, more than u32 (I32) keys hold; use --key-type i64");
  }
  if (key_type != DType::U32 && key_type != DType::I64) fail("key type must be u32 or i64");
  if (!(alpha >= 0) || !std::isfinite(alpha)) fail("--alpha must be >= 0, got ", alpha);
  if (nnz_min < 0 || nnz_max < nnz_min) {
    fail("--nnz-min ", nnz_min, " and --nnz-max ", nnz_max, " give an empty range");
  }
  if (format == DataFormat::Raw && (nnz_min != 1 || nnz_max != 1)) {
    fail("Raw data is one-hot: --nnz-min and --nnz-max must be 1 (got ", nnz_min, " and ", nnz_max,
         ")");
  }
  if (teacher.embedding_dim < 1) fail("the teacher's embedding dim must be at least 1");
}

namespace {

// Runs fn(task) for task in [0, n) on `threads` threads; rethrows the first error.
template <class Fn>
void parallel_for(std::int64_t n, int threads, Fn&& fn) {
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto body = [&] {
    for (;;) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  const int t = static_cast<int>(std::min<std::int64_t>(threads, n));
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k)
    pool.emplace_back(body);
  body();
  for (auto& th : pool)
    th.join();
  if (error) std::rethrow_exception(error);
}

struct SplitResult {
  std::vector<double> probability;  // eval: [label][sample] flattened label-major
  std::vector<float> labels;
  std::atomic<std::int64_t> positives{0};
};

class Generator {
 public:
  explicit Generator(const DatagenOptions& o)
      : o_(o),
        sizes_(o.slot_sizes()),
        task_(TaskShape{o.label_dim, o.dense_dim, sizes_, o.alpha, o.nnz_min, o.nnz_max}, o.teacher,
              o.seed) {
    std::int64_t sum = 0;
    for (auto v : sizes_) {
      offsets_.push_back(sum);
      sum += v;
    }
    threads_ = o.threads > 0 ? o.threads
                             : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }

  // Norm: `files` files of consecutive samples; returns the file paths.
  std::vector<std::string> write_norm(int split, const std::string& stem, std::int64_t samples,
                                      int files, SplitResult& result) {
    std::vector<std::string> paths;
    for (int f = 0; f < files; ++f) {
      paths.push_back(output_path(o_.out_dir, stem + "_" + std::to_string(f) + ".data"));
    }
    parallel_for(files, threads_, [&](std::int64_t f) {
      const std::int64_t begin = samples * f / files, end = samples * (f + 1) / files;
      NormWriter w(paths[static_cast<std::size_t>(f)],
                   {o_.check, o_.key_type, o_.label_dim, o_.dense_dim, o_.total_slots()});
      DrawnSample s;
      std::vector<std::uint32_t> keys32;
      std::vector<std::int64_t> keys64;
      std::int64_t positives = 0;
      for (std::int64_t i = begin; i < end; ++i) {
        task_.draw(split, i, s);
        record(result, i, s, positives);
        global_keys(s, keys32, keys64);
        if (o_.key_type == DType::U32) {
          w.write<std::uint32_t>(s.label, s.dense, s.nnz, keys32);
        } else {
          w.write<std::int64_t>(s.label, s.dense, s.nnz, keys64);
        }
      }
      w.close();
      result.positives.fetch_add(positives);
    });
    return paths;
  }

  // Parquet: `files` files of consecutive samples in out_dir/stem/, with the folder's
  // _metadata.json and _file_list.txt; keys are per-slot ids (the Data layer's slot_size_array
  // gives the offsets). Returns the file paths; the list is out_dir/stem/_file_list.txt.
  std::vector<std::string> write_parquet(int split, const std::string& stem, std::int64_t samples,
                                         int files, SplitResult& result) {
    const fs::path folder = fs::absolute(fs::path(o_.out_dir) / stem).lexically_normal();
    fs::create_directories(folder);
    auto options = parquet::ParquetWriterOptions::with_default_names(o_.label_dim, o_.dense_dim,
                                                                     o_.total_slots());
    options.codec = o_.compression;
    options.key_type = o_.parquet_keys;
    if (o_.nnz_min != 1 || o_.nnz_max != 1) {
      options.slot_is_list.assign(static_cast<std::size_t>(o_.total_slots()), true);
    }
    std::vector<parquet::WrittenFile> written(static_cast<std::size_t>(files));
    std::vector<std::string> paths;
    for (int f = 0; f < files; ++f) {
      paths.push_back((folder / ("part_" + std::to_string(f) + ".parquet")).string());
    }
    parallel_for(files, threads_, [&](std::int64_t f) {
      const std::int64_t begin = samples * f / files, end = samples * (f + 1) / files;
      parquet::ParquetWriter w(paths[static_cast<std::size_t>(f)], options);
      DrawnSample s;
      std::vector<std::int64_t> keys;
      std::int64_t positives = 0;
      for (std::int64_t i = begin; i < end; ++i) {
        task_.draw(split, i, s);
        record(result, i, s, positives);
        keys.assign(s.ids.begin(), s.ids.end());
        w.write(s.label, s.dense, s.nnz, keys);
      }
      w.close();
      written[static_cast<std::size_t>(f)] = {paths[static_cast<std::size_t>(f)], end - begin};
      result.positives.fetch_add(positives);
    });
    parquet::write_parquet_layout(folder.string(), (folder / "_file_list.txt").string(), written,
                                  options);
    return paths;
  }

  // Raw: one file, blocks generated in parallel and written in order.
  std::string write_raw(int split, const std::string& name, std::int64_t samples,
                        SplitResult& result) {
    const std::string path = output_path(o_.out_dir, name);
    RawWriter w(path, o_.label_dim, o_.dense_dim, o_.total_slots(), o_.float_label_dense);
    const std::int64_t block = 65536;
    const std::int64_t blocks = (samples + block - 1) / block;
    const auto ld = static_cast<std::size_t>(o_.label_dim + o_.dense_dim);
    const auto slots = static_cast<std::size_t>(o_.total_slots());
    struct Block {
      std::vector<float> label_dense;
      std::vector<std::int32_t> keys;
    };
    for (std::int64_t round = 0; round < blocks; round += threads_) {
      const std::int64_t in_round = std::min<std::int64_t>(threads_, blocks - round);
      std::vector<Block> out(static_cast<std::size_t>(in_round));
      parallel_for(in_round, threads_, [&](std::int64_t k) {
        const std::int64_t begin = (round + k) * block;
        const std::int64_t end = std::min(samples, begin + block);
        Block& b = out[static_cast<std::size_t>(k)];
        b.label_dense.reserve(static_cast<std::size_t>(end - begin) * ld);
        b.keys.reserve(static_cast<std::size_t>(end - begin) * slots);
        DrawnSample s;
        std::int64_t positives = 0;
        for (std::int64_t i = begin; i < end; ++i) {
          task_.draw(split, i, s);
          record(result, i, s, positives);
          b.label_dense.insert(b.label_dense.end(), s.label.begin(), s.label.end());
          b.label_dense.insert(b.label_dense.end(), s.dense.begin(), s.dense.end());
          for (auto id : s.ids)
            b.keys.push_back(static_cast<std::int32_t>(id));
        }
        result.positives.fetch_add(positives);
      });
      std::vector<std::int32_t> as_int32(ld);
      for (const Block& b : out) {
        const std::size_t n = slots == 0 ? b.label_dense.size() / std::max<std::size_t>(ld, 1)
                                         : b.keys.size() / slots;
        for (std::size_t i = 0; i < n; ++i) {
          const float* p = b.label_dense.data() + i * ld;
          const std::span<const std::int32_t> keys(b.keys.data() + i * slots, slots);
          const auto label_dim = static_cast<std::size_t>(o_.label_dim);
          if (o_.float_label_dense) {
            w.write(std::span<const float>(p, label_dim),
                    std::span<const float>(p + label_dim, ld - label_dim), keys);
            continue;
          }
          // The drawn dense values are log(v + 1) of integer counts v: stored as v, they read
          // back as drawn (within a float's rounding).
          for (std::size_t j = 0; j < ld; ++j) {
            const double v = j < label_dim ? p[j] : std::expm1(static_cast<double>(p[j]));
            as_int32[j] = static_cast<std::int32_t>(
                std::clamp<double>(std::round(v), 0, std::numeric_limits<std::int32_t>::max()));
          }
          w.write(std::span<const std::int32_t>(as_int32.data(), label_dim),
                  std::span<const std::int32_t>(as_int32.data() + label_dim, ld - label_dim), keys);
        }
      }
    }
    w.close();
    return path;
  }

  const std::vector<std::int64_t>& sizes() const { return sizes_; }

 private:
  void record(SplitResult& r, std::int64_t i, const DrawnSample& s, std::int64_t& positives) const {
    if (s.label[0] > 0.5f) ++positives;
    if (r.probability.empty()) return;
    const auto n = r.labels.size() / static_cast<std::size_t>(o_.label_dim);
    for (std::size_t l = 0; l < s.label.size(); ++l) {
      r.probability[l * n + static_cast<std::size_t>(i)] = s.probability[l];
      r.labels[l * n + static_cast<std::size_t>(i)] = s.label[l];
    }
  }

  void global_keys(const DrawnSample& s, std::vector<std::uint32_t>& k32,
                   std::vector<std::int64_t>& k64) const {
    k32.clear();
    k64.clear();
    std::size_t at = 0;
    for (std::size_t slot = 0; slot < s.nnz.size(); ++slot) {
      for (int k = 0; k < s.nnz[slot]; ++k, ++at) {
        const std::int64_t key = offsets_[slot] + s.ids[at];
        if (o_.key_type == DType::U32) {
          k32.push_back(static_cast<std::uint32_t>(key));
        } else {
          k64.push_back(key);
        }
      }
    }
  }

  const DatagenOptions& o_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::int64_t> offsets_;
  SyntheticTask task_;
  int threads_ = 1;
};

}  // namespace

DatasetDescription generate_dataset(const DatagenOptions& o) {
  o.validate();
  create_output_directory(o.out_dir, "datagen");
  Generator gen(o);
  const std::int64_t eval_samples = o.resolved_eval_samples();
  SplitResult train, eval;
  eval.probability.assign(static_cast<std::size_t>(eval_samples * o.label_dim), 0.0);
  eval.labels.assign(static_cast<std::size_t>(eval_samples * o.label_dim), 0.0f);

  DatasetDescription d;
  d.generator = "ember datagen";
  d.format = o.format;
  d.check = o.format == DataFormat::Norm ? o.check : CheckMode::None;
  d.key_type = o.key_type;
  d.label_dim = o.label_dim;
  d.dense_dim = o.dense_dim;
  for (std::size_t i = 0; i < o.slots_per_input.size(); ++i) {
    const std::int64_t slots = o.slots_per_input[i];
    d.sparse.push_back({o.slots_per_input.size() == 1 ? "data1" : "data" + std::to_string(i + 1),
                        slots, o.nnz_max, std::max<std::int64_t>(1, slots * o.nnz_max)});
  }
  d.slot_size_array = gen.sizes();
  d.train.samples = o.samples;
  d.eval.samples = eval_samples;
  if (o.format == DataFormat::Raw) {
    d.float_label_dense = o.float_label_dense;
    d.train.files = {gen.write_raw(0, "train.bin", o.samples, train)};
    d.eval.files = {gen.write_raw(1, "eval.bin", eval_samples, eval)};
  } else if (o.format == DataFormat::Parquet) {
    d.train.files = gen.write_parquet(0, "train", o.samples, o.files, train);
    d.eval.files = gen.write_parquet(1, "eval", eval_samples, o.eval_files, eval);
    d.train.file_list = (fs::absolute(fs::path(o.out_dir) / "train" / "_file_list.txt"))
                            .lexically_normal()
                            .string();
    d.eval.file_list =
        (fs::absolute(fs::path(o.out_dir) / "eval" / "_file_list.txt")).lexically_normal().string();
    d.extra["parquet_compression"] = std::string(parquet::to_string(o.compression));
  } else {
    d.train.files = gen.write_norm(0, "train", o.samples, o.files, train);
    d.eval.files = gen.write_norm(1, "eval", eval_samples, o.eval_files, eval);
    d.write_file_lists(o.out_dir);
  }
  nlohmann::json aucs = nlohmann::json::array();
  const auto n = static_cast<std::size_t>(eval_samples);
  for (std::int64_t l = 0; l < o.label_dim; ++l) {
    const auto at = static_cast<std::size_t>(l) * n;
    const double auc = exact_auc(std::span<const double>(eval.probability.data() + at, n),
                                 std::span<const float>(eval.labels.data() + at, n));
    aucs.push_back(std::isnan(auc) ? nlohmann::json(nullptr) : nlohmann::json(auc));
  }
  d.extra["teacher_auc"] = aucs[0];
  d.extra["teacher_auc_per_label"] = aucs;
  d.extra["positive_rate"] =
      static_cast<double>(train.positives.load()) / static_cast<double>(o.samples);
  d.extra["seed"] = o.seed;
  d.extra["parameters"] = {{"alpha", o.alpha},
                           {"nnz_min", o.nnz_min},
                           {"nnz_max", o.nnz_max},
                           {"teacher_embedding_dim", o.teacher.embedding_dim},
                           {"teacher_key_weight_std", o.teacher.key_weight_std},
                           {"teacher_interaction_std", o.teacher.interaction_std},
                           {"teacher_dense_std", o.teacher.dense_std},
                           {"teacher_mean_logit", o.teacher.mean_logit},
                           {"teacher_tail_decay", o.teacher.tail_decay}};
  d.write((fs::path(o.out_dir) / "dataset.json").string());
  return d;
}

void apply_model_config(const nlohmann::json& config, const std::string& where, DatagenOptions& o) {
  using nlohmann::json;
  if (!config.is_object() || !config.contains("layers") || !config["layers"].is_array() ||
      config["layers"].empty()) {
    EMBER_THROW_AS(ConfigError, where, ": expected a model configuration with a \"layers\" array");
  }
  const json& layers = config["layers"];
  std::size_t data_index = layers.size();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].is_object() && layers[i].value("type", "") == "Data") {
      data_index = i;
      break;
    }
  }
  if (data_index == layers.size()) {
    EMBER_THROW_AS(ConfigError, where, ": no layer of type \"Data\"",
                   config.contains("data") ? " (its top-level \"data\" object is HugeCTR's older "
                                             "format; Ember reads v3, where the Data layer is the "
                                             "first entry of \"layers\")"
                                           : "");
  }
  const json& layer = layers[data_index];
  const DataConfig dc = parse_data_layer(
      layer, cat(where, " layers[", data_index, "] (\"", layer.value("name", "data"), "\")"));
  o.format = dc.format;
  o.check = dc.check;
  o.label_dim = dc.label_dim;
  o.dense_dim = dc.dense_dim;
  o.slots_per_input.clear();
  int nnz_max = std::numeric_limits<int>::max();
  for (const auto& s : dc.sparse) {
    o.slots_per_input.push_back(s.slot_num);
    const std::int64_t per_slot = std::min(s.max_nnz, s.max_feature_num_per_sample / s.slot_num);
    nnz_max = static_cast<int>(std::min<std::int64_t>(nnz_max, per_slot));
  }
  if (nnz_max < 1) {
    EMBER_THROW_AS(ConfigError, where,
                   ": the Data layer's key budgets (max_feature_num_per_sample "
                   "/ slot_num, max_nnz) leave no room for one key per slot");
  }
  o.nnz_max = nnz_max;
  o.nnz_min = std::min(o.nnz_min, nnz_max);
  if (dc.format == DataFormat::Raw) {
    o.nnz_min = o.nnz_max = 1;
    o.samples = dc.num_samples;
    o.eval_samples = dc.eval_num_samples > 0 ? dc.eval_num_samples : -1;
    o.float_label_dense = dc.float_label_dense;
  }
  if (config.contains("solver")) {
    // Only the key type is taken from the solver: the reader is not finished.
    ConfigReader solver(config["solver"], cat(where, " solver"));
    if (solver.has("input_key_type")) {
      o.key_type =
          parse_key_type(solver.string("input_key_type"), where + " solver.input_key_type");
    }
  }
  // Vocabulary: the Data layer's slot_size_array, else each input's embedding's.
  if (!dc.slot_size_array.empty()) {
    o.vocabulary = dc.slot_size_array;
    return;
  }
  std::vector<std::int64_t> vocab;
  const std::int64_t fallback = o.vocabulary.size() == 1 ? o.vocabulary[0] : 2000;
  for (const auto& s : dc.sparse) {
    std::vector<std::int64_t> sizes;
    for (const json& l : layers) {
      if (!l.is_object() || l.value("bottom", json()) != json(s.top) ||
          !l.contains("sparse_embedding_hparam")) {
        continue;
      }
      // Only the sizes are taken from the embedding (`ember train` checks the rest), so the
      // reader is not finished.
      ConfigReader layer_reader(l, cat(where, " layer '", l.value("name", ""), "'"));
      ConfigReader h = layer_reader.object("sparse_embedding_hparam");
      const auto slot_sizes = h.has("slot_size_array")
                                  ? h.integers("slot_size_array", IntRange::at_least(1))
                                  : std::vector<std::int64_t>{};
      if (static_cast<std::int64_t>(slot_sizes.size()) == s.slot_num) {
        sizes = slot_sizes;
      } else {
        std::int64_t capacity = 0;
        if (h.has("max_vocabulary_size_per_gpu")) {
          capacity = h.integer("max_vocabulary_size_per_gpu");
        } else if (h.has("workspace_size_per_gpu_in_mb") && h.has("embedding_vec_size")) {
          const double rows = h.number("workspace_size_per_gpu_in_mb") * (1 << 20) /
                              (4.0 * static_cast<double>(std::max<std::int64_t>(
                                         1, h.integer("embedding_vec_size"))));
          capacity = static_cast<std::int64_t>(rows);
        }
        if (capacity > 0) {
          sizes.assign(static_cast<std::size_t>(s.slot_num),
                       std::max<std::int64_t>(1, std::min(fallback, capacity / s.slot_num)));
        }
      }
      break;
    }
    if (sizes.empty()) sizes.assign(static_cast<std::size_t>(s.slot_num), fallback);
    vocab.insert(vocab.end(), sizes.begin(), sizes.end());
  }
  o.vocabulary = vocab;
}

}  // namespace ember::data
