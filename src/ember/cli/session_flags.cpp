#include "ember/cli/session_flags.hpp"

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "ember/cli/cli_support.hpp"
#include "ember/core/error.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_format.hpp"
#include "ember/train/checkpoint_recovery.hpp"

namespace ember::cli {

namespace fs = std::filesystem;

void SessionFlags::add_to(CLI::App& cmd, bool config_required) {
  auto* c = cmd.add_option("config", config,
                           config_required
                               ? "HugeCTR v3 JSON model configuration"
                               : "HugeCTR v3 JSON model configuration (default: the one recorded "
                                 "in the model)");
  if (config_required) c->required();
  cmd.add_option("--device", device, "cpu or cuda (default: the solver's, else cuda when present)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--gpus", gpus, "GPU ids, comma-separated (overrides solver.gpu)");
  cpu_ranks_option = cmd.add_option(
      "--cpu-ranks", cpu_ranks,
      "CPU data-parallel ranks, 1 to 64 (in-process; default: solver.cpu_ranks, else 1)");
  // One value per --set, so that "--set a=1 config.json" leaves the configuration positional.
  cmd.add_option("--set", overrides,
                 "Override a configuration value, e.g. --set solver.batchsize=1024; "
                 "--set KEY=null deletes KEY (repeatable)")
      ->allow_extra_args(false);
}

train::ModelConfig SessionFlags::load_config() const {
  return train::load_model_config(config, overrides);
}

train::SessionOptions SessionFlags::session_options() const {
  train::SessionOptions o;
  o.device = device;
  if (cpu_ranks_option != nullptr && cpu_ranks_option->count() > 0 &&
      (cpu_ranks < 1 || cpu_ranks > 64)) {
    EMBER_THROW_AS(ConfigError, "--cpu-ranks must be an integer in [1, 64], got ", cpu_ranks);
  }
  o.cpu_ranks = cpu_ranks;
  if (!gpus.empty()) {
    for (std::int64_t g : parse_int_list(gpus, "--gpus"))
      o.gpus.push_back(static_cast<int>(g));
  }
  return o;
}

void ModelFlags::add_to(CLI::App& cmd) {
  session.add_to(cmd, /*config_required=*/false);
  cmd.add_option("--model", model, "The model: a checkpoint directory")->required();
  cmd.add_option("--data", data,
                 "Score this data instead of the configuration's eval_source: a Norm file list "
                 "or data file, or a Raw file");
}

ModelFlags::TempFile::~TempFile() {
  std::error_code ec;
  fs::remove(path, ec);
}

namespace {

// A Norm data file (not a file list): its first bytes read as a Norm header.
bool is_norm_data_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[16] = {};
  in.read(head, sizeof head);
  data::CheckMode check{};
  return in.gcount() >= 12 &&
         data::detect_norm_check(head, static_cast<std::size_t>(in.gcount()), &check);
}

}  // namespace

std::unique_ptr<train::Session> ModelFlags::load_model(train::SessionPurpose purpose) {
  const fs::path dir(model);
  train::recover_checkpoint(dir);
  SessionFlags flags = session;
  if (flags.config.empty()) {
    // The checkpoint's own record of what it was trained with.
    if (!fs::is_directory(dir)) {
      EMBER_THROW_AS(
          DataError, "--model ", model,
          fs::exists(dir) ? " is a file, not a checkpoint directory" : " does not exist");
    }
    if (!fs::is_regular_file(dir / "config.json")) {
      EMBER_THROW_AS(ConfigError, "checkpoint ", model,
                     " has no recorded configuration (config.json; checkpoints of older Embers "
                     "lack it): name the configuration, e.g. ember ",
                     purpose == train::SessionPurpose::Predict ? "predict" : "eval",
                     " CONFIG --model ", model);
    }
    flags.config = (dir / "config.json").string();
  }
  train::ModelConfig config = flags.load_config();
  if (!data.empty()) {
    if (!fs::is_regular_file(data)) {
      EMBER_THROW_AS(DataError, "--data ", data,
                     fs::is_directory(data) ? " is a directory; give a file list or a data file"
                                            : " does not exist");
    }
    std::string source = data;
    if (config.data.format == data::DataFormat::Norm && is_norm_data_file(data)) {
      // Norm sources are file lists: a list of this one file.
      temp_list_ = std::make_shared<TempFile>();
      temp_list_->path =
          fs::temp_directory_path() / ("ember-data-" + std::to_string(::getpid()) + ".txt");
      data::write_file_list(temp_list_->path.string(), {fs::absolute(data).string()});
      source = temp_list_->path.string();
    }
    config.data.eval_source = source;
    config.json["layers"][0]["eval_source"] = source;
  }
  // The checkpoint holds the model: the solver's starting files are not read again.
  config.solver.dense_model_file.clear();
  config.solver.sparse_model_files.clear();
  config.solver.dense_opt_states_file.clear();
  config.solver.sparse_opt_states_files.clear();
  train::SessionOptions o = flags.session_options();
  o.progress = false;
  o.out = &std::cerr;
  o.purpose = purpose;
  auto s = std::make_unique<train::Session>(std::move(config), o);
  s->load(model, /*with_optimizer_states=*/false);
  return s;
}

}  // namespace ember::cli
