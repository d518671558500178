// What the training loop's per-step agreement on stopping costs in a job of several processes
// (issue 14): its call time on the main thread, once a step, while a second thread of every
// process moves MB-sized all-gathers over a channel of its own, as the input pipeline's key
// exchange does. The old way (a blocking all-gather of the flag every step) against
// distributed::ProcessVote answered 1, 2 and 4 rounds late.
//
//   mpirun -np 2 bench_process_vote [--mb M] [--step-us U] [--steps N]
//
// M: MB each process adds to the second thread's all-gathers (7, DLRM-Kaggle's keys of half a
// 131072-sample batch); U: the host's other work per step (2000 us); N: steps (300). Outside
// mpirun it says so and exits 0. Ends with SUMMARY lines (process 0).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ember/distributed/collectives.hpp"
#include "ember/distributed/process_channel.hpp"
#include "ember/distributed/process_vote.hpp"
#include "ember/distributed/process_world.hpp"

namespace {

using namespace ember;
using Clock = std::chrono::steady_clock;

struct Figures {
  double median_us = 0, p90_us = 0, max_us = 0;
};

// Runs `steps` steps of `step_us` of other work, each with one call of `agree` timed, while a
// second thread all-gathers `mb` MB per process over its own channel until the steps are done
// (none for mb 0).
template <class Agree>
Figures run(int steps, int step_us, int mb, Agree&& agree) {
  auto channel = distributed::ProcessChannel::open();
  std::atomic<bool> done{false};
  std::thread exchanges([&] {
    if (mb == 0) return;
    std::vector<std::byte> mine(static_cast<std::size_t>(mb) << 20), all;
    std::vector<std::int64_t> offsets;
    // Every process runs the same number of all-gathers: they agree on stopping through the
    // channel itself (a flag appended to each message).
    for (;;) {
      mine.back() = done.load() ? std::byte{1} : std::byte{0};
      channel->all_gather(mine, all, offsets);
      bool any = false;
      for (std::size_t p = 0; p + 1 < offsets.size(); ++p)
        any = any || all[static_cast<std::size_t>(offsets[p + 1]) - 1] == std::byte{1};
      if (any) break;
    }
  });
  std::vector<double> us;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    agree(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::microseconds(step_us));
  }
  done = true;
  exchanges.join();
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 9 / 10], us.back()};
}

}  // namespace

int main(int argc, char** argv) {
  int mb = 7, step_us = 2000, steps = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) {
      mb = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--step-us" && i + 1 < argc) {
      step_us = std::max(0, std::stoi(argv[++i]));
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::max(10, std::stoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: mpirun -np P bench_process_vote [--mb M] [--step-us U] "
                   "[--steps N]\n");
      return 2;
    }
  }
  if (!distributed::mpi_compiled() || !distributed::launched_by_mpi()) {
    std::printf("bench_process_vote: run it under mpirun (-np 2 or more); nothing measured\n");
    return 0;
  }
  const distributed::ProcessWorld world = distributed::join_mpi_world();
  const auto print = [&](const char* what, const Figures& f) {
    if (world.rank != 0) return;
    std::printf("  %-44s median %8.1f us  p90 %8.1f us  max %8.1f us\n", what, f.median_us,
                f.p90_us, f.max_us);
    std::printf(
        "SUMMARY | distributed | stop agreement per step, %s, %d processes (us, median / "
        "p90) | %.1f / %.1f | - | -\n",
        what, world.size, f.median_us, f.p90_us);
  };
  if (world.rank == 0) {
    std::printf(
        "bench_process_vote: %d processes, %d MB all-gathers beside, a step every %d us, "
        "%d steps\n",
        world.size, mb, step_us, steps);
  }
  const auto blocking = [](int) { (void)distributed::all_gather_processes({0}); };
  print("blocking all-gather, nothing beside", run(steps, step_us, 0, blocking));
  print("blocking all-gather (the old way)", run(steps, step_us, mb, blocking));
  for (int late : {1, 2, 4}) {
    auto vote = distributed::ProcessVote::open(late);
    const std::string what = "ProcessVote, " + std::to_string(late) + " round(s) late";
    print(what.c_str(), run(steps, step_us, mb, [&](int) { (void)vote->next(false); }));
  }
  return 0;
}
