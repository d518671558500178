// A training session: a model configuration on a set of devices (one or more GPUs, or one or more
// CPU ranks), fed by the input pipeline, trained, evaluated, checkpointed and resumed.
//
// Per iteration each rank (its own thread) runs its replica's step on its share of the batch;
// display lines ("iter=<i> loss=<l> lr=<lr> samples/s=<x>"), evaluations ("eval iter=<i>
// AUC=<a> AverageLoss=<l>"), checkpoints and the AUC target follow the solver. The losses and
// AUCs also go to RUN_DIR/metrics.csv when a run directory is given.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/train/cache_report.hpp"
#include "ember/train/metrics.hpp"
#include "ember/train/model_config.hpp"

namespace ember::train {

struct SessionOptions {
  std::string device;             // "cpu", "cuda" or "" (the solver's, else cuda when present)
  std::vector<int> gpus;          // overrides solver.gpu
  int cpu_ranks = 0;              // CPU data-parallel ranks (0: the solver's, default 1)
  std::filesystem::path run_dir;  // where metrics.csv goes ("" for none)
  bool progress = true;           // a progress bar when stderr is a terminal
  std::ostream* out = nullptr;    // display and evaluation lines (default std::cout)
};

struct TrainResult {
  std::int64_t iterations = 0;  // the iteration count at the end (resumed runs count from 0)
  std::optional<double> last_loss;
  std::optional<EvalResult> last_eval;
  bool reached_auc_target = false;
  double seconds = 0;
  double samples_per_second = 0;
  std::vector<std::pair<std::int64_t, double>> losses;  // (iteration, loss) at display points
  std::vector<double> rates;  // samples/s over each display window, in order
  // Host-backed embeddings: the cache's figures over each display window, in order.
  std::vector<CacheFigures> cache;
};

class Session {
 public:
  Session(ModelConfig config, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const ModelConfig& config() const { return config_; }
  // "cpu x2", "cuda:0", ... for messages.
  std::string describe_devices() const;
  int ranks() const;
  std::int64_t iteration() const { return iteration_; }

  // Trains until max_iter / num_epochs (counting from the current iteration, so a resumed
  // session continues where it stopped) or until the AUC target is reached.
  TrainResult train();
  // Evaluates over the evaluation source (up to max_eval_batches / max_eval_samples).
  EvalResult evaluate();
  // Evaluates and writes one "label,score" line per evaluated sample to `path`.
  EvalResult predict(const std::filesystem::path& path);

  // Writes a checkpoint directory (see checkpoint.hpp).
  void save(const std::filesystem::path& dir);
  // Reads a checkpoint written by save(); the next train() continues with the same next step
  // (weights, optimizer states, schedule, dropout masks and the data position).
  void load(const std::filesystem::path& dir, bool with_optimizer_states = true);

 private:
  struct Impl;
  class TrainingLoop;
  ModelConfig config_;
  SessionOptions options_;
  std::unique_ptr<Impl> impl_;
  std::int64_t iteration_ = 0;
};

}  // namespace ember::train
