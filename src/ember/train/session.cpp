#include "ember/train/session.hpp"

#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/progress_line.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/train/cache_report.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/rank_team.hpp"
#include "ember/train/replica.hpp"
#include "ember/train/run_log.hpp"

namespace ember::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Session::Impl {
  std::vector<Place> places;
  std::vector<distributed::CommunicatorPtr> comms;
  std::unique_ptr<RankTeam> team;
  std::vector<std::unique_ptr<Replica>> replicas;
  RunLog log;
  std::ostream* out = &std::cout;
};

namespace {

std::vector<Place> choose_places(const ModelConfig& c, const SessionOptions& o) {
  std::string device = !o.device.empty() ? o.device : c.solver.device;
  if (device.empty()) device = cuda_available() ? "cuda" : "cpu";
  if (device != "cpu" && device != "cuda") {
    EMBER_THROW_AS(ConfigError, "unknown device '", device, "' (expected cpu or cuda)");
  }
  std::vector<Place> places;
  if (device == "cuda") {
    const std::vector<int> gpus = !o.gpus.empty() ? o.gpus : c.solver.gpu_list();
    for (int g : gpus) {
      require_cuda_device(g, "training on the GPU");
      places.push_back(Place::cuda(g));
    }
  } else {
    const int n = o.cpu_ranks > 0 ? o.cpu_ranks : c.solver.cpu_ranks;
    places.assign(static_cast<std::size_t>(n), Place::host());
  }
  return places;
}

std::vector<distributed::CommunicatorPtr> make_communicators(const std::vector<Place>& places) {
  std::vector<distributed::CommunicatorPtr> comms;
  if (places.size() == 1) {
    comms.push_back(distributed::make_solo_communicator(places.front()));
  } else if (places.front().is_cuda()) {
    if (!distributed::nccl_compiled()) {
      EMBER_THROW_AS(ConfigError, "training on ", places.size(),
                     " GPUs needs NCCL, which this build of Ember does not have");
    }
    std::vector<int> devices;
    for (const Place& p : places)
      devices.push_back(p.device());
    comms = distributed::make_nccl_communicators(devices);
  } else {
    comms = distributed::make_in_process_communicators(static_cast<int>(places.size()));
  }
  return comms;
}

std::string format_number(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

}  // namespace

Session::Session(ModelConfig config, SessionOptions options)
    : config_(std::move(config)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (options_.out != nullptr) m.out = options_.out;
  m.places = choose_places(config_, options_);
  const auto ranks = static_cast<std::int64_t>(m.places.size());
  const SolverConfig& s = config_.solver;
  if (s.batchsize % ranks != 0) {
    EMBER_THROW_AS(ConfigError, "solver.batchsize ", s.batchsize, " must be a multiple of the ",
                   ranks, " training devices");
  }
  m.comms = make_communicators(m.places);
  m.team = std::make_unique<RankTeam>(m.places);
  m.replicas.resize(m.places.size());
  m.team->run([&](int r) {
    ReplicaOptions o;
    o.place = m.places[static_cast<std::size_t>(r)];
    o.comm = m.comms[static_cast<std::size_t>(r)].get();
    o.train_rows = s.batchsize / ranks;
    o.eval_rows = (s.batchsize_eval + ranks - 1) / ranks;
    m.replicas[static_cast<std::size_t>(r)] = std::make_unique<Replica>(config_, o);
  });
  if (!s.dense_model_file.empty() || !s.sparse_model_files.empty()) {
    m.team->run([&](int r) { m.replicas[static_cast<std::size_t>(r)]->load_model_files(s); });
  }
  if (!options_.run_dir.empty()) m.log = RunLog(options_.run_dir);
  EMBER_LOG_INFO("training on {} ({} rank(s)); batch {} ({} per rank), eval batch {}",
                 describe_devices(), ranks, s.batchsize, s.batchsize / ranks, s.batchsize_eval);
}

Session::~Session() {
  // Ranks' threads go before the replicas they use.
  if (impl_) impl_->team.reset();
}

int Session::ranks() const {
  return static_cast<int>(impl_->places.size());
}

std::string Session::describe_devices() const {
  const auto& p = impl_->places;
  if (p.front().is_cuda()) {
    std::string s;
    for (const Place& place : p)
      s += (s.empty() ? "" : ",") + place.to_string();
    return s;
  }
  return p.size() == 1 ? "cpu" : "cpu x" + std::to_string(p.size());
}

// One call of train(): the training pipeline, the progress line, and what the loop carries from
// one step to the next. After each step come, in this order, the display line, the evaluation
// (and the AUC target) and the snapshot that fall due at the new iteration.
class Session::TrainingLoop {
 public:
  explicit TrainingLoop(Session& session);
  TrainResult run();

