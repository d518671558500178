// ember convert criteo IN.tsv... --out DIR: raw Criteo logs to Norm or Raw.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "ember/cli/cli_support.hpp"
#include "ember/cli/commands.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/criteo.hpp"
#include "ember/data/parquet/parquet_writer.hpp"

namespace ember::cli {

namespace {
struct ConvertFlags {
  data::CriteoConvertOptions options;
  std::string format = "norm", check = "sum", key_type = "u32", encoding = "vocab";
  std::string compression =
      data::parquet::default_write_codec() == data::parquet::Codec::Snappy ? "snappy" : "none";
  std::string parquet_keys = "int64";
  std::string hash_buckets;
  bool quiet = false;
};
}  // namespace

void add_convert_command(CLI::App& app) {
  CLI::App* convert = app.add_subcommand("convert", "Convert raw datasets to HugeCTR's formats");
  convert->require_subcommand(1);
  auto f = std::make_shared<ConvertFlags>();
  data::CriteoConvertOptions& o = f->options;
  CLI::App* cmd = convert->add_subcommand(
      "criteo",
      "Criteo click logs (label, I1..I13, C1..C26, tab-separated) to Norm (check Sum by default), "
      "Raw or Parquet: dense log(max(x, 0) + 1), categoricals to per-slot ids in disjoint key "
      "ranges");
  cmd->add_option("inputs", o.inputs, "Criteo TSV files, in order")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", o.out_dir, "Output directory")->required();
  cmd->add_option("--format", f->format, "norm, raw or parquet")
      ->check(CLI::IsMember({"norm", "raw", "parquet"}))
      ->capture_default_str();
  cmd->add_option("--compression", f->compression, "Parquet pages: none, snappy or zstd")
      ->check(CLI::IsMember({"none", "snappy", "zstd", "gzip"}))
      ->capture_default_str();
  cmd->add_option("--parquet-keys", f->parquet_keys,
                  "Parquet key columns: int64 (HugeCTR's type) or int32 (reads faster)")
      ->check(CLI::IsMember({"int64", "int32"}))
      ->capture_default_str();
  cmd->add_option("--check", f->check, "Norm check mode: sum or none")
      ->check(CLI::IsMember({"sum", "none", "Sum", "None"}))
      ->capture_default_str();
  cmd->add_option("--key-type", f->key_type, "u32 (HugeCTR I32) or i64")
      ->check(CLI::IsMember({"u32", "i64", "I32", "I64"}))
      ->capture_default_str();
  cmd->add_option("--encoding", f->encoding,
                  "vocab: frequency-thresholded vocabulary per slot (two passes); hash: buckets")
      ->check(CLI::IsMember({"vocab", "hash"}))
      ->capture_default_str();
  cmd->add_option("--min-frequency", o.min_frequency,
                  "vocab: values seen fewer times share id 0 with empty ones")
      ->capture_default_str();
  cmd->add_option("--hash-buckets", f->hash_buckets,
                  "hash: buckets per slot, one for all slots or 26 comma-separated (id 0 is "
                  "for empty values)");
  cmd->add_option("--eval-fraction", o.eval_fraction,
                  "The last fraction of the lines becomes the evaluation split")
      ->capture_default_str();
  cmd->add_option("--samples-per-file", o.samples_per_file,
                  "Norm and Parquet: samples per data file")
      ->capture_default_str();
  cmd->add_flag("--quiet", f->quiet, "No progress bar");
  cmd->callback([f] {
    data::CriteoConvertOptions o = f->options;
    o.format = data::parse_data_format(f->format, "--format");
    o.check = data::parse_check_mode(f->check, "--check");
    o.compression = data::parquet::parse_codec(f->compression, "--compression");
    o.parquet_keys = f->parquet_keys == "int32" ? data::parquet::PhysicalType::Int32
                                                : data::parquet::PhysicalType::Int64;
    o.key_type = data::parse_key_type(f->key_type, "--key-type");
    o.encoding = f->encoding == "hash" ? data::CategoricalEncoding::Hash
                                       : data::CategoricalEncoding::Vocabulary;
    if (!f->hash_buckets.empty())
      o.hash_buckets = parse_int_list(f->hash_buckets, "--hash-buckets");
    o.progress = !f->quiet;
    const data::CriteoConvertResult r = data::convert_criteo(o);
    if (r.malformed > 0) {
      std::cerr << "ember convert: " << r.malformed << " malformed line(s) skipped";
      if (!r.first_malformed.empty()) std::cerr << "; the first:";
      std::cerr << '\n';
      for (const auto& m : r.first_malformed) {
        std::cerr << "  " << m.file << ":" << m.line << ": " << m.reason << '\n';
      }
      std::cerr.flush();
    }
    std::int64_t vocabulary = 0;
    for (auto v : r.description.slot_size_array)
      vocabulary += v;
    std::cout << "ember convert: " << r.lines << " lines -> " << r.description.train.samples
              << " training and " << r.description.eval.samples << " evaluation samples ("
              << r.malformed << " malformed) in '" << o.out_dir << "', "
              << data::to_string(o.format) << ", vocabulary " << vocabulary
              << "; description: " << o.out_dir << "/dataset.json" << std::endl;
  });
}

}  // namespace ember::cli
