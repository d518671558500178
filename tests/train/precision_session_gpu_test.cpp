// On a GPU: a CUDA-graph session gives bitwise the losses of an eager one (the dense step is
// captured on the second step and replayed after), a model the graph cannot hold (Dropout) runs
// without one and says why, and 16-bit embedding tables train close to f32 tables.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

TEST(PrecisionSessionGpu, GraphReplayGivesTheEagerLossesBitwise) {
  EMBER_REQUIRE_GPU();
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  for (const char* extra : {"solver.mixed_precision=false", "solver.mixed_precision=1024",
                            "solver.enable_tf32_compute=true"}) {
    // The heuristic's cuBLASLt algorithms (no timing), so that both sessions multiply alike.
    const char* fixed = "solver.algorithm_search=false";
    Session eager(tiny_config(json, *data, 256, 20, {extra, fixed}), quiet_options("cuda"));
    const auto want = losses_of(eager.train());
    const EvalResult want_eval = eager.evaluate();
    for (const char* key : {"solver.cuda_graph=true", "solver.holistic_cuda_graph=true"}) {
      Session graph(tiny_config(json, *data, 256, 20, {extra, fixed, key}), quiet_options("cuda"));
      const TrainResult trained = graph.train();
      const auto got = losses_of(trained);
      EXPECT_EQ(graph.cuda_graph_status(), "replaying") << extra << " " << key;
      // The loop holds the batch it trains on and the next one, prepared ahead (a Local hash
      // table inserts ahead): the pipeline made slots for both up front, so its collector made
      // none while the step was being captured.
      EXPECT_EQ(trained.late_device_slots, 0) << extra << " " << key;
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << extra << " " << key << " iteration " << i + 1;
      }
      EXPECT_EQ(graph.evaluate().auc, want_eval.auc) << extra << " " << key;
    }
  }
}

TEST(PrecisionSessionGpu, DropoutRunsWithoutAGraphAndSaysWhy) {
  EMBER_REQUIRE_GPU();
  const auto json = sample_config("dcn");
  auto data = make_dataset(json, 4000);
  Session eager(tiny_config(json, *data, 256, 6), quiet_options("cuda"));
  const auto want = losses_of(eager.train());
  Session s(tiny_config(json, *data, 256, 6, {"solver.cuda_graph=true"}), quiet_options("cuda"));
  EXPECT_NE(s.cuda_graph_status().find("(Dropout) draws a new mask"), std::string::npos)
      << s.cuda_graph_status();
  EXPECT_EQ(losses_of(s.train()), want);
}

TEST(PrecisionSessionGpu, SixteenBitTablesTrainCloseToF32Tables) {
  EMBER_REQUIRE_GPU();
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 16000);
  for (const char* mixed : {"solver.mixed_precision=false", "solver.mixed_precision=1024"}) {
    Session f32(tiny_config(json, *data, 256, 40, {mixed}), quiet_options("cuda"));
    const auto want = losses_of(f32.train());
    const double want_auc = f32.evaluate().auc;
    for (const char* dtype : {"\"f16\"", "\"bf16\""}) {
      Session s(tiny_config(json, *data, 256, 40,
                            {mixed, std::string("solver.embedding_dtype=") + dtype,
                             "solver.cuda_graph=true"}),
                quiet_options("cuda"));
      const auto got = losses_of(s.train());
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << mixed << " " << dtype << " iteration " << i + 1;
        EXPECT_NEAR(got[i], want[i], 0.02 * std::fabs(want[i]))
            << mixed << " " << dtype << " iteration " << i + 1;
      }
      EXPECT_NEAR(s.evaluate().auc, want_auc, 0.02) << mixed << " " << dtype;
    }
  }
}

}  // namespace
}  // namespace ember::train
