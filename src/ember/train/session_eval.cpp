// Session's evaluation and prediction: the evaluation pipeline over the eval source, the metrics
// (solver.eval_metrics), HugeCTR's export of each evaluation's predictions
// (solver.export_predictions_prefix), and `predict`'s "label,score" file.
#include <fstream>
#include <iomanip>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/train/session_impl.hpp"

namespace ember::train {

namespace fs = std::filesystem;

namespace {

// Runs the evaluation pipeline; `on_batch(logits, labels, rows)` sees each batch in sample order.
template <class OnBatch>
std::int64_t run_evaluation(const ModelConfig& c, RankTeam& team,
                            std::vector<std::unique_ptr<Replica>>& replicas,
                            const std::vector<Place>& places, OnBatch&& on_batch) {
  const SolverConfig& s = c.solver;
  if (c.data.eval_source.empty()) {
    EMBER_THROW_AS(ConfigError, "layer '", c.data.name, "': no 'eval_source' to evaluate on");
  }
  data::PipelineOptions po;
  po.batch_size = s.batchsize_eval;
  po.devices = places;
  po.num_workers = c.data.num_workers;
  po.mode = data::PipelineMode::Epochs;
  po.num_epochs = 1;
  po.deterministic = true;
  po.require_even_split = false;
  data::Pipeline pipeline(data::make_data_source(c.data, s.key_type, data::DataSplit::Eval, s.seed),
                          po);
  std::vector<std::vector<float>> logits(places.size()), labels(places.size());
  std::int64_t batches = 0, samples = 0;
  while (true) {
    if (s.max_eval_batches > 0 && batches >= s.max_eval_batches) break;
    if (s.max_eval_samples > 0 && samples >= s.max_eval_samples) break;
    std::optional<data::Batch> batch = pipeline.next();
    if (!batch) break;
    team.run([&](int r) {
      const auto i = static_cast<std::size_t>(r);
      logits[i].clear();
      labels[i].clear();
      replicas[i]->eval_step(batch->devices[i], logits[i], labels[i]);
    });
    std::int64_t rows = batch->global_size;
    if (s.max_eval_samples > 0) rows = std::min(rows, s.max_eval_samples - samples);
    // Ranks hold consecutive shares of the batch: concatenated in rank order they are in sample
    // order again.
    std::vector<float> all_logits, all_labels;
    for (std::size_t i = 0; i < places.size(); ++i) {
      all_logits.insert(all_logits.end(), logits[i].begin(), logits[i].end());
      all_labels.insert(all_labels.end(), labels[i].begin(), labels[i].end());
    }
    const std::size_t lc = all_logits.size() / static_cast<std::size_t>(batch->global_size);
    const std::size_t yc = all_labels.size() / static_cast<std::size_t>(batch->global_size);
    all_logits.resize(static_cast<std::size_t>(rows) * lc);
    all_labels.resize(static_cast<std::size_t>(rows) * yc);
    on_batch(all_logits, all_labels, rows);
    samples += rows;
    ++batches;
  }
  return samples;
}

// HugeCTR's export: <prefix>_prediction_<iter> and <prefix>_label_<iter>, the scores and the
// labels of one evaluation as space-separated numbers, in sample order; each file is written
// under a temporary name and renamed, so a reader never sees half of one.
void export_predictions(const std::string& prefix, std::int64_t iteration,
                        const EvalAccumulator& acc) {
  auto write = [&](const char* kind, auto&& values) {
    const fs::path path = cat(prefix, "_", kind, "_", iteration);
    const fs::path tmp = cat(path.string(), ".tmp");
    {
      std::ofstream out(tmp);
      if (!out)
        EMBER_THROW_AS(DataError, "solver.export_predictions_prefix: cannot write ", tmp.string());
      out << std::setprecision(8);
      for (const auto& v : values)
        out << v << ' ';
      out.flush();
      if (!out) {
        EMBER_THROW_AS(DataError, "solver.export_predictions_prefix: cannot write ", tmp.string(),
                       " (disk full?)");
      }
    }
    fs::rename(tmp, path);
  };
  write("prediction", acc.scores());
  write("label", acc.labels());
}

}  // namespace

EvalResult Session::evaluate() {
  Impl& m = *impl_;
  const Replica& r0 = *m.replicas.front();
  const SolverConfig& s = config_.solver;
  EvalAccumulator acc(r0.loss_kind(), r0.loss_target_weight(), s.hit_rate_threshold());
  run_evaluation(config_, *m.team, m.replicas, m.places,
                 [&](const std::vector<float>& logits, const std::vector<float>& labels,
                     std::int64_t rows) { acc.add(logits, labels, rows); });
  const EvalResult r = acc.finish();
  if (r.nan_scores > 0) {
    EMBER_LOG_WARN(
        "evaluation at iteration {}: {} of {} scores are NaN (the model or its input "
        "holds NaN or infinite values); the AUC is reported as nan",
        iteration_, r.nan_scores, acc.scores().size());
  }
  if (!s.export_predictions_prefix.empty()) {
    export_predictions(s.export_predictions_prefix, iteration_, acc);
  }
  *m.out << "eval iter=" << iteration_;
  if (s.wants(EvalMetric::Kind::AUC)) *m.out << " AUC=" << format_number(r.auc);
  *m.out << " AverageLoss=" << format_number(r.average_loss);
  if (r.hit_rate) *m.out << " HitRate=" << format_number(*r.hit_rate);
  *m.out << " samples=" << r.samples << std::endl;
  m.log.add(iteration_, "eval", "AUC", r.auc);
  m.log.add(iteration_, "eval", "AverageLoss", r.average_loss);
  if (r.hit_rate) m.log.add(iteration_, "eval", "HitRate", *r.hit_rate);
  return r;
}

EvalResult Session::predict(const fs::path& path) {
  Impl& m = *impl_;
  const Replica& r0 = *m.replicas.front();
  EvalAccumulator acc(r0.loss_kind(), r0.loss_target_weight(), config_.solver.hit_rate_threshold());
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream out(tmp);
  if (!out) EMBER_THROW_AS(DataError, "cannot write predictions to ", path.string());
  std::size_t written = 0;
  run_evaluation(
      config_, *m.team, m.replicas, m.places,
      [&](const std::vector<float>& logits, const std::vector<float>& labels, std::int64_t rows) {
        acc.add(logits, labels, rows);
        const auto& scores = acc.scores();
        const auto& ys = acc.labels();
        for (; written < scores.size(); ++written) {
          out << ys[written] << ',' << std::setprecision(8) << scores[written] << '\n';
        }
      });
  out.close();
  if (!out) EMBER_THROW_AS(DataError, "cannot finish writing ", tmp.string(), " (disk full?)");
  fs::rename(tmp, path);
  return acc.finish();
}

}  // namespace ember::train
