// ember train CONFIG: trains a model from a HugeCTR v3 configuration.
#include <CLI/CLI.hpp>

#include <iostream>

#include "ember/cli/commands.hpp"
#include "ember/cli/session_flags.hpp"
#include "ember/core/log.hpp"

namespace ember::cli {

namespace {
struct TrainFlags {
  SessionFlags session;
  std::string model_out, resume, run_dir, export_initial;
  bool no_progress = false;
};

void run(const TrainFlags& f) {
  train::ModelConfig config = f.session.load_config();
  train::SessionOptions o = f.session.session_options();
  // The run's metrics go beside the model it produces, unless told otherwise.
  o.run_dir = !f.run_dir.empty() ? f.run_dir : f.model_out;
  o.progress = !f.no_progress;
  train::Session session(std::move(config), o);
  if (!f.resume.empty()) {
    session.load(f.resume);
    std::cout << "resumed iter=" << session.iteration() << " from " << f.resume << std::endl;
  }
  if (!f.export_initial.empty()) {
    session.save(f.export_initial);
    std::cout << "initial model written to " << f.export_initial << std::endl;
  }
  const train::TrainResult r = session.train();
  if (!f.model_out.empty()) {
    session.save(f.model_out);
    std::cout << "model saved to " << f.model_out << std::endl;
  }
  std::cout << "done iter=" << r.iterations;
  if (r.last_loss) std::cout << " loss=" << *r.last_loss;
  if (r.last_eval)
    std::cout << " AUC=" << r.last_eval->auc << " AverageLoss=" << r.last_eval->average_loss;
  std::cout << " samples/s=" << static_cast<long long>(r.samples_per_second)
            << " seconds=" << r.seconds << std::endl;
}
}  // namespace

void add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a HugeCTR v3 JSON configuration");
  f->session.add_to(*cmd);
  cmd->add_option("--model-out", f->model_out,
                  "Save the final model (a checkpoint directory) here; metrics.csv goes beside it");
  cmd->add_option("--resume", f->resume, "Continue from a checkpoint directory (a snapshot)");
  cmd->add_option("--run-dir", f->run_dir, "Where metrics.csv goes (default: --model-out)");
  cmd->add_option("--export-initial", f->export_initial,
                  "Also save the model before the first step (for reference checks)");
  cmd->add_flag("--no-progress", f->no_progress, "No progress bar, even on a terminal");
  cmd->callback([f] { run(*f); });
}

}  // namespace ember::cli
