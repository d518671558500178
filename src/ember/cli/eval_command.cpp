// ember eval [CONFIG] --model DIR [--data FILE]: evaluates a saved model on the configuration's
// eval source (the configuration recorded in the model when CONFIG is left out), or on FILE.
#include <CLI/CLI.hpp>

#include <iostream>

#include "ember/cli/commands.hpp"
#include "ember/cli/session_flags.hpp"

namespace ember::cli {

void add_eval_command(CLI::App& app) {
  auto f = std::make_shared<ModelFlags>();
  CLI::App* cmd =
      app.add_subcommand("eval",
                         "Evaluate a saved model (up to max_eval_batches); the last line is "
                         "\"AUC=<a> AverageLoss=<l>\"");
  f->add_to(*cmd);
  cmd->callback([f] {
    const auto session = f->load_model(train::SessionPurpose::Evaluate);
    const train::EvalResult r = session->evaluate();
    std::cout << "samples=" << r.samples << "\n";
    std::cout << "AUC=" << r.auc << " AverageLoss=" << r.average_loss;
    if (r.hit_rate) std::cout << " HitRate=" << *r.hit_rate;
    std::cout << std::endl;
  });
}

}  // namespace ember::cli
