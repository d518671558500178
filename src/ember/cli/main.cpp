// ember: the command line. Errors end as one line "ember: error: <message>" and exit status 1.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "ember/cli/commands.hpp"
#include "ember/cli/version.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/openmp_policy.hpp"

int main(int argc, char** argv) {
  ember::prefer_passive_openmp(argv);
  CLI::App app{"Ember: CTR model training on HugeCTR's data and configurations", "ember"};
  app.require_subcommand(0, 1);
  // Subcommands inherit this: --log-level may come after the command's name too.
  app.fallthrough();
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& level) { ember::set_log_level(level); },
         "Log level: trace, debug, info, warn, error or off (default: $EMBER_LOG_LEVEL or info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  bool version = false, verbose = false;
  app.add_flag("--version", version, "Print the version and the build's features, then exit");
  app.add_flag("-v,--verbose", verbose,
               "With --version: also every EMBER_* environment variable and its value");
  ember::cli::add_train_command(app);
  ember::cli::add_eval_command(app);
  ember::cli::add_predict_command(app);
  ember::cli::add_inspect_command(app);
  ember::cli::add_datagen_command(app);
  ember::cli::add_convert_command(app);
  ember::cli::add_plot_command(app);
  try {
    app.parse(argc, argv);
    if (version) {
      std::cout << ember::cli::version_text(verbose);
    } else if (app.get_subcommands().empty()) {
      std::cerr << app.help() << "ember: error: a command is required (see the list above)"
                << std::endl;
      return 1;
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ember::cli::CommandExit& e) {
    std::cout.flush();
    return e.status;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "ember: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
