// Session's in-memory side (what the Python module calls): train_step() and current_loss() give
// train()'s losses step by step, predict_samples() scores arrays the same on any rank count and
// in batches of any size, the weights read and written as arrays, and wrong arrays are refused.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

// `rows` samples for the configuration's Data layer: random dense features and one key per slot.
struct Samples {
  std::vector<float> dense;
  std::vector<std::vector<std::int64_t>> offsets, keys;

  // The first `rows` samples (all the dense values when `rows` is more, for the size checks).
  SampleArrays arrays(std::int64_t rows) const {
    SampleArrays a;
    a.rows = rows;
    const auto width = dense.size() / (offsets.empty() ? 1 : samples());
    a.dense = std::span<const float>(dense).first(std::min(dense.size(), rows * width));
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto bags = std::min(offsets[i].size() - 1, (offsets[i].size() - 1) / samples() *
                                                            static_cast<std::size_t>(rows));
      a.sparse.push_back({std::span<const std::int64_t>(offsets[i]).first(bags + 1),
                          std::span<const std::int64_t>(keys[i]).first(
                              static_cast<std::size_t>(offsets[i][bags]))});
    }
    return a;
  }
  std::size_t samples() const { return sample_count; }
  std::size_t sample_count = 0;
};

Samples random_samples(const ModelConfig& c, std::int64_t rows, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<std::int64_t> key(0, 1999);
  Samples s;
  s.sample_count = static_cast<std::size_t>(rows);
  s.dense.resize(static_cast<std::size_t>(rows * c.data.dense_dim));
  for (float& v : s.dense)
    v = normal(rng);
  for (const auto& input : c.data.sparse) {
    std::vector<std::int64_t> offsets{0}, keys;
    for (std::int64_t b = 0; b < rows * input.slot_num; ++b) {
      keys.push_back(key(rng));
      offsets.push_back(static_cast<std::int64_t>(keys.size()));
    }
    s.offsets.push_back(std::move(offsets));
    s.keys.push_back(std::move(keys));
  }
  return s;
}

TEST(SessionInMemory, TrainStepGivesTrainsLossesStepByStep) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 3000);
  for (int ranks : {1, 2}) {
    Session whole(tiny_config(json, *data, 256, 9), quiet_options("", ranks));
    const TrainResult expected = whole.train();
    ASSERT_EQ(expected.losses.size(), 9u);
    Session steps(tiny_config(json, *data, 256, 9), quiet_options("", ranks));
    EXPECT_FALSE(steps.current_loss().has_value());
    for (const auto& [iteration, loss] : expected.losses) {
      ASSERT_TRUE(steps.train_step());
      EXPECT_EQ(steps.iteration(), iteration);
      EXPECT_EQ(steps.current_loss().value(), loss) << "ranks " << ranks << " iter " << iteration;
    }
  }
}

TEST(SessionInMemory, StepsThenTrainContinueOneRun) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 3000);
  Session whole(tiny_config(json, *data, 256, 8), quiet_options("", 1));
  const TrainResult expected = whole.train();
  Session parts(tiny_config(json, *data, 256, 8), quiet_options("", 1));
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(parts.train_step());
  const TrainResult rest = parts.train();
  ASSERT_EQ(rest.losses.size(), 5u);
  EXPECT_EQ(rest.losses.back(), expected.losses.back());
}

TEST(SessionInMemory, PredictSamplesAgreeAcrossRanksAndBatchSizes) {
  // DistributedSlot: a key has one row whichever slot it comes in, as with one rank (a
  // LocalizedSlot rank holds only its slots' keys, and random keys cross slots).
  auto json = sample_config("dlrm");
  json["layers"][1]["type"] = "DistributedSlotSparseEmbeddingHash";
  json["layers"][1]["sparse_embedding_hparam"]["workspace_size_per_gpu_in_mb"] = 4;
  auto data = make_dataset(json, 3000);
  const ModelConfig config = tiny_config(json, *data, 64, 4);
  Session one(config, quiet_options("", 1)), two(config, quiet_options("", 2));
  (void)one.train();
  ember::testing::ScratchDir dir;
  one.save(dir / "m");
  two.load(dir / "m");  // the same model, its embeddings sharded over two ranks
  const Samples samples = random_samples(config, 131, 5);  // two full batches of 64 and 3
  const std::vector<double> all = one.predict_samples(samples.arrays(131));
  ASSERT_EQ(all.size(), 131u);
  for (double p : all) {
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
  }
  const std::vector<double> first = one.predict_samples(samples.arrays(1));
  EXPECT_NEAR(first[0], all[0], 1e-12);
  EXPECT_TRUE(one.predict_samples(samples.arrays(0)).empty());
  const std::vector<double> by_two = two.predict_samples(samples.arrays(131));
  ASSERT_EQ(by_two.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i)
    EXPECT_NEAR(by_two[i], all[i], 1e-6) << "sample " << i;
}

TEST(SessionInMemory, WrongArraysAreRefusedNamingTheNumbers) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 1000);
  const ModelConfig config = tiny_config(json, *data, 64, 1);
  Session s(config, quiet_options("", 1));
  Samples samples = random_samples(config, 4, 1);
  EMBER_EXPECT_THROW_WITH(s.predict_samples(samples.arrays(5)), ConfigError,
                          "5 samples of 13 dense features need 65 dense values, got 52");
  SampleArrays no_keys = samples.arrays(4);
  no_keys.sparse.clear();
  EMBER_EXPECT_THROW_WITH(s.predict_samples(no_keys), ConfigError, "got keys for 0");
  samples.keys[0][2] = -5;
  EMBER_EXPECT_THROW_WITH(s.predict_samples(samples.arrays(4)), DataError,
                          "key -5 (entry 2) is outside");
}

TEST(SessionInMemory, DenseWeightsRoundTripAndAreChecked) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 1000);
  Session s(tiny_config(json, *data, 64, 1), quiet_options("", 2));
  std::vector<DenseWeight> weights = s.dense_weights();
  ASSERT_FALSE(weights.empty());
  for (auto& w : weights)
    for (float& v : w.values)
      v = v * 0.5f + 0.25f;
  s.set_dense_weights(weights);
  const std::vector<DenseWeight> back = s.dense_weights();
  ASSERT_EQ(back.size(), weights.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].name, weights[i].name);
    EXPECT_EQ(back[i].values, weights[i].values) << back[i].name;
  }
  DenseWeight bad = weights.front();
  bad.shape = {bad.shape.back(), bad.shape.front()};
  if (bad.shape != weights.front().shape) {
    EMBER_EXPECT_THROW_WITH(s.set_dense_weights({bad}), ConfigError, "got [");
  }
  bad.name = "nope.weight";
  EMBER_EXPECT_THROW_WITH(s.set_dense_weights({bad}), ConfigError, "no dense tensor 'nope.weight'");
  EMBER_EXPECT_THROW_WITH(s.embedding_snapshot("nope"), ConfigError, "no embedding 'nope'");
}

}  // namespace
}  // namespace ember::train
