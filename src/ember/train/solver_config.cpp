#include "ember/train/solver_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"

namespace ember::train {

namespace {

// Keys of HugeCTR's solver that Ember accepts and ignores: it always runs what they switch on,
// or has no such knob.
constexpr std::string_view kNoEffect = "Ember has no such switch";
constexpr IgnoredKey kIgnoredSolverKeys[] = {
    {"concurrent_mlp", kNoEffect},
    {"overlap_lr", kNoEffect},
    {"overlap_init_wgrad", kNoEffect},
    {"overlap_ar_a2a", kNoEffect},
    {"use_overlapped_pipeline", kNoEffect},
    {"grouped_all_reduce", kNoEffect},
    {"is_dlrm", kNoEffect},
    {"async_mlp_wgrad", kNoEffect},
};

constexpr IntRange kCount = IntRange::at_least(0);

// A flat list of device ids (one node), or one list per node.
std::vector<std::vector<int>> parse_gpus(ConfigReader& r) {
  std::vector<std::vector<int>> nodes;
  if (!r.has("gpu")) return nodes;
  constexpr IntRange kDevice = IntRange::between(0, std::numeric_limits<int>::max());
  const nlohmann::json& v = r.raw("gpu");
  std::vector<std::vector<std::int64_t>> ids;
  if (v.is_array() && !v.empty() && v.front().is_array()) {
    ids = r.integer_lists("gpu", kDevice);
  } else {
    ids.push_back(r.integers("gpu", kDevice));
  }
  for (const auto& node : ids) {
    for (std::int64_t id : node) {
      if (std::count(node.begin(), node.end(), id) > 1) {
        r.fail("gpu", cat("lists device ", id, " twice"));
      }
    }
    nodes.emplace_back(node.begin(), node.end());
  }
  return nodes;
}

std::vector<EvalMetric> parse_metrics(ConfigReader& r) {
  if (!r.has("eval_metrics")) return {{EvalMetric::Kind::AUC, std::nullopt}};
  const std::vector<std::string> texts = r.strings("eval_metrics");
  std::vector<EvalMetric> metrics;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    const std::string key = cat("eval_metrics[", i, "]");
    const auto colon = text.find(':');
    const std::string name = text.substr(0, colon);
    EvalMetric m;
    if (name == "AUC") {
      m.kind = EvalMetric::Kind::AUC;
    } else if (name == "AverageLoss") {
      m.kind = EvalMetric::Kind::AverageLoss;
    } else if (name == "HitRate") {
      m.kind = EvalMetric::Kind::HitRate;
    } else {
      r.invalid(
          key, "\"AUC\", \"AUC:<target>\", \"AverageLoss\", \"HitRate\" or \"HitRate:<threshold>\"",
          text);
    }
    if (colon != std::string::npos) {
      if (m.kind == EvalMetric::Kind::AverageLoss) {
        r.invalid(key, "AverageLoss without a number (AUC takes a target, HitRate a threshold)",
                  text);
      }
      const std::string number = text.substr(colon + 1);
      double value = 0;
      try {
        std::size_t used = 0;
        value = std::stod(number, &used);
        if (used != number.size()) throw std::invalid_argument(number);
      } catch (const std::exception&) {
        r.invalid(key, cat("\"", name, ":<number>\" with a number after the colon"), text);
      }
      if (m.kind == EvalMetric::Kind::AUC) {
        m.target = value;
      } else {
        if (!(value >= 0 && value < 1)) {
          r.invalid(key, "\"HitRate:<threshold>\" with a threshold in [0, 1)", text);
        }
        m.threshold = value;
      }
    }
    metrics.push_back(m);
  }
  return metrics;
}

void read_mixed_precision(ConfigReader& r, SolverConfig& c) {
  static constexpr Named<DType> kHalfTypes[] = {
      {"f16", DType::F16}, {"fp16", DType::F16}, {"bf16", DType::BF16}};
  c.mixed_precision_dtype = r.choice_or("mixed_precision_dtype", DType::F16, kHalfTypes);
  if (r.has("mixed_precision_dtype") && !r.has("mixed_precision")) {
    r.fail(
        "\"mixed_precision_dtype\" is given without \"mixed_precision\" (set it to true or a "
        "loss scaler)");
  }
  if (!r.has("mixed_precision")) return;
  // true/false, or HugeCTR's loss scaler (which turns it on).
  const nlohmann::json& v = r.raw("mixed_precision");
  if (v.is_boolean()) {
    c.mixed_precision = v.get<bool>();
    c.loss_scaler = c.mixed_precision ? 1024.0f : 1.0f;
    return;
  }
  const auto scaler = ConfigReader::integer_value(v);
  if (!scaler || (*scaler != 128 && *scaler != 256 && *scaler != 512 && *scaler != 1024)) {
    r.invalid("mixed_precision", "true, false or a loss scaler of 128, 256, 512 or 1024", v);
  }
  c.mixed_precision = true;
  c.loss_scaler = static_cast<float>(*scaler);
}

// How long to train, batch sizes, display, evaluation and snapshots.
void read_schedule(ConfigReader& r, SolverConfig& c) {
  c.display = r.integer_or("display", 200, kCount);
  if (r.has("max_iter") == r.has("num_epochs")) {
    r.fail("exactly one of \"max_iter\" and \"num_epochs\" must be given");
  }
  c.max_iter = r.integer_or("max_iter", 0, IntRange::at_least(1));
  c.num_epochs = r.integer_or("num_epochs", 0, IntRange::at_least(1));
  c.batchsize = r.integer("batchsize", IntRange::at_least(1));
  c.batchsize_eval = r.integer_or("batchsize_eval", c.batchsize, IntRange::at_least(1));
  c.snapshot = r.integer_or("snapshot", 0, kCount);
  c.snapshot_prefix = r.string_or("snapshot_prefix", "");
  c.keep_snapshots = r.integer_or("keep_snapshots", 0, kCount);
  c.eval_interval = r.integer_or("eval_interval", 0, kCount);
  // "eval_batches" is what HugeCTR 2.x called max_eval_batches.
  if (r.has("eval_batches") && r.has("max_eval_batches")) {
    r.fail("give \"max_eval_batches\" or its old name \"eval_batches\", not both");
  }
  if (r.has("eval_batches")) {
    log_once(
        "alias eval_batches", spdlog::level::info,
        cat(r.owner(), ": accepting HugeCTR's older \"eval_batches\" as \"max_eval_batches\""));
  }
  c.max_eval_batches = r.has("eval_batches") ? r.integer("eval_batches", kCount)
                                             : r.integer_or("max_eval_batches", 0, kCount);
  c.max_eval_samples = r.integer_or("max_eval_samples", 0, kCount);
  c.num_iterations_statistics = r.integer_or("num_iterations_statistics", 20, kCount);
  if (c.max_eval_batches > 0 && c.max_eval_samples > 0) {
    r.fail("give \"max_eval_batches\" or \"max_eval_samples\", not both");
  }
}

}  // namespace

