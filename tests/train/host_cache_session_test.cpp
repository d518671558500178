// Training sessions whose embeddings keep host tables with a small device cache (CPU ranks): the
// same losses, bit for bit, and the same AUC as the whole table, with prefetching by the training
// loop; the cache's figures in the output and metrics.csv; checkpoints across locations.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

std::vector<double> losses_of(const TrainResult& r) {
  std::vector<double> out;
  for (const auto& [it, loss] : r.losses)
    out.push_back(loss);
  return out;
}

SessionOptions options(int ranks, std::ostream& out, const std::filesystem::path& run_dir = {}) {
  SessionOptions o;
  o.cpu_ranks = ranks;
  o.progress = false;
  o.out = &out;
  o.run_dir = run_dir;
  return o;
}

std::vector<std::string> host_storage(double ratio) {
  return {"layers.sparse_embedding1.storage.location=host",
          "layers.sparse_embedding1.storage.cache_ratio=" + std::to_string(ratio)};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Variant {
  const char* name;
  std::vector<std::string> overrides;
  std::int64_t iterations;
  double cache_ratio;  // 1 % and 5 % cannot hold one batch of these small tables (see the
                       // embedding tests for those)
};

TEST(HostCacheSession, LossesAndAucEqualTheWholeTable) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 24000);
  const std::vector<std::string> eval = {"solver.eval_interval=100", "solver.max_eval_batches=8"};
  const std::vector<Variant> variants = {
      {"LocalizedSlotHash, Adam Local", {}, 300, 0.1},
      {"DistributedSlotHash, momentum Global",
       {"layers.sparse_embedding1.type=DistributedSlotSparseEmbeddingHash",
        "layers.sparse_embedding1.sparse_embedding_hparam.workspace_size_per_gpu_in_mb=4",
        "optimizer={\"type\":\"MomentumSGD\",\"update_type\":\"Global\","
        "\"momentum_sgd_hparam\":{\"learning_rate\":0.05,\"momentum_factor\":0.9}}"},
       100,
       1.0},
      {"LocalizedSlotHash, AdaGrad LazyGlobal",
       {"optimizer={\"type\":\"AdaGrad\",\"update_type\":\"LazyGlobal\","
        "\"adagrad_hparam\":{\"learning_rate\":0.05}}"},
       100,
       0.5},
      {"LocalizedSlotOneHot, SGD Global",
       {"layers.sparse_embedding1.type=LocalizedSlotSparseEmbeddingOneHot",
        "optimizer={\"type\":\"SGD\",\"update_type\":\"Global\","
        "\"sgd_hparam\":{\"learning_rate\":0.05}}"},
       100,
       0.25},
  };
  for (const Variant& v : variants) {
    for (int ranks : {1, 2}) {
      std::ostringstream whole_out, cached_out;
      Session whole(tiny_config(json, *data, 128, v.iterations, eval + v.overrides),
                    options(ranks, whole_out));
      const TrainResult want = whole.train();
      Session cached(tiny_config(json, *data, 128, v.iterations,
                                 eval + v.overrides + host_storage(v.cache_ratio)),
                     options(ranks, cached_out));
      const TrainResult got = cached.train();
      const std::string what = std::string(v.name) + ", " + std::to_string(ranks) + " rank(s)";
      ASSERT_EQ(losses_of(got).size(), static_cast<std::size_t>(v.iterations)) << what;
      EXPECT_EQ(losses_of(got), losses_of(want)) << what;
      ASSERT_TRUE(got.last_eval && want.last_eval) << what;
      EXPECT_EQ(got.last_eval->auc, want.last_eval->auc) << what;
      EXPECT_EQ(got.last_eval->average_loss, want.last_eval->average_loss) << what;
      // Every display line has its cache line; the rows did move.
      const std::string text = cached_out.str();
      EXPECT_NE(text.find("cache iter=" + std::to_string(v.iterations) + " hit_rate="),
                std::string::npos)
          << what;
      EXPECT_EQ(whole_out.str().find("cache iter="), std::string::npos) << what;
      EXPECT_TRUE(want.cache.empty()) << what;
      EXPECT_EQ(got.cache.size(), want.rates.size()) << what;
    }
  }
}

TEST(HostCacheSession, CacheFiguresGoToMetricsCsv) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  ember::testing::ScratchDir run;
  std::ostringstream out;
  {
    Session s(tiny_config(json, *data, 128, 20,
                          std::vector<std::string>{"solver.display=10"} + host_storage(0.1)),
              options(1, out, run.path()));
    const TrainResult r = s.train();
    // The same figures in the result, one per display window.
    ASSERT_EQ(r.cache.size(), 2u);
    EXPECT_EQ(r.cache[1].iteration, 20);
    EXPECT_GT(r.cache[0].fetched_per_step + r.cache[0].new_per_step, 0.0);
    EXPECT_EQ(r.cache[1].prefetched, 1.0);
  }
  std::ifstream csv(run / "metrics.csv");
  std::string line;
  int hit_rates = 0;
  while (std::getline(csv, line)) {
    if (line.find(",train,cache_hit_rate,") == std::string::npos) continue;
    ++hit_rates;
    const double rate = std::stod(line.substr(line.rfind(',') + 1));
    EXPECT_GE(rate, 0.0);
    EXPECT_LE(rate, 1.0);
  }
  EXPECT_EQ(hit_rates, 2);
  for (const char* metric : {"cache_fetched_per_step", "cache_written_back_per_step",
                             "cache_mb_per_step", "cache_prefetched", "cache_exposed_ms_per_step",
                             "cache_host_ms_per_step", "cache_readback_ms_per_step"}) {
    EXPECT_NE(out.str().find("cache iter=20"), std::string::npos);
    std::ifstream again(run / "metrics.csv");
    const std::string all((std::istreambuf_iterator<char>(again)),
                          std::istreambuf_iterator<char>());
    EXPECT_NE(all.find(std::string(",train,") + metric + ","), std::string::npos) << metric;
  }
  // After the first display window every batch was prepared ahead of its step.
  EXPECT_NE(out.str().find("cache iter=20 "), std::string::npos);
  EXPECT_NE(out.str().find(" prefetched=1 "), std::string::npos) << out.str();
}

TEST(HostCacheSession, CheckpointsMoveBetweenLocations) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  const std::vector<std::string> adam = {
      "optimizer={\"type\":\"Adam\",\"update_type\":\"Global\",\"adam_hparam\":"
      "{\"learning_rate\":0.002}}"};
  std::ostringstream out;
  std::vector<double> straight;
  {
    Session s(tiny_config(json, *data, 128, 24, adam), options(2, out));
    straight = losses_of(s.train());
  }
  ember::testing::ScratchDir ckpt;
  for (bool save_on_host : {true, false}) {
    const auto first = save_on_host ? adam + host_storage(0.1) : adam;
    const auto second = save_on_host ? adam : adam + host_storage(0.1);
    {
      Session s(tiny_config(json, *data, 128, 12, first), options(2, out));
      (void)s.train();
      s.save(ckpt / "at12");
    }
    Session resumed(tiny_config(json, *data, 128, 24, second), options(1, out));
    resumed.load(ckpt / "at12");
    const auto rest = losses_of(resumed.train());
    ASSERT_EQ(rest.size(), 12u);
    for (std::size_t i = 0; i < rest.size(); ++i) {
      EXPECT_NEAR(rest[i], straight[12 + i], 1e-6 * std::fabs(straight[12 + i]))
          << (save_on_host ? "saved on the host" : "loaded on the host") << ", iteration "
          << 13 + i;
    }
  }
}

}  // namespace
}  // namespace ember::train