 private:
  data::PipelineOptions pipeline_options() const;
  void skip_trained_batches();
  // The next batch to train on, nothing when the data is done.
  std::optional<data::Batch> next_batch();
  std::optional<data::Batch> pull_batch();
  void step(const data::Batch& batch);
  // Host-backed embeddings: takes the batch after the one just stepped from the pipeline and
  // lets them prepare its rows while the step runs on the device (see Replica::prefetch).
  void prefetch_next();
  void show_progress();
  void display();
  void evaluate_if_due();
  void snapshot_if_due();
  void save_snapshot();
  // Timing, and the evaluation of a run that ended between evaluations.
  void finish();
  double window_rate() const;

  Session& session_;
  Impl& m_;
  const SolverConfig& s_;
  data::Pipeline pipeline_;
  ProgressLine progress_;
  TrainResult result_;
  Clock::time_point start_, window_start_;
  std::int64_t window_samples_ = 0, trained_samples_ = 0, last_eval_iteration_ = -1;
  std::vector<float> lrs_;  // each rank's learning rate in the last step
  bool stop_ = false;
  // The progress line's ETA counts from its first step (not from start-up or a resumed run's 0).
  std::int64_t progress_first_iteration_ = -1;
  Clock::time_point progress_start_;
  // Host-backed embeddings: the batch after the current one, taken early and prepared ahead,
  // and the cache figures of each display window.
  bool prefetch_ = false;
  std::optional<data::Batch> upcoming_;
  CacheReport cache_report_;
  std::int64_t cache_window_start_ = 0;
};

namespace {

// "[########......] 1200/5000  12.3k samples/s  ETA 0:40", or "iteration 1200  12.3k samples/s"
// when the total is unknown (epochs mode); no ETA when `eta_seconds` is negative.
std::string progress_text(std::int64_t iteration, std::int64_t total, double samples_per_second,
                          double eta_seconds) {
  constexpr int kWidth = 30;
  std::string text;
  if (total > 0) {
    const int filled = static_cast<int>(
        kWidth * std::min(1.0, static_cast<double>(iteration) / static_cast<double>(total)));
    text = "[" + std::string(static_cast<std::size_t>(filled), '#') +
           std::string(static_cast<std::size_t>(kWidth - filled), '.') + "] " +
           std::to_string(iteration) + "/" + std::to_string(total);
  } else {
    text = "iteration " + std::to_string(iteration);
  }
  text += "  " + format_count(samples_per_second) + " samples/s";
  if (total > 0 && eta_seconds >= 0) text += "  ETA " + format_clock(eta_seconds);
  return text;
}

ProgressLine::Options progress_options(bool enabled) {
  ProgressLine::Options o;
  o.enabled = enabled;
  o.redraw_every = std::chrono::milliseconds(250);
  // plain_every stays zero: a bar on a terminal only; logs and pipes get the display lines.
  return o;
}

}  // namespace

Session::TrainingLoop::TrainingLoop(Session& session)
    : session_(session),
      m_(*session.impl_),
      s_(session.config_.solver),
      pipeline_(data::make_data_source(session.config_.data, s_.key_type, data::DataSplit::Train,
                                       s_.seed),
                pipeline_options()),
      progress_(progress_options(session.options_.progress)),
      lrs_(m_.places.size()),
      prefetch_(CacheReport::wanted(m_.replicas)),
      cache_window_start_(session.iteration_) {}

data::PipelineOptions Session::TrainingLoop::pipeline_options() const {
  data::PipelineOptions po;
  po.batch_size = s_.batchsize;
  po.devices = m_.places;
  po.num_workers = session_.config_.data.num_workers;
  po.mode = s_.max_iter > 0 ? data::PipelineMode::Repeat : data::PipelineMode::Epochs;
  po.num_epochs = s_.num_epochs;
  po.deterministic = true;  // the same batches in the same order: resumable, reproducible
  return po;
}

TrainResult Session::TrainingLoop::run() {
  skip_trained_batches();
  start_ = window_start_ = Clock::now();
  while (!stop_ && (s_.max_iter == 0 || session_.iteration_ < s_.max_iter)) {
    const std::optional<data::Batch> batch = next_batch();
    if (!batch) break;
    step(*batch);
    prefetch_next();
    show_progress();
    if (s_.display > 0 && session_.iteration_ % s_.display == 0) display();
    evaluate_if_due();
    snapshot_if_due();
  }
  finish();
  return std::move(result_);
}

// Resuming: the batches already trained on are read again and passed over, so the next step sees
// the batch an uninterrupted run would have.
void Session::TrainingLoop::skip_trained_batches() {
  for (std::int64_t used = 0; used < session_.iteration_;) {
    const auto batch = pipeline_.next();
    if (!batch) {
      EMBER_THROW_AS(DataError, "resuming at iteration ", session_.iteration_,
                     ": the training data ran out after ", used, " batches");
    }
    if (batch->global_size == s_.batchsize) ++used;
  }
}

std::optional<data::Batch> Session::TrainingLoop::next_batch() {
  if (upcoming_) {
    std::optional<data::Batch> batch = std::move(upcoming_);
    upcoming_.reset();
    return batch;
  }
  return pull_batch();
}

void Session::TrainingLoop::prefetch_next() {
  if (!prefetch_ || (s_.max_iter > 0 && session_.iteration_ >= s_.max_iter)) return;
  upcoming_ = pull_batch();
  if (!upcoming_) return;
  m_.team->run([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    m_.replicas[i]->prefetch(upcoming_->devices[i]);
  });
}

std::optional<data::Batch> Session::TrainingLoop::pull_batch() {
  for (;;) {
    std::optional<data::Batch> batch = pipeline_.next();
    if (!batch || batch->global_size == s_.batchsize) return batch;
    // Shapes are fixed per network, so the partial last batch of an epoch is not trained on.
    log_once("partial-batch", spdlog::level::info,
             cat("skipping the partial last batch of each epoch (", batch->global_size, " of ",
                 s_.batchsize, " samples): training batches are full"));
  }
}

void Session::TrainingLoop::step(const data::Batch& batch) {
  m_.team->run([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    lrs_[i] = m_.replicas[i]->train_step(batch.devices[i]);
  });
  ++session_.iteration_;
  window_samples_ += batch.global_size;
  trained_samples_ += batch.global_size;
}

double Session::TrainingLoop::window_rate() const {
  const double seconds = std::chrono::duration<double>(Clock::now() - window_start_).count();
  return seconds > 0 ? static_cast<double>(window_samples_) / seconds : 0;
}

void Session::TrainingLoop::show_progress() {
  const std::int64_t iteration = session_.iteration_;
  if (progress_first_iteration_ < 0) {
    progress_first_iteration_ = iteration;
    progress_start_ = Clock::now();
  }
  if (!progress_.due()) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - progress_start_).count();
  const std::int64_t done = iteration - progress_first_iteration_;
  const std::int64_t total = s_.max_iter;
  const double eta = total > 0 && done > 0 ? elapsed / static_cast<double>(done) *
                                                 static_cast<double>(total - iteration)
                                           : -1;
  progress_.show(progress_text(iteration, total, window_rate(), eta));
}

