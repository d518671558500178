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
#include <span>
#include <string>
#include <vector>

#include "ember/core/part_timer.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/train/cache_report.hpp"
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
  // Train over MPI even as a single process (`--mpi`). A process started by an MPI launcher
  // (`mpirun -np N`) joins its job without being asked: docs/multi-process.md.
  bool mpi = false;
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
  // Host-backed embeddings: the cache's figures over each display window, in order.
  std::vector<CacheFigures> cache;
  // GPU input batches whose device memory was made while training, beyond what the input
  // pipeline made up front (0 unless batches were held longer than it foresaw).
  std::int64_t late_device_slots = 0;
};

// Samples held in memory, for Session::predict_samples(): `rows` samples' dense features
// (row-major [rows, dense_dim]) and, per sparse input of the Data layer in order, the keys of
// rows * slot_num bags in CSR form (bag b = sample * slot_num + slot; row_offsets has
// rows * slot_num + 1 entries from 0), the keys as the embedding reads them (Raw and Parquet data:
// with the slot offsets of slot_size_array added, as the input pipeline adds them).
struct SampleArrays {
  struct Keys {
    std::span<const std::int64_t> row_offsets;
    std::span<const std::int64_t> keys;
  };
  std::int64_t rows = 0;
  std::span<const float> dense;
  std::vector<Keys> sparse;
};

// One dense tensor of the model (a "<layer>.<parameter>" name), its values row-major.
struct DenseWeight {
  std::string name;
  std::vector<std::int64_t> shape;
  bool trainable = true;
  std::vector<float> values;
};

class CheckpointWriter;
struct CheckpointFile;

class Session {
 public:
  Session(ModelConfig config, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const ModelConfig& config() const { return config_; }
  // "cpu x2", "cuda:0", ... for messages ("cpu x2 in each of 3 processes" in an MPI job).
  std::string describe_devices() const;
  // The ranks of every process of the job.
  int ranks() const;
  // What the solver's cuda_graph made of the first rank's training step: "off", "warming up",
  // "replaying", or "off: <why it runs without a graph>".
  std::string cuda_graph_status() const;
  // The first rank's embedding forwards that started from a batch prepared ahead (while the step
  // before ran), over the session's life.
  std::int64_t forwards_prepared_ahead() const;
  // The embeddings whose rows an interaction reads in place in training (solver
  // embedding_gather), in configuration order.
  std::vector<std::string> gathered_embeddings() const;
  std::int64_t iteration() const { return iteration_; }
  // Batches skipped by nan_policy "skip" since the start of training (kept in checkpoints).
  std::int64_t skipped_batches() const { return skipped_batches_; }

  // Trains until max_iter / num_epochs (counting from the current iteration, so a resumed
  // session continues where it stopped) or until the AUC target is reached.
  TrainResult train();
  // One training step on the next batch, as HugeCTR's per-step Session.train(): no display line,
  // evaluation, snapshot or metrics row (the caller decides). Like train(), it takes the batch
  // after it from the pipeline and lets the embeddings prepare it while the step runs. False,
  // without a step, when a num_epochs run has no more data; in a max_iter run the data repeats and
  // max_iter is the caller's to keep. nan_policy applies as in train() (on a GPU "stop" notices a
  // non-finite loss one step late). Successive calls share one input pipeline; train() and load()
  // start anew.
  bool train_step();
  // Profiling: with a timer (on the first rank's place), every training step of train() and
  // train_step() is timed by parts on the first rank: the host's wait for the next batch (a host
  // part), then on its stream the batch's inputs, embedding forward, each dense layer by its part
  // of the model (network/layer_parts.hpp), the dense optimizer, embedding backward and update
  // (Replica::set_part_timer). nullptr (the default) times nothing. The timer must outlive its
  // use; read it with PartTimer::collect().
  void set_part_timer(PartTimer* timer);

  // The ranks' mean loss of the last training step (waits for the device); nothing before the
  // first step of this session.
  std::optional<double> current_loss();
  // Evaluates over the evaluation source (up to max_eval_batches / max_eval_samples).
  EvalResult evaluate();
  // Evaluates and writes one "label,score" line per evaluated sample to `path`.
  EvalResult predict(const std::filesystem::path& path);
  // The predicted probability of each sample given in memory (of each column for
  // MultiCrossEntropyLoss: rows x columns, row-major), in batches of solver.batchsize_eval.
  std::vector<double> predict_samples(const SampleArrays& samples);

  // Collective. The embedding `name` gathered from every rank, sorted by key.
  embedding::EmbeddingSnapshot embedding_snapshot(const std::string& name);
  // The dense tensors (trainable weights and non-trainable buffers), in the order of the model.
  std::vector<DenseWeight> dense_weights() const;
  // Replaces the dense tensors named in `weights` on every rank (each must be a tensor of the
  // model with its shape); the others keep their values.
  void set_dense_weights(const std::vector<DenseWeight>& weights);

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
  // Process 0's part of save(): config.json, meta.json (with the files the ranks hashed and the
  // embeddings' shard layout), the commit.
  void write_checkpoint_files(CheckpointWriter& writer, const std::vector<CheckpointFile>& hashed,
                              const nlohmann::json& sparse_layout);
  // train_step()'s loop: checks the loss of a step not checked yet (before a save), or ends
  // (before a load: the next step reads from where the checkpoint stopped).
  void settle_stepping();
  void end_stepping();
  ModelConfig config_;
  SessionOptions options_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<TrainingLoop> stepping_;  // train_step()'s loop, kept between calls
  std::int64_t iteration_ = 0;
  std::int64_t skipped_batches_ = 0;
};

}  // namespace ember::train
