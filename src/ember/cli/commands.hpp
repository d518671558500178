// The commands of the `ember` executable. Each lives in its own file and adds itself (flags,
// help, callback) to the app; the work is done by the layer it fronts (the data layer for these),
// the command only turns flags into options.
#pragma once

namespace CLI {
class App;
}

namespace ember::cli {

// Thrown by a command that ends with a status of its own after saying why (train stopped by
// Ctrl-C: 130); main returns the status.
struct CommandExit {
  int status = 0;
};

void add_inspect_command(CLI::App& app);  // ember inspect PATH
void add_datagen_command(CLI::App& app);  // ember datagen --out DIR
void add_convert_command(CLI::App& app);  // ember convert criteo IN.tsv... --out DIR
void add_plot_command(CLI::App& app);     // ember plot RUN_DIR
void add_train_command(CLI::App& app);    // ember train CONFIG
void add_eval_command(CLI::App& app);     // ember eval [CONFIG] --model DIR
void add_predict_command(CLI::App& app);  // ember predict [CONFIG] --model DIR --out FILE

}  // namespace ember::cli
