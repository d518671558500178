// The "solver" block of a HugeCTR v3 configuration: how long to train, batch sizes, display,
// evaluation, snapshots, precision, devices and metrics.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/dtype.hpp"

namespace ember::train {

struct EvalMetric {
  enum class Kind : std::uint8_t { AUC, AverageLoss, HitRate };
  Kind kind = Kind::AUC;
  // "AUC:0.8025": stop training once an evaluation reaches it.
  std::optional<double> target;
  // "HitRate:<t>": a score above t counts as a predicted positive (HugeCTR's kernel uses 0.8,
  // the default); HitRate is the fraction of predicted positives whose label is 1.
  double threshold = 0.8;
};

// What a training step whose loss is not finite (NaN or infinite) does.
enum class NanPolicy : std::uint8_t {
  Stop,  // training ends with an error naming the iteration
  Skip,  // the batch is skipped: no dense or sparse update; skipped batches are counted
};

struct SolverConfig {
  std::string lr_policy = "fixed";
  std::int64_t display = 200;  // iterations between display lines (0: none)
  std::int64_t max_iter = 0;   // exactly one of max_iter and num_epochs is set
  std::int64_t num_epochs = 0;
  std::int64_t batchsize = 0;
  std::int64_t batchsize_eval = 0;    // defaults to batchsize
  std::int64_t snapshot = 0;          // iterations between checkpoints (0: none)
  std::string snapshot_prefix;        // checkpoints go to <snapshot_prefix>snapshot_<iter>/
  std::int64_t keep_snapshots = 0;    // keep the newest N snapshots of the run (0: all)
  std::int64_t eval_interval = 0;     // iterations between evaluations (0: only at the end)
  std::int64_t max_eval_batches = 0;  // 0: the whole evaluation set
  std::int64_t max_eval_samples = 0;
  // Training batches whose keys choose HybridSparseEmbedding's frequent categories (HugeCTR's
  // statistics pass; a layer's own sparse_embedding_hparam key wins).
  std::int64_t num_iterations_statistics = 20;
  // Initial models (HugeCTR's dense_model_file / sparse_model_file, one sparse entry per
  // embedding) and optimizer states to start from.
  std::string dense_model_file;
  std::vector<std::string> sparse_model_files;
  std::string dense_opt_states_file;
  std::vector<std::string> sparse_opt_states_files;
  bool mixed_precision = false;
  float loss_scaler = 1.0f;  // mixed_precision's value (128, 256, 512 or 1024)
  // Ember's "mixed_precision_dtype": the 16-bit activation type, "f16" (HugeCTR's half, the
  // default) or "bf16".
  DType mixed_precision_dtype = DType::F16;
  bool enable_tf32_compute = false;
  // Ember's: how embedding tables store their vectors ("embedding_dtype": "f32", "f16" or
  // "bf16") and how a 16-bit weight takes its update ("embedding_rounding": "stochastic" or
  // "nearest"); docs/embedding.md, "16-bit tables".
  DType embedding_dtype = DType::F32;
  // HugeCTR's "cuda_graph" and "holistic_cuda_graph" (or "use_holistic_cuda_graph"): capture the
  // dense forward and backward of a training step once and replay it (docs/training.md, "CUDA
  // graphs"). Off by default in Ember (HugeCTR's cuda_graph defaults to on).
  bool cuda_graph = false;
  bool holistic_cuda_graph = false;
  bool embedding_stochastic_rounding = true;
  // Ember's "overlap_embedding": on a GPU, the embeddings' lookup and their backward and update
  // run on a second stream beside the dense layers that do not need them (docs/training.md,
  // "The embeddings beside the dense network"). On by default; false runs the step on one stream.
  bool overlap_embedding = true;
  // Ember's "embedding_gather": an Interaction layer that reads a one-rank embedding with rows of
  // its own dtype reads them in place, through each bag's row index, instead of a pooled copy
  // (docs/training.md, "The interaction reads the table"). On by default; false pools as before,
  // with the same results.
  bool embedding_gather = true;
  // One list of GPU ids per node, i.e. per process of an MPI job (a flat list is one list, the
  // same for every process; gpu_per_process tells the two spellings apart).
  std::vector<std::vector<int>> gpus;
  bool gpu_per_process = false;
  std::vector<EvalMetric> eval_metrics{{EvalMetric::Kind::AUC, std::nullopt}};
  DType key_type = DType::U32;  // input_key_type I32 / I64
  std::uint64_t seed = 0;
  bool algorithm_search = true;
  // Each evaluation writes <prefix>_prediction_<iter> and <prefix>_label_<iter> (HugeCTR's).
  std::string export_predictions_prefix;
  // HugeCTR's overlapped pipeline switch; Ember always overlaps input and training (logged).
  bool enable_overlap = false;
  // Ember's additions: "cpu", "cuda", or empty (cuda when a GPU is present, else cpu); and the
  // number of in-process CPU ranks (data-parallel replicas on the host), default 1.
  std::string device;
  int cpu_ranks = 1;
  NanPolicy nan_policy = NanPolicy::Stop;

  // The GPUs of process `process` of `processes` (a list of lists must have one list per
  // process; a flat list serves every process); {0} when solver.gpu is absent.
  std::vector<int> gpu_list(int process = 0, int processes = 1) const;
  std::optional<double> auc_target() const;
  bool wants(EvalMetric::Kind kind) const;
  // The HitRate metric's threshold when it is asked for.
  std::optional<double> hit_rate_threshold() const;
};

// Parses the solver object; `where` names it in messages ("solver"). Unknown keys are a
// ConfigError naming the key, as are missing or malformed required ones.
SolverConfig parse_solver(const nlohmann::json& solver, const std::string& where);

}  // namespace ember::train
