// Sessions on the CPU with the solver's 16-bit embedding tables and CUDA graph keys: f16 and bf16
// tables train the sample DLRM close to f32 tables, and cuda_graph on a CPU runs without a graph,
// saying why, with the losses of a run without the key.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

TEST(PrecisionSession, SixteenBitTablesTrainCloseToF32Tables) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 16000);
  Session f32(tiny_config(json, *data, 256, 40), quiet_options("cpu"));
  const auto want = losses_of(f32.train());
  const EvalResult want_eval = f32.evaluate();
  for (const char* dtype : {"f16", "bf16"}) {
    Session s(tiny_config(json, *data, 256, 40,
                          {std::string("solver.embedding_dtype=\"") + dtype + "\""}),
              quiet_options("cpu"));
    EXPECT_EQ(s.config().embeddings.at(0).value_dtype,
              std::string(dtype) == "f16" ? DType::F16 : DType::BF16);
    const auto got = losses_of(s.train());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << dtype << " iteration " << i + 1;
      // The tables differ by 16-bit rounding only: close losses, not equal ones.
      EXPECT_NEAR(got[i], want[i], 0.02 * std::fabs(want[i])) << dtype << " iteration " << i + 1;
    }
    EXPECT_NEAR(s.evaluate().auc, want_eval.auc, 0.02) << dtype;
  }
}

TEST(PrecisionSession, CudaGraphOnTheCpuRunsWithoutAGraphAndSaysWhy) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  Session plain(tiny_config(json, *data, 128, 6), quiet_options("cpu"));
  EXPECT_EQ(plain.cuda_graph_status(), "off");
  const auto want = losses_of(plain.train());
  for (const char* key : {"cuda_graph", "holistic_cuda_graph", "use_holistic_cuda_graph"}) {
    Session s(tiny_config(json, *data, 128, 6, {std::string("solver.") + key + "=true"}),
              quiet_options("cpu"));
    EXPECT_NE(s.cuda_graph_status().find("off: training runs on the CPU"), std::string::npos)
        << key << ": " << s.cuda_graph_status();
    EXPECT_EQ(losses_of(s.train()), want) << key;
  }
}

TEST(PrecisionSession, GraphKeysAreRead) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 1000);
  EXPECT_TRUE(tiny_config(json, *data, 64, 1, {"solver.cuda_graph=true"}).solver.cuda_graph);
  EXPECT_FALSE(tiny_config(json, *data, 64, 1).solver.cuda_graph);
  EXPECT_TRUE(tiny_config(json, *data, 64, 1, {"solver.holistic_cuda_graph=true"})
                  .solver.holistic_cuda_graph);
  EMBER_EXPECT_THROW_WITH(
      tiny_config(json, *data, 64, 1,
                  {"solver.holistic_cuda_graph=true", "solver.use_holistic_cuda_graph=true"}),
      ConfigError, "not both");
  EMBER_EXPECT_THROW_WITH(tiny_config(json, *data, 64, 1, {"solver.cuda_graph=\"yes\""}),
                          ConfigError, "\"cuda_graph\" must be true or false");
}

}  // namespace
}  // namespace ember::train
