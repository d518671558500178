// Running `ember` under the MPI launcher from tests (cli/mpi_cli_test.cpp on CPU ranks,
// cli/mpi_cli_gpu_test.cpp on GPUs). The launcher is EMBER_MPIEXEC, defined where the build
// found one.
#pragma once

#include <string>
#include <vector>

#include "cli/cli_run_support.hpp"

namespace ember {

#ifdef EMBER_MPIEXEC
inline constexpr const char* kMpiexec = EMBER_MPIEXEC;
#else
inline constexpr const char* kMpiexec = nullptr;
#endif

#define EMBER_REQUIRE_MPI()                                                        \
  do {                                                                             \
    if (::ember::kMpiexec == nullptr) GTEST_SKIP() << "this build has no mpiexec"; \
  } while (0)

// "<mpiexec> -np N ..." allowed as root and with more processes than cores.
std::string mpirun(int processes);

// `ember <args>` in `dir`, under mpirun with `processes` when it is above 0.
Outcome run_in(int processes, const std::string& args, const testing::ScratchDir& dir);

// The path of configs/<name>.json.
std::string config_path(const std::string& name);

// Small, quick runs on `device` (2 cores in CI): 20 iterations of 240 samples, a display line
// every 5, an evaluation every 10.
std::string train_args(const std::string& config, const std::string& data,
                       const std::string& device = "cpu");

// The lines of a run without the rates and timings, which differ from run to run.
std::vector<std::string> numbers_of(const std::string& out);

// The number after "key=" in `text` (the first), -1 when absent.
double value_of_key(const std::string& text, const std::string& key);

}  // namespace ember