SolverConfig parse_solver(const nlohmann::json& solver, const std::string& where) {
  ConfigReader r(solver, where);
  SolverConfig c;
  c.lr_policy = r.string_or("lr_policy", "fixed");
  if (c.lr_policy != "fixed") {
    r.invalid("lr_policy", "\"fixed\" (HugeCTR's only policy; schedules go in the optimizer block)",
              c.lr_policy);
  }
  read_schedule(r, c);
  c.dense_model_file = r.string_or("dense_model_file", "");
  if (r.has("sparse_model_file")) c.sparse_model_files = r.string_list("sparse_model_file");
  c.dense_opt_states_file = r.string_or("dense_opt_states_file", "");
  if (r.has("sparse_opt_states_file")) {
    c.sparse_opt_states_files = r.string_list("sparse_opt_states_file");
  }
  read_mixed_precision(r, c);
  c.enable_tf32_compute = r.boolean_or("enable_tf32_compute", false);
  if (c.mixed_precision && c.enable_tf32_compute) {
    r.fail("\"mixed_precision\" and \"enable_tf32_compute\" cannot be used together");
  }
  c.gpu_per_process = r.has("gpu") && r.raw("gpu").is_array() && !r.raw("gpu").empty() &&
                      r.raw("gpu").front().is_array();
  c.gpus = parse_gpus(r);
  c.eval_metrics = parse_metrics(r);
  static constexpr Named<DType> kKeyTypes[] = {{"I32", DType::U32}, {"I64", DType::I64}};
  c.key_type = r.choice_or("input_key_type", DType::U32, kKeyTypes);
  c.seed = static_cast<std::uint64_t>(r.integer_or("seed", 0, IntRange::at_least(0)));
  c.algorithm_search = r.boolean_or("algorithm_search", true);
  c.export_predictions_prefix = r.string_or("export_predictions_prefix", "");
  c.enable_overlap = r.boolean_or("enable_overlap", false);
  if (c.enable_overlap) {
    log_once("solver enable_overlap", spdlog::level::info,
             cat(r.owner(),
                 ": \"enable_overlap\": Ember always overlaps reading, copying and training "
                 "(the input pipeline prefetches while a step runs); the key changes nothing"));
  }
  // Ember's additions.
  static constexpr Named<std::string_view> kDevices[] = {{"cpu", "cpu"}, {"cuda", "cuda"}};
  c.device = r.choice_or("device", std::string_view(), kDevices);
  c.cpu_ranks = static_cast<int>(r.integer_or("cpu_ranks", 1, IntRange::between(1, 64)));
  static constexpr Named<DType> kTableTypes[] = {
      {"f32", DType::F32}, {"f16", DType::F16}, {"bf16", DType::BF16}};
  c.embedding_dtype = r.choice_or("embedding_dtype", DType::F32, kTableTypes);
  c.cuda_graph = r.boolean_or("cuda_graph", false);
  if (r.has("holistic_cuda_graph") && r.has("use_holistic_cuda_graph")) {
    r.fail(
        "give \"holistic_cuda_graph\" or its other spelling \"use_holistic_cuda_graph\", "
        "not both");
  }
  c.holistic_cuda_graph = r.has("use_holistic_cuda_graph")
                              ? r.boolean("use_holistic_cuda_graph")
                              : r.boolean_or("holistic_cuda_graph", false);
  static constexpr Named<bool> kRoundings[] = {{"stochastic", true}, {"nearest", false}};
  c.embedding_stochastic_rounding = r.choice_or("embedding_rounding", true, kRoundings);
  c.overlap_embedding = r.boolean_or("overlap_embedding", true);
  c.embedding_gather = r.boolean_or("embedding_gather", true);
  static constexpr Named<NanPolicy> kNanPolicies[] = {{"stop", NanPolicy::Stop},
                                                      {"skip", NanPolicy::Skip}};
  c.nan_policy = r.choice_or("nan_policy", NanPolicy::Stop, kNanPolicies);
  r.ignore(kIgnoredSolverKeys);
  r.finish();
  return c;
}

