// ember train CONFIG: trains a model from a HugeCTR v3 configuration.
#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>

#include "ember/cli/commands.hpp"
#include "ember/cli/session_flags.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/distributed/process_world.hpp"
#include "ember/train/checkpoint_recovery.hpp"
#include "ember/train/output_paths.hpp"
#include "ember/train/snapshot_retention.hpp"

namespace ember::cli {

namespace {

namespace fs = std::filesystem;

struct TrainFlags {
  SessionFlags session;
  std::string model_out, resume, run_dir, export_initial;
  bool no_progress = false;
};

// Ctrl-C: the first asks training to stop after the current step (with a snapshot), the second
// ends the process at once, as an unhandled SIGINT does.
std::atomic<bool> stop_requested{false};

extern "C" void on_interrupt(int) {
  if (stop_requested.exchange(true)) {
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
    return;
  }
  static const char kMessage[] =
      "\nember: stopping after the current step and writing a snapshot (Ctrl-C again to abort "
      "at once)\n";
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
}

class InterruptHandler {
 public:
  InterruptHandler() {
    struct sigaction action = {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptHandler() { ::sigaction(SIGINT, &previous_, nullptr); }
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

 private:
  struct sigaction previous_ = {};
};

// Everything the run will write, checked before the first step.
void check_outputs(const TrainFlags& f, const train::ModelConfig& config, const fs::path& run_dir) {
  if (!f.model_out.empty()) {
    train::recover_checkpoint(f.model_out);
    train::check_checkpoint_destination(f.model_out, "--model-out");
  }
  if (!f.export_initial.empty()) {
    train::check_checkpoint_destination(f.export_initial, "--export-initial");
  }
  if (!run_dir.empty()) train::check_output_directory(run_dir, "--run-dir");
  if (config.solver.snapshot > 0) {
    const train::SnapshotPlace snapshots =
        train::snapshot_place(config.solver.snapshot_prefix, run_dir);
    train::check_output_directory(snapshots.parent.empty() ? fs::path(".") : snapshots.parent,
                                  "solver.snapshot_prefix");
  }
  if (const std::string& prefix = config.solver.export_predictions_prefix; !prefix.empty()) {
    const fs::path parent = fs::path(prefix).parent_path();
    train::check_output_directory(parent.empty() ? fs::path(".") : parent,
                                  "solver.export_predictions_prefix");
  }
}

// Where `ember datagen --out DIR` puts a split's source ("train", "eval") in a format.
fs::path datagen_source(const fs::path& dir, data::DataFormat format, const std::string& split) {
  switch (format) {
    case data::DataFormat::Raw:
      return dir / (split + ".bin");
    case data::DataFormat::Parquet:
      return dir / split / "_file_list.txt";
    default:
      return dir / (split + ".txt");
  }
}

// A first run of a sample configuration names a dataset that is not there yet: the error says
// how to make one of the model's shape ("" when the training source exists).
std::string missing_source_hint(const train::ModelConfig& config, const std::string& config_path) {
  const data::DataConfig& d = config.data;
  std::error_code err;
  if (d.source.empty() || fs::exists(d.source, err)) return "";
  const std::string raw_note =
      d.format == data::DataFormat::Raw
          ? cat(" (for Raw it writes the Data layer's num_samples, ", d.num_samples,
                "; for fewer, add --samples N and --set layers.data.num_samples=N)")
          : std::string();
  // The source in datagen's layout under some DIR: then --out DIR writes exactly it.
  const fs::path given(d.source);
  for (fs::path dir = given.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (datagen_source(dir, d.format, "train") == given) {
      return cat(
          "; to train on synthetic data of this model's shape, make it first: ember datagen "
          "--like ",
          config_path, " --out ", dir.string(), raw_note);
    }
    if (dir == dir.parent_path()) break;
  }
  return cat("; to train on synthetic data of this model's shape: ember datagen --like ",
             config_path, " --out DIR", raw_note,
             ", then --set layers.data.source=", datagen_source("DIR", d.format, "train").string(),
             " --set layers.data.eval_source=", datagen_source("DIR", d.format, "eval").string());
}

void print_done(const train::TrainResult& r) {
  std::cout << "done iter=" << r.iterations;
  if (r.last_loss) std::cout << " loss=" << *r.last_loss;
  if (r.last_eval) {
    std::cout << " AUC=" << r.last_eval->auc << " AverageLoss=" << r.last_eval->average_loss;
    if (r.last_eval->hit_rate) std::cout << " HitRate=" << *r.last_eval->hit_rate;
  }
  if (r.skipped_batches > 0) std::cout << " skipped=" << r.skipped_batches;
  std::cout << " samples/s=" << static_cast<long long>(r.samples_per_second)
            << " seconds=" << r.seconds << std::endl;
}

void run(const TrainFlags& f) {
  train::ModelConfig config = f.session.load_config();
  train::SessionOptions o = f.session.session_options();
  // The run's metrics go beside the model it produces, unless told otherwise.
  o.run_dir = !f.run_dir.empty() ? f.run_dir : f.model_out;
  // Process 0 of an MPI job checks and writes the outputs; the others only take part.
  if (distributed::process_world().rank == 0) check_outputs(f, config, o.run_dir);
  o.progress = !f.no_progress;
  // A resumed run continues its metrics.csv.
  o.append_metrics = !f.resume.empty();
  o.stop_requested = &stop_requested;
  const std::string config_path = f.session.config;
  const std::string hint = missing_source_hint(config, config_path);
  train::Session session(std::move(config), o);
  if (!f.resume.empty()) {
    session.load(f.resume);
    std::cout << "resumed iter=" << session.iteration() << " from " << f.resume << std::endl;
  }
  if (!f.export_initial.empty()) {
    session.save(f.export_initial);
    std::cout << "initial model written to " << f.export_initial << std::endl;
  }
  InterruptHandler interrupts;
  // The training source is opened here, by the training loop.
  const train::TrainResult r = [&] {
    try {
      return session.train();
    } catch (const DataError& e) {
      if (hint.empty()) throw;
      throw DataError(cat(e.what(), hint), e.where());
    }
  }();
  if (r.interrupted) {
    std::cout << "stopped by Ctrl-C at iter=" << r.iterations << "; the model is in "
              << r.interrupt_snapshot.string() << " (continue with: ember train " << config_path
              << " --resume " << r.interrupt_snapshot.string() << ")" << std::endl;
    throw CommandExit{130};
  }
  if (!f.model_out.empty()) {
    session.save(f.model_out);
    std::cout << "model saved to " << f.model_out << std::endl;
  }
  print_done(r);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a HugeCTR v3 JSON configuration");
  f->session.add_to(*cmd);
  cmd->add_option("--model-out", f->model_out,
                  "Save the final model (a checkpoint directory) here; metrics.csv goes beside it. "
                  "It must be new, empty, or an Ember checkpoint or run directory");
  cmd->add_option("--resume", f->resume, "Continue from a checkpoint directory (a snapshot)");
  cmd->add_option("--run-dir", f->run_dir, "Where metrics.csv goes (default: --model-out)");
  cmd->add_option("--export-initial", f->export_initial,
                  "Also save the model before the first step (for reference checks)");
  cmd->add_flag("--no-progress", f->no_progress, "No progress bar, even on a terminal");
  cmd->callback([f] { run(*f); });
}

}  // namespace ember::cli
