// Flags every command that builds a training session shares (train, eval, predict): the
// configuration, devices, CPU ranks and configuration overrides; for eval and predict also the
// model and the data to score.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ember/train/model_config.hpp"
#include "ember/train/session.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ember::cli {

struct SessionFlags {
  std::string config;
  std::string device;
  std::string gpus;  // "0,1"
  int cpu_ranks = 0;
  std::vector<std::string> overrides;
  CLI::Option* cpu_ranks_option = nullptr;

  // `config_required`: train needs the configuration; eval and predict take the one recorded in
  // the model when it is left out.
  void add_to(CLI::App& cmd, bool config_required = true);
  train::ModelConfig load_config() const;
  train::SessionOptions session_options() const;
};

// eval and predict: the model to load and the data to score.
struct ModelFlags {
  SessionFlags session;
  std::string model;
  std::string data;  // a Norm file list or data file, or a Raw file: replaces eval_source

  void add_to(CLI::App& cmd);
  // A session with the weights of the checkpoint (no optimizer states), no progress bar, its
  // evaluation lines on stderr (stdout is the command's result). The configuration is the one
  // given, else the one recorded in the checkpoint (config.json), with --set and --data applied.
  std::unique_ptr<train::Session> load_model(train::SessionPurpose purpose);

 private:
  struct TempFile {
    std::filesystem::path path;
    ~TempFile();
  };
  std::shared_ptr<TempFile> temp_list_;
};

}  // namespace ember::cli
