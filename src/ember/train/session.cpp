#include "ember/train/session.hpp"

#include <array>
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
#include "ember/distributed/process_vote.hpp"
#include "ember/train/cache_report.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/checkpoint_recovery.hpp"
#include "ember/train/hybrid_statistics.hpp"
#include "ember/train/session_impl.hpp"
#include "ember/train/shared_reading.hpp"
#include "ember/train/snapshot_retention.hpp"

namespace ember::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

data::DataSourceOptions data_source_options(const Replica& replica) {
  using Kind = network::LossLayer::Kind;
  const network::LossLayer& loss = replica.train_network().loss();
  data::LabelRange labels;  // [0, 1] for every loss Ember has
  const char* type = "BinaryCrossEntropyLoss";
  if (loss.kind() == Kind::CrossEntropy) type = "CrossEntropyLoss";
  if (loss.kind() == Kind::MultiCrossEntropy) {
    type = "MultiCrossEntropyLoss";
    labels.masked_below = -0.5f;  // such labels mask their entry
  }
  labels.taken_by = cat("the ", type, " layer '", loss.name(), "'");
  data::DataSourceOptions o;
  o.labels = labels;
  return o;
}

namespace {

// HugeCTR's own samples (DCN, DeepFM) name a dense model, ./criteo.model, that its --model-init
// step wrote; HugeCTR reports that it cannot open a missing one and trains from the initialisers.
// So does Ember, with a warning, when every process of the job lacks the file: replicas of one
// model must start alike. A file that exists must still fit the model (Replica::load_model_files).
void start_without_missing_dense_model(SolverConfig& s, const SessionJob& job) {
  if (s.dense_model_file.empty()) return;
  std::error_code err;
  const std::int64_t missing = fs::exists(s.dense_model_file, err) ? 0 : 1;
  if (job.multi_process) {
    const std::vector<std::int64_t> all = distributed::all_gather_processes({missing});
    for (std::size_t p = 0; p < all.size(); ++p) {
      if (all[p] != missing) {
        EMBER_THROW_AS(ConfigError, "solver.dense_model_file ", s.dense_model_file,
                       missing != 0 ? " does not exist here but does for process "
                                    : " exists here but not for process ",
                       p, ": every process must start from the same dense weights");
      }
    }
  }
  if (missing == 0) return;
  EMBER_LOG_WARN(
      "solver.dense_model_file {} does not exist (looked from {}): the dense weights start from "
      "the initialisers, as HugeCTR does when it cannot open the file (remove the key to start "
      "so without this warning; a checkpoint's dense.model is such a file)",
      s.dense_model_file, fs::current_path(err).string());
  s.dense_model_file.clear();
}

}  // namespace