// "iter=<i> loss=<l> lr=<lr> samples/s=<x>": the ranks' mean loss of the last step, the rate
// over the window since the last display line.
void Session::TrainingLoop::display() {
  std::vector<double> losses(m_.places.size());
  m_.team->run([&](int r) {
    losses[static_cast<std::size_t>(r)] = m_.replicas[static_cast<std::size_t>(r)]->last_loss();
  });
  double loss = 0;
  for (double l : losses)
    loss += l;
  loss /= static_cast<double>(losses.size());
  const double rate = window_rate();
  const std::int64_t iteration = session_.iteration_;
  progress_.clear();
  *m_.out << "iter=" << iteration << " loss=" << format_number(loss)
          << " lr=" << format_number(lrs_.front()) << " samples/s=" << std::llround(rate)
          << std::endl;
  m_.log.add(iteration, "train", "loss", loss);
  m_.log.add(iteration, "train", "lr", lrs_.front());
  m_.log.add(iteration, "train", "samples_per_s", rate);
  result_.last_loss = loss;
  result_.losses.emplace_back(iteration, loss);
  result_.rates.push_back(rate);
  if (prefetch_) {
    const auto figures = cache_report_.report(iteration, m_.replicas,
                                              iteration - cache_window_start_, m_.log, *m_.out);
    if (figures) result_.cache.push_back(*figures);
    cache_window_start_ = iteration;
  }
  window_start_ = Clock::now();
  window_samples_ = 0;
}

void Session::TrainingLoop::evaluate_if_due() {
  const std::int64_t iteration = session_.iteration_;
  if (s_.eval_interval <= 0 || iteration % s_.eval_interval != 0) return;
  progress_.clear();
  result_.last_eval = session_.evaluate();
  last_eval_iteration_ = iteration;
  if (const auto target = s_.auc_target(); target && result_.last_eval->auc >= *target) {
    *m_.out << "AUC target " << *target << " reached at iter=" << iteration << std::endl;
    result_.reached_auc_target = true;
    stop_ = true;
  }
}

