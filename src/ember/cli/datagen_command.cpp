// ember datagen --out DIR: learnable synthetic data (see ember/data/datagen.hpp).
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include "ember/cli/cli_support.hpp"
#include "ember/cli/commands.hpp"
#include "ember/core/error.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/datagen.hpp"
#include "ember/data/parquet/parquet_writer.hpp"

namespace ember::cli {

namespace {

// Flags as given; each one that was given overrides what --like set.
struct DatagenFlags {
  std::string out, like;
  std::int64_t samples = 0, eval_samples = 0, slots = 0, dense_dim = 0, label_dim = 0;
  int files = 0, eval_files = 0, nnz_min = 0, nnz_max = 0, threads = 0, teacher_dim = 0;
  std::string slots_per_input, format, check, key_type, vocab, compression, parquet_keys,
      raw_label_dense;
  std::uint64_t seed = 0;
  double alpha = 0, key_std = 0, interaction_std = 0, dense_std = 0, mean_logit = 0, tail_decay = 0;
  std::vector<std::pair<CLI::Option*, std::function<void(data::DatagenOptions&)>>> setters;
};

}  // namespace

void add_datagen_command(CLI::App& app) {
  auto f = std::make_shared<DatagenFlags>();
  const data::DatagenOptions defaults;
  CLI::App* cmd = app.add_subcommand(
      "datagen",
      "Generate learnable synthetic CTR data (a hidden teacher model labels power-law keys and "
      "dense features), deterministic by --seed, with DIR/dataset.json describing it");
  cmd->add_option("--out", f->out, "Output directory")->required();
  cmd->add_option("--like", f->like,
                  "Take the shape (dims, slots, check, format, key type, vocabularies) from a "
                  "HugeCTR model configuration; other flags given override it")
      ->check(CLI::ExistingFile);
  DatagenFlags* p = f.get();
  const auto add = [&](CLI::Option* opt, std::function<void(data::DatagenOptions&)> set) {
    p->setters.emplace_back(opt, std::move(set));
  };
  add(cmd->add_option("--samples", f->samples, "Training samples")->default_val(defaults.samples),
      [p](auto& o) { o.samples = p->samples; });
  add(cmd->add_option("--eval-samples", f->eval_samples,
                      "Evaluation samples (default: samples / 10)"),
      [p](auto& o) { o.eval_samples = p->eval_samples; });
  add(cmd->add_option("--files", f->files, "Norm or Parquet training files")
          ->default_val(defaults.files),
      [p](auto& o) { o.files = p->files; });
  add(cmd->add_option("--eval-files", f->eval_files, "Norm or Parquet evaluation files")
          ->default_val(defaults.eval_files),
      [p](auto& o) { o.eval_files = p->eval_files; });
  add(cmd->add_option("--slots", f->slots, "Slots of the (single) sparse input")->default_val(26),
      [p](auto& o) { o.slots_per_input = {p->slots}; });
  CLI::Option* slots_option = p->setters.back().first;
  add(cmd->add_option("--slots-per-input", f->slots_per_input,
                      "Several sparse inputs: their slot counts, comma-separated (e.g. 1,26)")
          ->excludes(slots_option),
      [p](auto& o) {
        o.slots_per_input = parse_int_list(p->slots_per_input, "--slots-per-input");
      });
  add(cmd->add_option("--dense-dim", f->dense_dim, "Dense features")
          ->default_val(defaults.dense_dim),
      [p](auto& o) { o.dense_dim = p->dense_dim; });
  add(cmd->add_option("--label-dim", f->label_dim, "Label columns")
          ->default_val(defaults.label_dim),
      [p](auto& o) { o.label_dim = p->label_dim; });
  add(cmd->add_option("--format", f->format, "norm, raw or parquet")
          ->check(CLI::IsMember({"norm", "raw", "parquet"}))
          ->default_val("norm"),
      [p](auto& o) { o.format = data::parse_data_format(p->format, "--format"); });
  add(cmd->add_option("--raw-label-dense", f->raw_label_dense,
                      "Raw label and dense columns: float (float_label_dense) or int32 (HugeCTR's "
                      "default: dense counts v, read as log(v + 1)); --like takes the Data "
                      "layer's float_label_dense")
          ->check(CLI::IsMember({"float", "int32"}))
          ->default_val(defaults.float_label_dense ? "float" : "int32"),
      [p](auto& o) { o.float_label_dense = p->raw_label_dense == "float"; });
  add(cmd->add_option("--compression", f->compression, "Parquet pages: none, snappy or zstd")
          ->check(CLI::IsMember({"none", "snappy", "zstd", "gzip"}))
          ->default_val(data::parquet::default_write_codec() == data::parquet::Codec::Snappy
                            ? "snappy"
                            : "none"),
      [p](auto& o) {
        o.compression = data::parquet::parse_codec(p->compression, "--compression");
      });
  add(cmd->add_option("--parquet-keys", f->parquet_keys,
                      "Parquet key columns: int64 (HugeCTR's type) or int32 (reads faster)")
          ->check(CLI::IsMember({"int64", "int32"}))
          ->default_val("int64"),
      [p](auto& o) {
        o.parquet_keys = p->parquet_keys == "int32" ? data::parquet::PhysicalType::Int32
                                                    : data::parquet::PhysicalType::Int64;
      });
  add(cmd->add_option("--check", f->check, "Norm check mode: sum or none")
          ->check(CLI::IsMember({"sum", "none", "Sum", "None"}))
          ->default_val("sum"),
      [p](auto& o) { o.check = data::parse_check_mode(p->check, "--check"); });
  add(cmd->add_option("--key-type", f->key_type, "u32 (HugeCTR I32) or i64")
          ->check(CLI::IsMember({"u32", "i64", "I32", "I64"}))
          ->default_val("u32"),
      [p](auto& o) { o.key_type = data::parse_key_type(p->key_type, "--key-type"); });
  add(cmd->add_option("--vocab", f->vocab,
                      "Vocabulary per slot: one size for every slot, or one per slot "
                      "(comma-separated)")
          ->default_val(std::to_string(defaults.vocabulary[0])),
      [p](auto& o) { o.vocabulary = parse_int_list(p->vocab, "--vocab"); });
  add(cmd->add_option("--alpha", f->alpha, "Power-law exponent of key popularity (0: uniform)")
          ->default_val(defaults.alpha),
      [p](auto& o) { o.alpha = p->alpha; });
  add(cmd->add_option("--nnz-min", f->nnz_min, "Fewest keys per slot")
          ->default_val(defaults.nnz_min),
      [p](auto& o) { o.nnz_min = p->nnz_min; });
  add(cmd->add_option("--nnz-max", f->nnz_max, "Most keys per slot (multi-hot when > 1)")
          ->default_val(defaults.nnz_max),
      [p](auto& o) { o.nnz_max = p->nnz_max; });
  add(cmd->add_option("--seed", f->seed, "Random seed")->default_val(defaults.seed),
      [p](auto& o) { o.seed = p->seed; });
  add(cmd->add_option("--threads", f->threads, "Generator threads (default: all cores)"),
      [p](auto& o) { o.threads = p->threads; });
  add(cmd->add_option("--teacher-dim", f->teacher_dim, "Teacher's key embedding width")
          ->default_val(defaults.teacher.embedding_dim),
      [p](auto& o) { o.teacher.embedding_dim = p->teacher_dim; });
  add(cmd->add_option("--teacher-key-std", f->key_std, "Std of the teacher's per-key term")
          ->default_val(defaults.teacher.key_weight_std),
      [p](auto& o) { o.teacher.key_weight_std = p->key_std; });
  add(cmd->add_option("--teacher-interaction-std", f->interaction_std,
                      "Std of the teacher's pairwise slot interaction term")
          ->default_val(defaults.teacher.interaction_std),
      [p](auto& o) { o.teacher.interaction_std = p->interaction_std; });
  add(cmd->add_option("--teacher-dense-std", f->dense_std, "Std of the teacher's dense term")
          ->default_val(defaults.teacher.dense_std),
      [p](auto& o) { o.teacher.dense_std = p->dense_std; });
  add(cmd->add_option("--teacher-mean-logit", f->mean_logit,
                      "Mean teacher logit (sets the click rate)")
          ->default_val(defaults.teacher.mean_logit),
      [p](auto& o) { o.teacher.mean_logit = p->mean_logit; });
  add(cmd->add_option("--teacher-tail-decay", f->tail_decay,
                      "Rare keys weigh (1 + rank)^-decay in the teacher")
          ->default_val(defaults.teacher.tail_decay),
      [p](auto& o) { o.teacher.tail_decay = p->tail_decay; });
  cmd->callback([f] {
    data::DatagenOptions o;
    if (!f->like.empty()) {
      std::ifstream in(f->like);
      nlohmann::json config;
      try {
        config = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        EMBER_THROW_AS(ConfigError, "--like '", f->like, "': not valid JSON: ", e.what());
      }
      data::apply_model_config(config, f->like, o);
    }
    for (const auto& [opt, set] : f->setters) {
      if (f->like.empty() ? true : opt->count() > 0) {
        if (opt->count() > 0 || !opt->get_default_str().empty()) set(o);
      }
    }
    o.out_dir = f->out;
    const data::DatasetDescription d = data::generate_dataset(o);
    std::cout << "ember datagen: " << d.train.samples << " training and " << d.eval.samples
              << " evaluation samples in '" << f->out << "' (" << data::to_string(d.format) << ", "
              << d.slot_num() << " slots, teacher AUC " << d.extra["teacher_auc"].dump()
              << "); description: " << f->out << "/dataset.json" << std::endl;
  });
}

}  // namespace ember::cli