std::vector<int> SolverConfig::gpu_list(int process, int processes) const {
  if (gpus.empty()) return {0};
  if (!gpu_per_process) return gpus.front();
  if (static_cast<int>(gpus.size()) != processes) {
    EMBER_THROW_AS(ConfigError, "solver.gpu has ", gpus.size(), " list(s), one per node, but ",
                   processes == 1 ? std::string("this is one process (not started by mpirun)")
                                  : cat("the MPI job has ", processes, " processes"),
                   "; start one process per list (mpirun -np ", gpus.size(),
                   "), or give one flat list for every process");
  }
  return gpus[static_cast<std::size_t>(process)];
}

std::optional<double> SolverConfig::auc_target() const {
  for (const EvalMetric& m : eval_metrics) {
    if (m.kind == EvalMetric::Kind::AUC && m.target) return m.target;
  }
  return std::nullopt;
}

std::optional<double> SolverConfig::hit_rate_threshold() const {
  for (const EvalMetric& m : eval_metrics) {
    if (m.kind == EvalMetric::Kind::HitRate) return m.threshold;
  }
  return std::nullopt;
}

bool SolverConfig::wants(EvalMetric::Kind kind) const {
  return std::any_of(eval_metrics.begin(), eval_metrics.end(),
                     [kind](const EvalMetric& m) { return m.kind == kind; });
}

}  // namespace ember::train