std::string format_number(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

Session::Session(ModelConfig config, SessionOptions options)
    : config_(std::move(config)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (options_.out != nullptr) m.out = options_.out;
  m.job = plan_session_job(config_, options_);
  m.places = m.job.places;
  const SessionJob& job = m.job;
  // Only process 0 shows lines, a progress bar and writes metrics.
  if (!job.is_output_process()) {
    m.out = &m.discarded;
    options_.progress = false;
  }
  const auto ranks = static_cast<std::int64_t>(job.world_ranks);
  const SolverConfig& s = config_.solver;
  m.comms = make_job_communicators(job);
  m.team = std::make_unique<RankTeam>(m.places);
  if (job.multi_process) {
    // A rank that fails leaves its peers in other processes waiting in a collective: the job
    // ends at once, from every process, with the failed rank's message.
    const std::string prefix = job.process_prefix();
    const int first = job.first_rank;
    m.team->on_error([prefix, first](int r, const std::exception& e) {
      std::cerr << "ember: error: " << prefix << "rank " << first + r << ": " << e.what()
                << std::endl;
      distributed::abort_processes(1);
    });
  } else if (m.places.size() > 1) {
    // The other ranks may wait for the failed one in a collective: the group is broken for them.
    m.team->on_error([&m](int r, const std::exception& e) {
      m.comms[static_cast<std::size_t>(r)]->abort(e.what());
    });
  }
  // HybridSparseEmbedding's frequent categories come from the training data (HugeCTR's
  // statistics pass); evaluation and prediction need none (they change no result).
  if (options_.purpose == SessionPurpose::Train) {
    choose_hybrid_frequent_categories(config_, job.world_ranks, job.world.size,
                                      s.mixed_precision && m.places.front().is_cuda());
  }
  m.replicas.resize(m.places.size());
  m.team->run([&](int r) {
    ReplicaOptions o;
    o.place = m.places[static_cast<std::size_t>(r)];
    o.comm = m.comms[static_cast<std::size_t>(r)].get();
    o.train_rows = s.batchsize / ranks;
    o.eval_rows = (s.batchsize_eval + ranks - 1) / ranks;
    m.replicas[static_cast<std::size_t>(r)] = std::make_unique<Replica>(config_, o);
  });
  start_without_missing_dense_model(config_.solver, job);
  if (!s.dense_model_file.empty() || !s.sparse_model_files.empty() ||
      !s.dense_opt_states_file.empty() || !s.sparse_opt_states_files.empty()) {
    m.team->run([&](int r) { m.replicas[static_cast<std::size_t>(r)]->load_model_files(s); });
  }
  if (!options_.run_dir.empty() && job.is_output_process()) {
    // Snapshots of a run that was killed mid-save are put back before anything else looks.
    recover_checkpoints_in(options_.run_dir);
    m.log = RunLog(options_.run_dir, options_.append_metrics);
  }
  m.eval_cache.limit = config_.data.cache_eval_data;
  if (job.multi_process) distributed::barrier_processes();
  static constexpr const char* kVerbs[] = {"training", "evaluating", "predicting"};
  const char* verb = kVerbs[static_cast<int>(options_.purpose)];
  if (options_.purpose == SessionPurpose::Train) {
    EMBER_LOG_INFO("{} on {} ({} rank(s)); batch {} ({} per rank), eval batch {}", verb,
                   describe_devices(), ranks, s.batchsize, s.batchsize / ranks, s.batchsize_eval);
  } else {
    EMBER_LOG_INFO("{} on {} ({} rank(s)); batch {}", verb, describe_devices(), ranks,
                   s.batchsize_eval);
  }
}

Session::~Session() {
  // The stepping loop's batches go first, then the ranks' threads before the replicas they use.
  stepping_.reset();
  if (impl_) impl_->team.reset();
}

int Session::ranks() const {
  return impl_->job.world_ranks;
}

std::string Session::describe_devices() const {
  const auto& p = impl_->places;
  std::string s;
  if (p.front().is_cuda()) {
    for (const Place& place : p) {
      if (!s.empty()) s += ',';
      s += place.to_string();
    }
  } else {
    s = p.size() == 1 ? "cpu" : "cpu x" + std::to_string(p.size());
  }
  const int processes = impl_->job.world.size;
  if (processes > 1) s += cat(" in each of ", processes, " processes");
  return s;
}

void Session::set_part_timer(PartTimer* timer) {
  if (timer != nullptr) {
    EMBER_CHECK(timer->place() == impl_->places.front(),
                "Session::set_part_timer: the timer is on ", timer->place(),
                " but the first rank trains on ", impl_->places.front());
  }
  impl_->parts = timer;
  impl_->replicas.front()->set_part_timer(timer);
}

std::string Session::cuda_graph_status() const {
  return impl_->replicas.front()->cuda_graph_status();
}

std::vector<std::string> Session::gathered_embeddings() const {
  return impl_->replicas.front()->gathered_embeddings();
}

std::int64_t Session::forwards_prepared_ahead() const {
  std::int64_t n = 0;
  for (const auto& e : impl_->replicas.front()->embeddings())
    n += e->forwards_prepared_ahead();
  return n;
}

// One call of train(): the training pipeline, the progress line, and what the loop carries from
// one step to the next. After each step come, in this order, the display line, the evaluation
// (and the AUC target), the snapshot that fall due at the new iteration, and a stop request.
class Session::TrainingLoop {
 public:
  explicit TrainingLoop(Session& session);
  // The batch taken ahead goes with the loop: the embeddings forget what they prepared for it
  // (its buffers may come back at the same addresses, for another batch).
  ~TrainingLoop();
  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;
  TrainResult run();
  // train_step(): one step on the next batch, nothing else; false when the data is done.
  bool step_alone();
  // Checks the loss of a step not checked yet (nan_policy "stop"), before the model is kept.
  void settle() { check_loss_now(); }

 private:
  data::PipelineOptions pipeline_options() const;
  // Passes over the batches a resumed session trained on, once per loop.
  void start();
  void skip_trained_batches();
  // The next batch to train on, nothing when the data is done.
  std::optional<data::Batch> next_batch();
  // next_batch(), timed as the data part when profiling (Session::set_part_timer).
  std::optional<data::Batch> timed_next_batch();
  std::optional<data::Batch> pull_batch();
  // `follows_last_step`: nothing ran on the devices since the last step (Replica::train_step).
  void step(const data::Batch& batch, bool follows_last_step);
  // Takes the batch after the one just stepped from the pipeline and lets the embeddings that
  // can prepare it while the step runs on the device (see Replica::prefetch). train() takes none
  // past max_iter; train_step() always does (max_iter is its caller's to keep). `forward_next`:
  // that batch's step is the next use of the embeddings (Replica::prefetch).
  void prefetch_next(bool stop_at_max_iter, bool forward_next);
  // nan_policy "stop": the loss of every step is checked, on a GPU one step late (the host does
  // not wait for the step it just queued); check_loss_now() catches up before anything that
  // would keep or report the model (snapshots, evaluations, the end).
  void check_loss(std::int64_t iteration, const std::vector<double>& losses);
  void check_loss_now();
  // The same over several processes, without a wait per step: each process checks its own
  // ranks' losses at once, and the processes learn of a bad one through a vote read a few steps
  // later (a blocking gather every step waited about 10 ms behind the input pipeline's key
  // exchange); then the first bad loss of all is gathered so that every process gives the same
  // message. agree_on_losses() settles it at once (check_loss_now, before the model is kept).
  void note_losses(std::int64_t iteration, const std::vector<double>& local);
  void agree_on_losses();
  // Keeps the first non-finite loss of this process's ranks (first_bad_loss_).
  void record_bad_loss(std::int64_t iteration, const std::vector<double>& local);
  void count_skipped();
  void show_progress();
  void display();
  // Each says whether it fell due (and so queued work on the devices).
  bool evaluate_if_due();
  bool snapshot_if_due();
  bool evaluation_due() const;
  bool snapshot_due() const;
  void save_snapshot();
  // Whether training stops after this step: at once in one process; in a job of several, a few
  // steps after any process was asked, all of them after the same step (a ProcessVote).
  bool stop_requested();
  // Ctrl-C: a snapshot of the last step (unless one was just written), and where it went.
  void interrupt();
  // Timing, the last step's loss, and the evaluation of a run that ended between evaluations.
  void finish();
  double window_rate() const;
  double mean_last_loss();

  Session& session_;
  Impl& m_;
  const SolverConfig& s_;
  std::shared_ptr<const data::DataSource> source_;
  data::Pipeline pipeline_;
  ProgressLine progress_;
  TrainResult result_;
  Clock::time_point start_, window_start_;
  std::int64_t window_samples_ = 0, trained_samples_ = 0, last_eval_iteration_ = -1;
  std::int64_t consumed_samples_ = 0;   // every sample the pipeline handed out, for the epoch
  std::int64_t first_iteration_ = 0;    // the iteration this call started at
  std::int64_t checked_iteration_ = 0;  // the last iteration whose loss was checked finite
  std::int64_t last_display_iteration_ = -1, last_snapshot_iteration_ = -1;
  fs::path last_snapshot_;
  std::vector<float> lrs_;           // each rank's learning rate in the last step
  std::vector<double> step_losses_;  // each rank's loss of the step being checked
  bool stop_ = false;
  bool started_ = false;
  std::unique_ptr<distributed::ProcessVote> stop_vote_;  // a job of several processes
  std::unique_ptr<distributed::ProcessVote> loss_vote_;  // a job of several, nan_policy "stop"
  // This process's first non-finite loss: iteration, global rank, value (iteration -1: none).
  std::array<double, 3> first_bad_loss_ = {-1, 0, 0};
  // The progress line's ETA counts from its first step (not from start-up or a resumed run's 0).
  std::int64_t progress_first_iteration_ = -1;
  Clock::time_point progress_start_;
  // The batch after the current one, taken early and prepared ahead; host-backed embeddings'
  // cache figures of each display window.
  bool prefetch_ = false;
  std::optional<data::Batch> upcoming_;
  bool report_cache_ = false;
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

// Skipped batches are each logged up to this many; then only counted.
constexpr std::int64_t kLoggedSkips = 10;

}  // namespace

Session::TrainingLoop::TrainingLoop(Session& session)
    : session_(session),
      m_(*session.impl_),
      s_(session.config_.solver),
      source_(data::make_data_source(session.config_.data, s_.key_type, data::DataSplit::Train,
                                     s_.seed, data_source_options(*m_.replicas.front()))),
      pipeline_(source_, pipeline_options()),
      progress_(progress_options(session.options_.progress)),
      lrs_(m_.places.size()),
      step_losses_(m_.places.size()),
      prefetch_(m_.replicas.front()->prepares_ahead()),
      report_cache_(CacheReport::wanted(m_.replicas)),
      cache_window_start_(session.iteration_) {}

Session::TrainingLoop::~TrainingLoop() {
  if (!upcoming_) return;
  try {
    m_.team->run([&](int r) { m_.replicas[static_cast<std::size_t>(r)]->forget_prepared(); });
  } catch (const std::exception& e) {
    EMBER_LOG_ERROR("training: forgetting the batch prepared ahead failed: {}", e.what());
  } catch (...) {
    EMBER_LOG_ERROR("training: forgetting the batch prepared ahead failed");
  }
}

data::PipelineOptions Session::TrainingLoop::pipeline_options() const {
  data::PipelineOptions po;
  po.batch_size = s_.batchsize;
  po.batch_size_name = "solver.batchsize";
  po.devices = m_.places;
  po.slice = {m_.job.world_ranks, m_.job.first_rank};
  po.exchange = make_key_exchange(m_.job);
  po.ranks_gather_keys = po.exchange != nullptr && ranks_gather_keys(m_.job);
  po.num_workers = session_.config_.data.num_workers;
  po.mode = s_.max_iter > 0 ? data::PipelineMode::Repeat : data::PipelineMode::Epochs;
  po.num_epochs = s_.num_epochs;
  po.deterministic = true;  // the same batches in the same order: resumable, reproducible
  // A loop that prepares the next batch ahead holds it beside the one it trains on.
  po.consumer_holds = m_.replicas.front()->prepares_ahead() ? 2 : 1;
  return po;
}

void Session::TrainingLoop::start() {
  if (started_) return;
  started_ = true;
  skip_trained_batches();
  first_iteration_ = checked_iteration_ = session_.iteration_;
  start_ = window_start_ = Clock::now();
}

TrainResult Session::TrainingLoop::run() {
  start();
  // Between two steps of this loop nothing but the display (a read of the loss) and the batch
  // prepared ahead (on streams of its own) reaches the devices, unless an evaluation or a
  // snapshot falls due.
  bool follows_last_step = false;
  while (!stop_ && (s_.max_iter == 0 || session_.iteration_ < s_.max_iter)) {
    const std::optional<data::Batch> batch = timed_next_batch();
    if (!batch) break;
    step(*batch, follows_last_step);
    // Asked before the next batch is taken: a run that stops trains no further batch.
    const bool stopping = stop_requested();
    if (!stopping) prefetch_next(true, !evaluation_due() && !snapshot_due());
    show_progress();
    if (s_.display > 0 && session_.iteration_ % s_.display == 0) display();
    const bool evaluated = evaluate_if_due();
    const bool snapshotted = snapshot_if_due();
    follows_last_step = !evaluated && !snapshotted;
    if (stopping) {
      interrupt();
      break;
    }
  }
  finish();
  return std::move(result_);
}

bool Session::TrainingLoop::step_alone() {
  start();
  const std::optional<data::Batch> batch = timed_next_batch();
  if (!batch) {
    check_loss_now();
    return false;
  }
  // Between two calls the caller may do anything with the session (evaluate, save, load).
  step(*batch, false);
  prefetch_next(false, false);
  return true;
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
    consumed_samples_ += batch->global_size;
    if (batch->global_size == s_.batchsize) ++used;
  }
}

