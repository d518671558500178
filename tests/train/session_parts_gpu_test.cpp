// Session::set_part_timer on CUDA: the parts are timed with events on the first rank's stream and
// add up to (at most) the steps' wall time; with cuda_graph the captured dense step is one part.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "ember/core/part_timer.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

TEST(SessionPartsGpu, DevicePartsFitInTheStepsAndAGraphIsOnePart) {
  EMBER_REQUIRE_GPU();
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  for (bool graph : {false, true}) {
    std::vector<std::string> overrides = {"solver.mixed_precision=true"};
    if (graph) overrides.push_back("solver.cuda_graph=true");
    Session s(tiny_config(json, *data, 512, 4, overrides), quiet_options("cuda"));
    (void)s.train();  // warm-up (and, with cuda_graph, the capture)
    PartTimer timer(Place::cuda(0));
    s.set_part_timer(&timer);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 6; ++i)
      ASSERT_TRUE(s.train_step());
    const auto& parts = timer.collect();
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(timer.steps(), 6);
    double device_ms = 0;
    std::set<std::string> names;
    for (const auto& p : parts) {
      names.insert(p.name);
      EXPECT_GE(p.ms, 0.0) << p.name;
      if (!p.host) device_ms += p.ms;
    }
    EXPECT_GT(device_ms, 0.0);
    EXPECT_LE(device_ms, wall * 1.01 + 0.1);
    EXPECT_EQ(names.count("dense forward + backward (CUDA graph)"), graph ? 1u : 0u);
    EXPECT_EQ(names.count("top MLP forward"), graph ? 0u : 1u);
    for (const char* part : {"embedding forward", "embedding update", "dense optimizer",
                             "data: batch copies and inputs", "host: waiting for the next batch"}) {
      EXPECT_EQ(names.count(part), 1u) << part;
    }
  }
}

}  // namespace
}  // namespace ember::train
