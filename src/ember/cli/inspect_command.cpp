// ember inspect PATH: a dataset's header and samples as JSON lines on stdout.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "ember/cli/cli_support.hpp"
#include "ember/cli/commands.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/inspect.hpp"

namespace ember::cli {

namespace {
struct InspectFlags {
  data::InspectOptions options;
  std::string key_type = "u32";
  std::string format = "norm";
  std::string slot_sizes;
};
}  // namespace

void add_inspect_command(CLI::App& app) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Print a dataset (a Norm data file, a Norm file list, or a Raw file) as JSON lines: the "
      "header, then one {\"label\",\"dense\",\"slots\"} object per sample");
  data::InspectOptions& o = flags->options;
  cmd->add_option("path", o.path, "Norm data file, file list, or Raw file")->required();
  cmd->add_option("--limit", o.limit, "Print at most N samples (default: all)");
  cmd->add_option("--offset", o.offset, "Skip the first N samples");
  cmd->add_option("--key-type", flags->key_type, "Norm key type: u32 (HugeCTR I32) or i64")
      ->check(CLI::IsMember({"u32", "i64", "I32", "I64"}))
      ->capture_default_str();
  cmd->add_option("--format", flags->format, "norm (data file or file list; detected) or raw")
      ->check(CLI::IsMember({"norm", "raw"}))
      ->capture_default_str();
  cmd->add_option("--label-dim", o.label_dim, "Raw: label values per sample")
      ->capture_default_str();
  cmd->add_option("--dense-dim", o.dense_dim, "Raw: dense values per sample")
      ->capture_default_str();
  cmd->add_option("--slot-num", o.slot_num, "Raw: slots (keys) per sample");
  cmd->add_option("--slot-size-array", flags->slot_sizes,
                  "Raw: vocabulary per slot, comma-separated (keys get the slot offsets)");
  cmd->add_flag("--float-label-dense", o.float_label_dense,
                "Raw: label and dense are float32 (default: int32, dense -> log(v + 1))");
  cmd->callback([flags] {
    data::InspectOptions o = flags->options;
    o.key_type = data::parse_key_type(flags->key_type, "--key-type");
    o.raw = flags->format == "raw";
    if (!flags->slot_sizes.empty()) {
      o.slot_size_array = parse_int_list(flags->slot_sizes, "--slot-size-array");
      if (o.slot_num == 0) o.slot_num = static_cast<std::int64_t>(o.slot_size_array.size());
    }
    std::ios::sync_with_stdio(false);
    const data::InspectSummary s = data::inspect_dataset(o, std::cout);
    std::cout.flush();
    if (s.dropped > 0) {
      std::cerr << "ember inspect: " << s.dropped
                << " sample(s) dropped by a checksum mismatch and skipped:";
      for (const auto& d : s.first_drops)
        std::cerr << " " << d.file << " sample " << d.sample_index << ";";
      if (static_cast<std::int64_t>(s.first_drops.size()) < s.dropped) std::cerr << " ...";
      std::cerr << std::endl;
    }
  });
}

}  // namespace ember::cli
