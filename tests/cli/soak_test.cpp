// Soak: `ember train` killed with SIGKILL at random moments, many times over, most of them during
// its snapshots and its final save; after each kill the previous model (or the new one, if its
// save completed) and every snapshot the run announced must still load, as `ember eval` finds
// them (recovering an interrupted save first).
//
// Bounded in time: EMBER_TEST_SOAK_SECONDS (default 60) seconds of kill rounds; set it higher
// for a longer soak, e.g. EMBER_TEST_SOAK_SECONDS=1800 ctest -R Soak. The seed is
// EMBER_TEST_SEED (printed at start).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <regex>

#include "cli/cli_run_support.hpp"
#include "cli/process_support.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double soak_seconds() {
  const char* env = std::getenv("EMBER_TEST_SOAK_SECONDS");
  return env != nullptr && *env != '\0' ? std::atof(env) : 60.0;
}

TEST(Soak, KillsDuringSavesLoseNoAnnouncedModel) {
  testing::ScratchDir dir;
  const std::string config = (testing::source_dir() / "configs" / "dlrm.json").string();
  const std::string data = (dir / "data").string();
  ASSERT_EQ(
      ember("datagen --like '" + config + "' --out '" + data + "' --samples 6000", dir).status, 0);
  const fs::path model = dir / "model";
  // A snapshot after every step: most of a run is saving.
  const std::vector<std::string> train =
      testing::ember_argv({"train",         config,
                           "--set",         "layers.data.source=" + data + "/train.txt",
                           "--set",         "layers.data.eval_source=" + data + "/eval.txt",
                           "--device",      "cpu",
                           "--set",         "solver.batchsize=256",
                           "--set",         "solver.batchsize_eval=1024",
                           "--set",         "solver.max_eval_batches=1",
                           "--set",         "solver.display=1",
                           "--set",         "solver.max_iter=8",
                           "--set",         "solver.snapshot=1",
                           "--no-progress", "--model-out",
                           model.string()});
  int restored = 0, settled = 0;  // interrupted saves put back / cleaned up by the next start
  auto loads = [&](const fs::path& checkpoint) {
    const Outcome e = ember("eval --model '" + checkpoint.string() + "'", dir);
    restored += e.err.find("restored from") != std::string::npos;
    settled += e.err.find("left by an interrupted save") != std::string::npos;
    return e.status == 0 ? std::string() : e.err;
  };
  // The first run completes: the previous model every later round must keep, and the time a
  // whole run takes.
  const auto first_start = Clock::now();
  {
    testing::ChildProcess run(train, dir / "err.txt");
    ASSERT_EQ(run.wait(), 0) << slurp(dir / "err.txt");
  }
  const double full = std::chrono::duration<double>(Clock::now() - first_start).count();
  ASSERT_EQ(loads(model), "");

  auto rng = testing::make_rng();
  const std::regex announced("snapshot iter=[0-9]+ dir=(.*)");
  const auto deadline = Clock::now() + std::chrono::duration<double>(soak_seconds());
  int rounds = 0, killed_in_final_half = 0;
  while (rounds < 3 || Clock::now() < deadline) {
    // Half the kills fall in the run's second half (snapshots and the final save), the rest
    // anywhere.
    const double at = rng() % 2 == 0 ? full * (0.5 + 0.6 * std::uniform_real_distribution<>()(rng))
                                     : full * 1.1 * std::uniform_real_distribution<>()(rng);
    killed_in_final_half += at > full * 0.5;
    std::vector<std::string> lines;
    {
      testing::ChildProcess run(train, dir / "err.txt");
      (void)run.wait_for_line([](const std::string&) { return false; },
                              std::chrono::milliseconds(static_cast<long>(at * 1000)));
      run.send(SIGKILL);
      (void)run.wait();
      lines = run.lines();
    }
    const std::string why = loads(model);
    ASSERT_EQ(why, "") << "round " << rounds << ", killed after " << at << " s: the model";
    for (const std::string& line : lines) {
      std::smatch m;
      if (!std::regex_match(line, m, announced)) continue;
      const std::string snapshot_why = loads(m[1].str());
      ASSERT_EQ(snapshot_why, "") << "round " << rounds << ", killed after " << at
                                  << " s: announced " << line;
    }
    // Snapshots are checked once: keep the directory small.
    for (const auto& e : fs::directory_iterator(model)) {
      if (e.path().filename().string().rfind("snapshot_", 0) == 0) fs::remove_all(e.path());
    }
    ++rounds;
  }
  std::printf(
      "soak: %d kills (%d in the second half of a %.2f s run); %d saves restored, %d leftovers "
      "settled\n",
      rounds, killed_in_final_half, full, restored, settled);
}

}  // namespace
}  // namespace ember
