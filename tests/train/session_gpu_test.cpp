// Training on a GPU gives the CPU's losses (same data, same initial weights), checkpoints move
// between the two, and mixed precision (f16 and bf16 activations) trains every configuration of
// the tree to losses close to f32's.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/network/cublaslt_matmul.hpp"
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

// One process on every GPU (2 or more): a data error that only rank 1 meets (a one-hot key out of
// range, found on the device a batch late) ends the run with that error, and the other ranks,
// waiting for rank 1 inside NCCL kernels, are freed by aborting the group (it hung before).
TEST(SessionGpu, AnErrorOnOneGpuRankEndsEveryRankWithThatRanksMessage) {
  EMBER_REQUIRE_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 or more GPUs";
  const OneRankFailure f = one_rank_failure_config();
  SessionOptions o = quiet_options("cuda");
  o.gpus = {0, 1};
  {
    Session s(tiny_config(f.good, *f.data, 256, 2), o);
    EXPECT_EQ(s.train().iterations, 2);
  }
  Session s(tiny_config(f.bad, *f.data, 256, 4), o);
  const auto start = std::chrono::steady_clock::now();
  EMBER_EXPECT_THROW_WITH(s.train(), DataError, "is outside the slot's range");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

// Every configuration of the tree (configs/*.json and the reference check's DLRM, at test size)
// trains on CUDA with "mixed_precision" in f16 and in bf16, from the same initial weights on the
// same batches as an f32 run on CUDA. Tolerances follow from the 16-bit unit roundoff u (2^-11
// for f16, 2^-8 for bf16): each activation is rounded once per layer (relative error <= u), the
// models are at most ~16 layers deep, so the first loss (no training yet) may move by ~16 u
// relative. Training then feeds those differences back through the weights: later losses get 64 u,
// and their mean (noise averaged out) 16 u again. Evaluation AUC after 12 steps: 0.02 (f16) and
// 0.05 (bf16), an order of magnitude under the AUC a broken 16-bit layer costs.
TEST(SessionGpu, MixedPrecisionTrainsEveryConfigLikeF32) {
  EMBER_REQUIRE_GPU();
  for (const std::string& name : all_config_names()) {
    const nlohmann::json json = test_sized_config(name);
    auto data = make_dataset(json, 8000);
    std::ostringstream sink;
    SessionOptions gpu;
    gpu.progress = false;
    gpu.out = &sink;
    gpu.device = "cuda";
    auto run = [&](const std::vector<std::string>& overrides) {
      Session s(tiny_config(json, *data, 256, 12, overrides), gpu);
      auto losses = s.train().losses;
      return std::make_pair(losses, s.evaluate());
    };
    const auto [f32, f32_eval] = run({});
    ASSERT_EQ(f32.size(), 12u) << name;
    for (const char* half : {"f16", "bf16"}) {
      const bool bf16 = std::string(half) == "bf16";
      const double u = bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      const std::string what = name + " " + half;
      const auto [mixed, mixed_eval] =
          run({"solver.mixed_precision=true", std::string("solver.mixed_precision_dtype=") + half});
      ASSERT_EQ(mixed.size(), f32.size()) << what;
      double sum_f32 = 0, sum_mixed = 0;
      for (std::size_t i = 0; i < f32.size(); ++i) {
        const double a = f32[i].second, b = mixed[i].second;
        ASSERT_TRUE(std::isfinite(b)) << what << " iteration " << i + 1;
        EXPECT_NEAR(b, a, (i == 0 ? 16 : 64) * u * std::fabs(a)) << what << " iteration " << i + 1;
        sum_f32 += a;
        sum_mixed += b;
      }
      EXPECT_NEAR(sum_mixed, sum_f32, 16 * u * std::fabs(sum_f32)) << what << " mean loss";
      EXPECT_EQ(mixed_eval.samples, f32_eval.samples) << what;
      EXPECT_NEAR(mixed_eval.auc, f32_eval.auc, bf16 ? 0.05 : 0.02) << what;
    }
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

// The solver key `algorithm_search` reaches the fully connected layers: off, no product is timed
// (cuBLASLt's heuristic choice, the same in every process, so that runs repeat bit for bit); on
// (HugeCTR's default), the products are timed once. It once had no effect, and timed choices
// made GPU runs differ from run to run.
TEST(SessionGpu, AlgorithmSearchKeyDecidesWhetherProductsAreTimed) {
  EMBER_REQUIRE_GPU();
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  std::ostringstream sink;
  SessionOptions o;
  o.progress = false;
  o.out = &sink;
  o.device = "cuda";
  network::cuda::clear_algorithm_cache();
  const std::int64_t before = network::cuda::searched_product_count();
  std::vector<std::pair<std::int64_t, double>> first;
  {
    Session s(tiny_config(json, *data, 256, 3, {"solver.algorithm_search=false"}), o);
    first = s.train().losses;
  }
  EXPECT_EQ(network::cuda::searched_product_count(), before) << "timed with the search off";
  {
    Session s(tiny_config(json, *data, 256, 3, {"solver.algorithm_search=false"}), o);
    EXPECT_EQ(s.train().losses, first) << "the heuristic's choices did not repeat bit for bit";
  }
  {
    Session s(tiny_config(json, *data, 256, 3, {"solver.algorithm_search=true"}), o);
    (void)s.train();
  }
  EXPECT_GT(network::cuda::searched_product_count(), before) << "nothing timed with the search on";
}

// A host table with an 8 % device cache on the GPU trains like the whole table on the device: the
// same losses bit for bit (when the whole-table run repeats itself bit for bit, as it should),
// the same AUC, and the cache's figures in the result; a checkpoint saved with the cache loads on
// the device and the reverse.
TEST(SessionGpu, HostCacheTrainsLikeTheWholeTable) {
  EMBER_REQUIRE_GPU();
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 16000);
  std::ostringstream sink;
  SessionOptions gpu;
  gpu.progress = false;
  gpu.out = &sink;
  gpu.device = "cuda";
  // Batch 256 over 26 slots of 2,000 keys takes ~3,400 distinct rows of the 52,000 (a batch's
  // rows are unpinned before the next is prepared): 8 % (4,160 rows) holds one batch and misses
  // (at 15 % the last window hit every row).
  const std::vector<std::string> host = {"layers.sparse_embedding1.storage.location=host",
                                         "layers.sparse_embedding1.storage.cache_ratio=0.08",
                                         "solver.eval_interval=60", "solver.max_eval_batches=8"};
  const std::vector<std::string> device = {"layers.sparse_embedding1.storage.location=device",
                                           "solver.eval_interval=60", "solver.max_eval_batches=8"};
  auto run = [&](const std::vector<std::string>& overrides, const std::filesystem::path& save) {
    Session s(tiny_config(json, *data, 256, 60, overrides), gpu);
    TrainResult r = s.train();
    r.last_eval = s.evaluate();  // what a reload must reproduce
    if (!save.empty()) s.save(save);
    return r;
  };
  ember::testing::ScratchDir dir;
  const TrainResult whole = run(device, dir / "device");
  const TrainResult again = run(device, {});
  const TrainResult cached = run(host, dir / "host");
  ASSERT_EQ(cached.losses.size(), whole.losses.size());
  const bool repeatable = again.losses == whole.losses;
  for (std::size_t i = 0; i < whole.losses.size(); ++i) {
    if (repeatable) {
      EXPECT_EQ(cached.losses[i].second, whole.losses[i].second) << "iteration " << i + 1;
    } else {
      EXPECT_NEAR(cached.losses[i].second, whole.losses[i].second,
                  1e-4 * std::fabs(whole.losses[i].second))
          << "iteration " << i + 1 << " (the whole-table run itself does not repeat bit for bit)";
    }
  }
  ASSERT_TRUE(cached.last_eval && whole.last_eval);
  EXPECT_NEAR(cached.last_eval->auc, whole.last_eval->auc, repeatable ? 0.0 : 1e-4);
  EXPECT_TRUE(whole.cache.empty());
  ASSERT_EQ(cached.cache.size(), cached.rates.size());
  // The cache is exercised once warm: some window of the second half of the run both misses and
  // moves rows. (Not the last window alone: it is the one step at the evaluation, which may prepare
  // no training batch at all and then reports no lookups.)
  const std::size_t half = cached.cache.size() / 2;
  const bool misses =
      std::any_of(cached.cache.begin() + static_cast<std::ptrdiff_t>(half), cached.cache.end(),
                  [](const CacheFigures& f) {
                    return f.hit_rate < 1.0 && f.fetched_per_step + f.new_per_step > 0.0;
                  });
  EXPECT_TRUE(misses) << "no window of the second half missed (cache of 8 %)";
  // Checkpoints across locations: the same evaluation from either file, wherever it is loaded.
  for (const auto& [saved, load_with] : {std::pair{"host", device}, std::pair{"device", host}}) {
    Session s(tiny_config(json, *data, 256, 60, load_with), gpu);
    s.load(dir / saved, false);
    const EvalResult e = s.evaluate();
    const EvalResult& want = std::string(saved) == "host" ? *cached.last_eval : *whole.last_eval;
    EXPECT_NEAR(e.auc, want.auc, 1e-6) << "saved on the " << saved;
    EXPECT_NEAR(e.average_loss, want.average_loss, 1e-6 * std::fabs(want.average_loss))
        << "saved on the " << saved;
  }
}

}  // namespace
}  // namespace ember::train
