// Training on a GPU gives the CPU's losses (same data, same initial weights), and checkpoints move
// between the two.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

TEST(SessionGpu, TrainsLikeTheCpu) {
  EMBER_REQUIRE_GPU();
  for (const char* name : {"dlrm", "dcn"}) {
    auto json = sample_config(name);
    // Dropout masks are the same on both (a function of seed, step and element); TF32 stays off.
    auto data = make_dataset(json, 8000);
    std::ostringstream sink;
    SessionOptions cpu, gpu;
    cpu.progress = gpu.progress = false;
    cpu.out = gpu.out = &sink;
    cpu.device = "cpu";
    gpu.device = "cuda";
    std::vector<std::pair<std::int64_t, double>> a, b;
    EvalResult ea, eb;
    {
      Session s(tiny_config(json, *data, 256, 12), cpu);
      a = s.train().losses;
      ea = s.evaluate();
    }
    {
      Session s(tiny_config(json, *data, 256, 12), gpu);
      EXPECT_EQ(s.describe_devices(), "cuda:0");
      b = s.train().losses;
      eb = s.evaluate();
    }
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      // Summation orders differ (cuBLAS, atomics-free but reordered reductions): close, not equal.
      EXPECT_NEAR(b[i].second, a[i].second, 2e-3 * std::fabs(a[i].second))
          << name << " iteration " << i + 1;
    }
    EXPECT_EQ(ea.samples, eb.samples);
    EXPECT_NEAR(eb.auc, ea.auc, 5e-3) << name;
  }
}

TEST(SessionGpu, CheckpointsMoveBetweenCpuAndGpu) {
  EMBER_REQUIRE_GPU();
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  std::ostringstream sink;
  SessionOptions gpu, cpu;
  gpu.device = "cuda";
  cpu.device = "cpu";
  gpu.out = cpu.out = &sink;
  EvalResult on_gpu;
  {
    Session s(tiny_config(json, *data, 256, 6), gpu);
    (void)s.train();
    on_gpu = s.evaluate();
    s.save(dir / "m");
  }
  Session s(tiny_config(json, *data, 256, 6), cpu);
  s.load(dir / "m", false);
  const EvalResult on_cpu = s.evaluate();
  EXPECT_NEAR(on_cpu.auc, on_gpu.auc, 1e-3);
  EXPECT_NEAR(on_cpu.average_loss, on_gpu.average_loss, 1e-3);
}

// The loss check on a GPU reads each step's loss one step late (the host does not wait for the
// step it just queued) and catches up at the end: it names the same iteration as the CPU, also
// when the last step is the one that diverged.
TEST(SessionGpu, ANonFiniteLossNamesTheIterationTheCpuNames) {
  EMBER_REQUIRE_GPU();
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  std::ostringstream sink;
  for (std::int64_t iterations : {2, 20}) {
    for (const char* device : {"cpu", "cuda"}) {
      SessionOptions o;
      o.progress = false;
      o.out = &sink;
      o.device = device;
      Session s(
          tiny_config(json, *data, 256, iterations, {"optimizer.adam_hparam.learning_rate=1e30"}),
          o);
      // NaN on the CPU; the GPU's summation order may make it infinite instead.
      EMBER_EXPECT_THROW_WITH(s.train(), Error, " at iteration 2;");
    }
  }
}

// nan_policy "skip" on a GPU: every step of a model with a NaN weight is skipped and leaves the
// dense files as they were (the embeddings' rows are checked on the CPU test).
TEST(SessionGpu, SkippedStepsApplyNoUpdate) {
  EMBER_REQUIRE_GPU();
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  std::ostringstream sink;
  SessionOptions o;
  o.progress = false;
  o.out = &sink;
  o.device = "cuda";
  {
    Session s(tiny_config(json, *data, 256, 3), o);
    (void)s.train();
    s.save(dir / "before");
  }
  poison_first_value(dir / "before", "dense.model");
  {
    Session s(tiny_config(json, *data, 256, 8, {"solver.nan_policy=skip"}), o);
    s.load(dir / "before");
    EXPECT_EQ(s.train().skipped_batches, 5);
    s.save(dir / "after");
  }
  auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const char* file : {"dense.model", "dense_opt_states.model"}) {
    EXPECT_EQ(bytes(dir / "before" / file), bytes(dir / "after" / file)) << file;
  }
}

}  // namespace
}  // namespace ember::train