void Session::TrainingLoop::snapshot_if_due() {
  if (s_.snapshot > 0 && session_.iteration_ % s_.snapshot == 0) save_snapshot();
}

// Into <snapshot_prefix>snapshot_<iter>, or the run directory when the prefix is empty.
void Session::TrainingLoop::save_snapshot() {
  progress_.clear();
  const std::string name = "snapshot_" + std::to_string(session_.iteration_);
  const fs::path& run_dir = session_.options_.run_dir;
  const fs::path dir = !s_.snapshot_prefix.empty() ? fs::path(s_.snapshot_prefix + name)
                       : !run_dir.empty()          ? run_dir / name
                                                   : fs::path(name);
  session_.save(dir);
  *m_.out << "snapshot iter=" << session_.iteration_ << " dir=" << dir.string() << std::endl;
}

void Session::TrainingLoop::finish() {
  progress_.clear();
  result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  result_.samples_per_second =
      result_.seconds > 0 ? static_cast<double>(trained_samples_) / result_.seconds : 0;
  result_.iterations = session_.iteration_;
  // A run that ended between evaluations reports the model it ends with.
  if (last_eval_iteration_ != session_.iteration_ && !session_.config_.data.eval_source.empty()) {
    result_.last_eval = session_.evaluate();
  }
}

TrainResult Session::train() {
  return TrainingLoop(*this).run();
}

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

}  // namespace

EvalResult Session::evaluate() {
  Impl& m = *impl_;
  const Replica& r0 = *m.replicas.front();
  EvalAccumulator acc(r0.loss_kind(), r0.loss_target_weight());
  run_evaluation(config_, *m.team, m.replicas, m.places,
                 [&](const std::vector<float>& logits, const std::vector<float>& labels,
                     std::int64_t rows) { acc.add(logits, labels, rows); });
  const EvalResult r = acc.finish();
  *m.out << "eval iter=" << iteration_;
  if (config_.solver.wants(EvalMetric::Kind::AUC)) *m.out << " AUC=" << format_number(r.auc);
  *m.out << " AverageLoss=" << format_number(r.average_loss) << " samples=" << r.samples
         << std::endl;
  m.log.add(iteration_, "eval", "AUC", r.auc);
  m.log.add(iteration_, "eval", "AverageLoss", r.average_loss);
  return r;
}

EvalResult Session::predict(const fs::path& path) {
  Impl& m = *impl_;
  const Replica& r0 = *m.replicas.front();
  EvalAccumulator acc(r0.loss_kind(), r0.loss_target_weight());
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

void Session::save(const fs::path& dir) {
  Impl& m = *impl_;
  CheckpointWriter writer(dir);
  m.team->run(
      [&](int r) { m.replicas[static_cast<std::size_t>(r)]->save(writer.staging(), true); });
  nlohmann::json meta;
  meta["iteration"] = iteration_;
  meta["config"] = config_.source;
  meta["devices"] = describe_devices();
  nlohmann::json names = nlohmann::json::array();
  for (const auto& e : config_.embeddings)
    names.push_back(e.name);
  meta["embeddings"] = names;
  // What dense.model (trainable, in order) and dense.non_trainable hold, for tools reading them.
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : m.replicas.front()->parameters().parameters()) {
    params.push_back(
        {{"name", p->name()}, {"shape", p->shape().to_vector()}, {"trainable", p->trainable()}});
  }
  meta["dense_parameters"] = params;
  writer.commit(meta, {"metrics.csv", "metrics.svg"});
}

void Session::load(const fs::path& dir, bool with_optimizer_states) {
  Impl& m = *impl_;
  const nlohmann::json meta = verify_checkpoint(dir);
  for (const auto& e : config_.embeddings) {
    const auto& names = meta.value("embeddings", nlohmann::json::array());
    if (std::find(names.begin(), names.end(), e.name) == names.end()) {
      EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), " has no embedding '", e.name,
                     "' (it holds ", names.dump(), ")");
    }
  }
  const auto iteration = meta.value("iteration", std::int64_t{0});
  m.team->run([&](int r) {
    Replica& replica = *m.replicas[static_cast<std::size_t>(r)];
    replica.load(dir, with_optimizer_states);
    replica.resume_at(iteration);
    for (const auto& e : replica.embeddings()) {
      if (with_optimizer_states && e->step() != iteration) {
        EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": embedding '", e->config().name,
                       "' took ", e->step(), " optimizer steps but the checkpoint is of iteration ",
                       iteration);
      }
    }
  });
  iteration_ = iteration;
}

}  // namespace ember::train
