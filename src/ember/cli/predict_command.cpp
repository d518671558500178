// ember predict [CONFIG] --model DIR --out FILE [--data FILE]: one "label,score" line per
// evaluated sample of the eval source (the configuration recorded in the model when CONFIG is
// left out), or of any data file given with --data.
#include <CLI/CLI.hpp>

#include <iostream>

#include "ember/cli/commands.hpp"
#include "ember/cli/session_flags.hpp"
#include "ember/train/output_paths.hpp"

namespace ember::cli {

namespace {
struct PredictFlags {
  ModelFlags model;
  std::string out;
};
}  // namespace

void add_predict_command(CLI::App& app) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Write \"label,score\" (score: the predicted probability) for every evaluated "
      "sample of the configuration's eval source, or of --data");
  f->model.add_to(*cmd);
  cmd->add_option("--out", f->out, "Output file")->required();
  cmd->callback([f] {
    train::check_output_file(f->out, "--out");
    const auto session = f->model.load_model(train::SessionPurpose::Predict);
    const train::EvalResult r = session->predict(f->out);
    std::cout << "wrote " << r.samples << " predictions to " << f->out << "\n";
    std::cout << "AUC=" << r.auc << " AverageLoss=" << r.average_loss << std::endl;
  });
}

}  // namespace ember::cli