std::optional<data::Batch> Session::TrainingLoop::next_batch() {
  std::optional<data::Batch> batch;
  if (upcoming_) {
    batch = std::move(upcoming_);
    upcoming_.reset();
  } else {
    batch = pull_batch();
  }
  // Counted when trained on, not when taken ahead for a prefetch.
  if (batch) consumed_samples_ += batch->global_size;
  return batch;
}

std::optional<data::Batch> Session::TrainingLoop::timed_next_batch() {
  if (m_.parts == nullptr) return next_batch();
  // On the device the part covers the batch copies the step waits for (the pipeline queued the
  // wait on the stream when it handed the batch out).
  m_.replicas.front()->begin_part(Replica::kDataPart);
  const auto t0 = Clock::now();
  std::optional<data::Batch> batch = next_batch();
  m_.parts->add_host("host: waiting for the next batch",
                     std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  return batch;
}

void Session::TrainingLoop::prefetch_next(bool stop_at_max_iter, bool forward_next) {
  if (!prefetch_) return;
  if (stop_at_max_iter && s_.max_iter > 0 && session_.iteration_ >= s_.max_iter) return;
  upcoming_ = pull_batch();
  if (!upcoming_) return;
  m_.team->run([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    m_.replicas[i]->prefetch(upcoming_->devices[i], forward_next);
  });
}

std::optional<data::Batch> Session::TrainingLoop::pull_batch() {
  for (;;) {
    std::optional<data::Batch> batch = pipeline_.next();
    if (!batch) return batch;
    if (batch->global_size == s_.batchsize) {
      // Every process takes the same batches, so the ranks gather their keys together.
      if (batch->devices.front().keys_from_ranks) {
        m_.team->run([&](int r) {
          const auto i = static_cast<std::size_t>(r);
          m_.replicas[i]->gather_keys(batch->devices[i]);
        });
      }
      return batch;
    }
    consumed_samples_ += batch->global_size;  // passed over, but read
    // Shapes are fixed per network, so the partial last batch of an epoch is not trained on.
    log_once("partial-batch", spdlog::level::info,
             cat("skipping the partial last batch of each epoch (", batch->global_size, " of ",
                 s_.batchsize, " samples): training batches are full"));
  }
}

void Session::TrainingLoop::step(const data::Batch& batch, bool follows_last_step) {
  const bool stop_on_nan = s_.nan_policy == NanPolicy::Stop;
  // On a GPU the step before this one is checked, which is done (or nearly) by now.
  const int back = m_.places.front().is_cuda() ? 1 : 0;
  const std::int64_t checked = session_.iteration_ + 1 - back;
  const bool check = stop_on_nan && checked > checked_iteration_;
  m_.team->run([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    Replica& replica = *m_.replicas[i];
    lrs_[i] = replica.train_step(batch.devices[i], follows_last_step);
    if (stop_on_nan) replica.capture_loss();
    if (check) step_losses_[i] = replica.captured_loss(back);
  });
  ++session_.iteration_;
  m_.has_stepped = true;
  window_samples_ += batch.global_size;
  trained_samples_ += batch.global_size;
  if (check) {
    if (m_.job.multi_process) {
      note_losses(checked, step_losses_);
    } else {
      check_loss(checked, step_losses_);
    }
  }
  if (m_.replicas.front()->last_step_skipped()) count_skipped();
}

void Session::TrainingLoop::record_bad_loss(std::int64_t iteration,
                                            const std::vector<double>& local) {
  for (std::size_t r = 0; r < local.size() && first_bad_loss_[0] < 0; ++r) {
    if (std::isfinite(local[r])) continue;
    first_bad_loss_ = {static_cast<double>(iteration),
                       static_cast<double>(m_.job.first_rank + static_cast<int>(r)), local[r]};
  }
  checked_iteration_ = iteration;
}

void Session::TrainingLoop::note_losses(std::int64_t iteration, const std::vector<double>& local) {
  record_bad_loss(iteration, local);
  if (!loss_vote_) loss_vote_ = distributed::ProcessVote::open();
  if (loss_vote_->next(first_bad_loss_[0] >= 0)) agree_on_losses();
}

void Session::TrainingLoop::agree_on_losses() {
  const std::vector<double> all = distributed::all_gather_processes_f64(
      {first_bad_loss_[0], first_bad_loss_[1], first_bad_loss_[2]});
  // The earliest bad loss of all processes (then the lowest rank): the same on every process.
  std::size_t first = all.size();
  for (std::size_t i = 0; i + 2 < all.size(); i += 3) {
    if (all[i] < 0) continue;
    if (first == all.size() || all[i] < all[first] ||
        (all[i] == all[first] && all[i + 1] < all[first + 1])) {
      first = i;
    }
  }
  if (first == all.size()) return;
  progress_.clear();
  const double value = all[first + 2];
  EMBER_THROW("training diverged: the loss is ", std::isnan(value) ? "nan" : format_number(value),
              " at iteration ", static_cast<std::int64_t>(all[first]), " (rank ",
              static_cast<std::int64_t>(all[first + 1]),
              "); no model is saved from it. Lower the learning rate, look for NaN or infinite "
              "values in the data, or set solver.nan_policy to \"skip\" to skip such batches");
}

void Session::TrainingLoop::check_loss(std::int64_t iteration, const std::vector<double>& losses) {
  for (std::size_t r = 0; r < losses.size(); ++r) {
    if (std::isfinite(losses[r])) continue;
    progress_.clear();
    EMBER_THROW("training diverged: the loss is ",
                std::isnan(losses[r]) ? "nan" : format_number(losses[r]), " at iteration ",
                iteration, losses.size() > 1 ? cat(" (rank ", r, ")") : std::string(),
                "; no model is saved from it. Lower the learning rate, look for NaN or infinite "
                "values in the data, or set solver.nan_policy to \"skip\" to skip such batches");
  }
  checked_iteration_ = iteration;
}

void Session::TrainingLoop::check_loss_now() {
  if (s_.nan_policy != NanPolicy::Stop) return;
  if (checked_iteration_ < session_.iteration_) {
    m_.team->run([&](int r) {
      const auto i = static_cast<std::size_t>(r);
      step_losses_[i] = m_.replicas[i]->captured_loss(0);
    });
    if (!m_.job.multi_process) {
      check_loss(session_.iteration_, step_losses_);
      return;
    }
    // Noted here without a vote round (the processes' rounds stay in step), agreed on below.
    record_bad_loss(session_.iteration_, step_losses_);
  }
  // Every process gets here at the same iterations: the votes still in flight are overtaken.
  if (m_.job.multi_process) agree_on_losses();
}

void Session::TrainingLoop::count_skipped() {
  ++result_.skipped_batches;
  ++session_.skipped_batches_;
  if (result_.skipped_batches <= kLoggedSkips) {
    progress_.clear();
    EMBER_LOG_WARN(
        "iteration {}: the loss is not finite; batch skipped, no update applied "
        "(solver.nan_policy \"skip\"){}",
        session_.iteration_,
        result_.skipped_batches == kLoggedSkips ? "; further skips are only counted" : "");
  }
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

// The ranks' mean loss of the last step (waits for the device).
double Session::TrainingLoop::mean_last_loss() {
  return session_.current_loss().value();
}

// "iter=<i> loss=<l> lr=<lr> samples/s=<x> epoch=<e>": the ranks' mean loss of the last step,
// the rate over the window since the last display line, the passes over the data so far (when
// the source knows its size).
void Session::TrainingLoop::display() {
  const double loss = mean_last_loss();
  const double rate = window_rate();
  const std::int64_t iteration = session_.iteration_;
  progress_.clear();
  *m_.out << "iter=" << iteration << " loss=" << format_number(loss)
          << " lr=" << format_number(lrs_.front()) << " samples/s=" << std::llround(rate);
  if (const std::int64_t n = source_->num_samples(); n > 0) {
    std::ostringstream epoch;
    epoch << std::fixed << std::setprecision(2)
          << static_cast<double>(consumed_samples_) / static_cast<double>(n);
    *m_.out << " epoch=" << epoch.str();
  }
  *m_.out << std::endl;
  m_.log.add(iteration, "train", "loss", loss);
  m_.log.add(iteration, "train", "lr", lrs_.front());
  m_.log.add(iteration, "train", "samples_per_s", rate);
  result_.last_loss = loss;
  last_display_iteration_ = iteration;
  result_.losses.emplace_back(iteration, loss);
  result_.rates.push_back(rate);
  if (report_cache_) {
    const auto figures = cache_report_.report(iteration, m_.replicas,
                                              iteration - cache_window_start_, m_.log, *m_.out);
    if (figures) result_.cache.push_back(*figures);
    cache_window_start_ = iteration;
  }
  window_start_ = Clock::now();
  window_samples_ = 0;
}

bool Session::TrainingLoop::evaluation_due() const {
  return s_.eval_interval > 0 && session_.iteration_ % s_.eval_interval == 0;
}

bool Session::TrainingLoop::snapshot_due() const {
  return s_.snapshot > 0 && session_.iteration_ % s_.snapshot == 0;
}

bool Session::TrainingLoop::evaluate_if_due() {
  const std::int64_t iteration = session_.iteration_;
  if (!evaluation_due()) return false;
  check_loss_now();
  progress_.clear();
  result_.last_eval = session_.evaluate();
  last_eval_iteration_ = iteration;
  if (const auto target = s_.auc_target(); target && result_.last_eval->auc >= *target) {
    *m_.out << "AUC target " << *target << " reached at iter=" << iteration << std::endl;
    result_.reached_auc_target = true;
    stop_ = true;
  }
  return true;
}

bool Session::TrainingLoop::snapshot_if_due() {
  if (!snapshot_due()) return false;
  save_snapshot();
  return true;
}

// Into <snapshot_prefix>snapshot_<iter>, or the run directory when the prefix is empty; then the
// oldest beyond keep_snapshots go.
void Session::TrainingLoop::save_snapshot() {
  check_loss_now();
  progress_.clear();
  const SnapshotPlace place = snapshot_place(s_.snapshot_prefix, session_.options_.run_dir);
  const fs::path dir = place.path_of(session_.iteration_);
  session_.save(dir);
  *m_.out << "snapshot iter=" << session_.iteration_ << " dir=" << dir.string() << std::endl;
  last_snapshot_iteration_ = session_.iteration_;
  last_snapshot_ = dir;
  if (s_.keep_snapshots > 0 && m_.job.is_output_process()) {
    prune_snapshots(place, s_.keep_snapshots, dir);
  }
}

bool Session::TrainingLoop::stop_requested() {
  const std::atomic<bool>* flag = session_.options_.stop_requested;
  const bool mine = flag != nullptr && flag->load();
  if (!m_.job.multi_process) return mine;
  // Every process stops after the same step, a few steps after a stop asked of any of them: the
  // vote is read some steps after it is cast, so no step waits for the other processes' hosts.
  if (!stop_vote_) stop_vote_ = distributed::ProcessVote::open();
  return stop_vote_->next(mine);
}

void Session::TrainingLoop::interrupt() {
  if (last_snapshot_iteration_ != session_.iteration_) save_snapshot();
  result_.interrupted = true;
  result_.interrupt_snapshot = last_snapshot_;
  *m_.out << "interrupted iter=" << session_.iteration_ << " snapshot=" << last_snapshot_.string()
          << std::endl;
}

void Session::TrainingLoop::finish() {
  progress_.clear();
  const data::PipelineStats input = pipeline_.stats();
  log_shared_reading(m_.job, "training", input);
  result_.late_device_slots = input.late_device_slots;
  result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  result_.samples_per_second =
      result_.seconds > 0 ? static_cast<double>(trained_samples_) / result_.seconds : 0;
  result_.iterations = session_.iteration_;
  if (session_.iteration_ > first_iteration_) {
    check_loss_now();
    // The last step's loss, also when it fell between display lines.
    if (last_display_iteration_ != session_.iteration_) result_.last_loss = mean_last_loss();
  }
  // A run that ended between evaluations reports the model it ends with; an interrupted one
  // ends at once.
  if (!result_.interrupted && last_eval_iteration_ != session_.iteration_ &&
      !session_.config_.data.eval_source.empty()) {
    result_.last_eval = session_.evaluate();
  }
}

TrainResult Session::train() {
  stepping_.reset();
  return TrainingLoop(*this).run();
}

bool Session::train_step() {
  if (!stepping_) stepping_ = std::make_unique<TrainingLoop>(*this);
  return stepping_->step_alone();
}

void Session::settle_stepping() {
  if (stepping_) stepping_->settle();
}

void Session::end_stepping() {
  stepping_.reset();
}

std::optional<double> Session::current_loss() {
  Impl& m = *impl_;
  if (!m.has_stepped) return std::nullopt;
  std::vector<double> losses(m.places.size());
  m.team->run([&](int r) {
    losses[static_cast<std::size_t>(r)] = m.replicas[static_cast<std::size_t>(r)]->last_loss();
  });
  // Every rank's, in rank order, whatever process it is in: the same sum as one process's.
  losses = gather_rank_values(m.job, losses);
  double loss = 0;
  for (double l : losses)
    loss += l;
  return loss / static_cast<double>(losses.size());
}

}  // namespace ember::train
