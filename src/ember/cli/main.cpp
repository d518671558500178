// ember: the command line. Errors end as one line "ember: error: <message>" and exit status 1.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "ember/cli/commands.hpp"
#include "ember/cli/version.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/openmp_policy.hpp"
#include "ember/distributed/process_world.hpp"

namespace {

// A process started by mpirun joins its job first: process 0 alone prints results and info
// lines (the others keep warnings and errors).
void join_mpi_launch() {
  if (!ember::distributed::launched_by_mpi()) return;
  const ember::distributed::ProcessWorld world = ember::distributed::join_mpi_world();
  if (world.rank != 0) {
    std::cout.rdbuf(nullptr);
    ember::set_log_level("warn");
  }
  if (const int threads = ember::share_cores_with_local_processes(); threads > 0) {
    EMBER_LOG_INFO(
        "{} OpenMP threads in each process (the processes on this machine share half "
        "its cores; OMP_NUM_THREADS overrides)",
        threads);
  }
}

// The error line of a failed command; in a job of several processes it names the process and
// ends all of them (the others may be waiting for this one in a collective).
int fail(const std::exception& e) {
  std::cout.flush();
  const ember::distributed::ProcessWorld world = ember::distributed::process_world();
  if (world.size <= 1) {
    std::cerr << "ember: error: " << e.what() << std::endl;
    return 1;
  }
  // One write of the whole line: the processes of a job fail at the same moment, and pieces of
  // their lines written one by one come out interleaved.
  const std::string line = "ember: error: process " + std::to_string(world.rank) + " of " +
                           std::to_string(world.size) + ": " + e.what() + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  // Processes that fail alike (a configuration error) get a moment to say so themselves.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ember::distributed::abort_processes(1);
}

}  // namespace

int main(int argc, char** argv) {
  ember::prefer_passive_openmp(argv);
  try {
    join_mpi_launch();
  } catch (const std::exception& e) {
    std::cerr << "ember: error: " << e.what() << std::endl;
    return 1;
  }
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
    return fail(e);
  }
  return 0;
}
