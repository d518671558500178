// A training session: a model configuration on a set of devices (one or more GPUs, or one or more
// CPU ranks), fed by the input pipeline, trained, evaluated, checkpointed and resumed.
//
// Per iteration each rank (its own thread) runs its replica's step on its share of the batch;
// display lines ("iter=<i> loss=<l> lr=<lr> samples/s=<x> epoch=<e>"), evaluations ("eval
// iter=<i> AUC=<a> AverageLoss=<l>"), checkpoints and the AUC target follow the solver. The
// losses and AUCs also go to RUN_DIR/metrics.csv when a run directory is given; a write to it
// that fails (a full disk) ends the run with an error. A loss that is not finite ends training
// with an error naming the iteration, or skips the batch (solver.nan_policy). A stop request
// (Ctrl-C) ends training after the current step with a snapshot.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/train/metrics.hpp"
#include "ember/train/model_config.hpp"

namespace ember::train {

// What a session is made for, for its log line ("training on cpu", "evaluating on cuda:0").
enum class SessionPurpose : std::uint8_t { Train, Evaluate, Predict };

struct SessionOptions {
  std::string device;             // "cpu", "cuda" or "" (the solver's, else cuda when present)
  std::vector<int> gpus;          // overrides solver.gpu
  int cpu_ranks = 0;              // CPU data-parallel ranks (0: the solver's, default 1)
  std::filesystem::path run_dir;  // where metrics.csv goes ("" for none)
  bool append_metrics = false;    // resuming: metrics.csv keeps its rows and grows
  bool progress = true;           // a progress bar when stderr is a terminal
  std::ostream* out = nullptr;    // display and evaluation lines (default std::cout)
  SessionPurpose purpose = SessionPurpose::Train;
  // Set (by a signal handler, say) to end training after the current step with a snapshot.
  const std::atomic<bool>* stop_requested = nullptr;
};

struct TrainResult {
  std::int64_t iterations = 0;  // the iteration count at the end (resumed runs count from 0)
  std::optional<double> last_loss;
  std::optional<EvalResult> last_eval;
  bool reached_auc_target = false;
  std::int64_t skipped_batches = 0;  // this call's batches skipped by nan_policy "skip"
  // Stopped by SessionOptions::stop_requested: where the snapshot of the last step went.
  bool interrupted = false;
  std::filesystem::path interrupt_snapshot;
  double seconds = 0;
  double samples_per_second = 0;
  std::vector<std::pair<std::int64_t, double>> losses;  // (iteration, loss) at display points
  std::vector<double> rates;  // samples/s over each display window, in order
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
  // What the solver's cuda_graph made of the first rank's training step: "off", "warming up",
  // "replaying", or "off: <why it runs without a graph>".
  std::string cuda_graph_status() const;
  std::int64_t iteration() const { return iteration_; }
  // Batches skipped by nan_policy "skip" since the start of training (kept in checkpoints).
  std::int64_t skipped_batches() const { return skipped_batches_; }

  // Trains until max_iter / num_epochs (counting from the current iteration, so a resumed
  // session continues where it stopped) or until the AUC target is reached.
  TrainResult train();
  // Evaluates over the evaluation source (up to max_eval_batches / max_eval_samples).
  EvalResult evaluate();
  // Evaluates and writes one "label,score" line per evaluated sample to `path`.
  EvalResult predict(const std::filesystem::path& path);

  // Writes a checkpoint directory (see checkpoint.hpp), the configuration included.
  void save(const std::filesystem::path& dir);
  // Reads a checkpoint written by save(); the next train() continues with the same next step
  // (weights, optimizer states, schedule, dropout masks and the data position). An interrupted
  // save of `dir` is recovered first (checkpoint_recovery.hpp); every dense tensor's name and
  // shape and every embedding's shape are checked against meta.json before anything is read.
  void load(const std::filesystem::path& dir, bool with_optimizer_states = true);

 private:
  struct Impl;
  class TrainingLoop;
  ModelConfig config_;
  SessionOptions options_;
  std::unique_ptr<Impl> impl_;
  std::int64_t iteration_ = 0;
  std::int64_t skipped_batches_ = 0;
};

}  // namespace ember::train
