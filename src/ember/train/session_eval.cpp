// Session's evaluation and prediction: the evaluation pipeline over the eval source, the metrics
// (solver.eval_metrics), HugeCTR's export of each evaluation's predictions
// (solver.export_predictions_prefix), and `predict`'s "label,score" file.
#include <fstream>
#include <iomanip>
#include <optional>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/train/session_impl.hpp"
#include "ember/train/shared_reading.hpp"

namespace ember::train {

namespace fs = std::filesystem;

namespace {

std::size_t batch_bytes(const data::Batch& batch) {
  std::size_t bytes = 0;
  for (const data::DeviceBatch& d : batch.devices) {
    bytes += d.label.nbytes() + d.dense.nbytes();
    for (const CsrTensor& csr : d.sparse)
      bytes += csr.row_offsets().nbytes() + csr.values().nbytes();
  }
  return bytes;
}

// The evaluation's batches: from `cache` when it holds a whole evaluation, else from a new
// evaluation pipeline, kept in `cache` (when given and on) while they fit its limit.
class EvalBatches {
 public:
  EvalBatches(const ModelConfig& c, const SessionJob& job, const std::vector<Place>& places,
              const Replica& replica, EvalCache* cache)
      : cache_(cache), replay_(cache != nullptr && cache->complete) {
    if (replay_) return;
    const SolverConfig& s = c.solver;
    data::PipelineOptions po;
    po.batch_size = s.batchsize_eval;
    po.batch_size_name = "solver.batchsize_eval";
    po.devices = places;
    po.slice = {job.world_ranks, job.first_rank};
    po.exchange = make_key_exchange(job);
    po.num_workers = c.data.num_workers;
    po.mode = data::PipelineMode::Epochs;
    po.num_epochs = 1;
    po.deterministic = true;
    po.require_even_split = false;
    pipeline_.emplace(data::make_data_source(c.data, s.key_type, data::DataSplit::Eval, s.seed,
                                             data_source_options(replica)),
                      po);
    recording_ = cache_ != nullptr && cache_->limit != 0;
    if (recording_) cache_->batches.clear();
  }

  std::optional<data::Batch> next() {
    if (replay_) {
      if (next_ == cache_->batches.size()) return std::nullopt;
      return cache_->batches[next_++];
    }
    std::optional<data::Batch> batch = pipeline_->next();
    if (batch && recording_) {
      const auto held = static_cast<std::int64_t>(cache_->batches.size());
      if (cache_->limit < 0 || held < cache_->limit) {
        cache_->batches.push_back(*batch);
      } else {
        EMBER_LOG_INFO(
            "cache_eval_data {}: the evaluation takes more batches than that; it reads its "
            "files at every evaluation",
            cache_->limit);
        cache_->batches.clear();
        cache_->limit = 0;
        recording_ = false;
      }
    }
    return batch;
  }

  // The evaluation consumed every batch it wanted: a recorded one is complete.
  void finish() {
    if (!recording_) return;
    cache_->complete = true;
    std::size_t bytes = 0;
    for (const data::Batch& b : cache_->batches)
      bytes += batch_bytes(b);
    EMBER_LOG_INFO(
        "cache_eval_data: the {} evaluation batches ({} bytes on the training devices) "
        "are kept for the later evaluations",
        cache_->batches.size(), bytes);
  }

 private:
  EvalCache* cache_;
  bool replay_;
  bool recording_ = false;
  std::optional<data::Pipeline> pipeline_;
  std::size_t next_ = 0;
};

// Runs an evaluation pass; `on_batch(logits, labels, rows)` sees each batch in sample order.
// `cache` (evaluate() only): cache_eval_data's batches. In a job of several processes every
// process gets the whole batch's logits (gathered in rank order), so that all compute the same
// metrics.
template <class OnBatch>
std::int64_t run_evaluation(const ModelConfig& c, const SessionJob& job, RankTeam& team,
                            std::vector<std::unique_ptr<Replica>>& replicas,
                            const std::vector<Place>& places, EvalCache* cache,
                            OnBatch&& on_batch) {
  const SolverConfig& s = c.solver;
  if (c.data.eval_source.empty()) {
    EMBER_THROW_AS(ConfigError, "layer '", c.data.name, "': no 'eval_source' to evaluate on");
  }
  EvalBatches source(c, job, places, *replicas.front(), cache);
  std::vector<std::vector<float>> logits(places.size()), labels(places.size());
  std::int64_t batches = 0, samples = 0;
  while (true) {
    if (s.max_eval_batches > 0 && batches >= s.max_eval_batches) break;
    if (s.max_eval_samples > 0 && samples >= s.max_eval_samples) break;
    std::optional<data::Batch> batch = source.next();
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
    if (job.multi_process) {
      all_logits = distributed::concat_processes(all_logits);
      all_labels = distributed::concat_processes(all_labels);
    }
    const std::size_t lc = all_logits.size() / static_cast<std::size_t>(batch->global_size);
    const std::size_t yc = all_labels.size() / static_cast<std::size_t>(batch->global_size);
    all_logits.resize(static_cast<std::size_t>(rows) * lc);
    all_labels.resize(static_cast<std::size_t>(rows) * yc);
    on_batch(all_logits, all_labels, rows);
    samples += rows;
    ++batches;
  }
  source.finish();
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
  run_evaluation(config_, m.job, *m.team, m.replicas, m.places, &m.eval_cache,
                 [&](const std::vector<float>& logits, const std::vector<float>& labels,
                     std::int64_t rows) { acc.add(logits, labels, rows); });
  const EvalResult r = acc.finish();
  if (r.nan_scores > 0) {
    EMBER_LOG_WARN(
        "evaluation at iteration {}: {} of {} scores are NaN (the model or its input "
        "holds NaN or infinite values); the AUC is reported as nan",
        iteration_, r.nan_scores, acc.scores().size());
  }
  if (!s.export_predictions_prefix.empty() && m.job.is_output_process()) {
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
  // Process 0 writes the file; the others take part in the evaluation only.
  const bool writes = m.job.is_output_process();
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream out;
  std::string failure;
  if (writes) {
    out.open(tmp);
    if (!out) failure = cat("cannot write predictions to ", path.string());
  }
  if (m.job.multi_process) failure = distributed::first_process_failure(failure);
  if (!failure.empty()) EMBER_THROW_AS(DataError, failure);
  std::size_t written = 0;
  run_evaluation(
      config_, m.job, *m.team, m.replicas, m.places, nullptr,
      [&](const std::vector<float>& logits, const std::vector<float>& labels, std::int64_t rows) {
        acc.add(logits, labels, rows);
        const auto& scores = acc.scores();
        const auto& ys = acc.labels();
        for (; writes && written < scores.size(); ++written) {
          out << ys[written] << ',' << std::setprecision(8) << scores[written] << '\n';
        }
      });
  if (writes) {
    out.close();
    if (!out) failure = cat("cannot finish writing ", tmp.string(), " (disk full?)");
    if (failure.empty()) fs::rename(tmp, path);
  }
  if (m.job.multi_process) failure = distributed::first_process_failure(failure);
  if (!failure.empty()) EMBER_THROW_AS(DataError, failure);
  return acc.finish();
}

}  // namespace ember::train
