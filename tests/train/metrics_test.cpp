#include "ember/train/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_support.hpp"

namespace ember::train {
namespace {

// AUC by counting every (positive, negative) pair: a positive scored above a negative counts 1, a
// tie counts one half.
double pairwise_auc(const std::vector<double>& scores, const std::vector<float>& labels) {
  double wins = 0, pairs = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] < 0.5f) continue;
    for (std::size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] >= 0.5f) continue;
      pairs += 1;
      wins += scores[i] > scores[j] ? 1.0 : (scores[i] == scores[j] ? 0.5 : 0.0);
    }
  }
  return wins / pairs;
}

TEST(EvalAccumulator, AucCountsTiesHalfAndLossIsTheMeanCrossEntropy) {
  auto rng = testing::make_rng();
  for (int trial = 0; trial < 5; ++trial) {
    const std::size_t n = 1 + rng() % 700;
    std::vector<float> logits(n), labels(n);
    for (std::size_t i = 0; i < n; ++i) {
      logits[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4);  // few values: many ties
      labels[i] = (rng() % 3 == 0) ? 1.0f : 0.0f;
    }
    labels[0] = 1.0f;
    labels[n > 1 ? 1 : 0] = n > 1 ? 0.0f : 1.0f;
    EvalAccumulator acc(network::LossLayer::Kind::BinaryCrossEntropy);
    // Added in two pieces, as evaluation batches come.
    const std::size_t half = n / 2;
    acc.add({logits.data(), half}, {labels.data(), half}, static_cast<std::int64_t>(half));
    acc.add({logits.data() + half, n - half}, {labels.data() + half, n - half},
            static_cast<std::int64_t>(n - half));
    const EvalResult r = acc.finish();
    EXPECT_EQ(r.samples, static_cast<std::int64_t>(n));
    if (n > 1) {
      EXPECT_NEAR(r.auc, pairwise_auc(acc.scores(), labels), 1e-12);
    }
    double loss = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
      loss += -(labels[i] * std::log(p) + (1 - labels[i]) * std::log(1 - p));
    }
    EXPECT_NEAR(r.average_loss, loss / static_cast<double>(n), 1e-9);
  }
}

TEST(EvalAccumulator, StableAtLargeLogits) {
  EXPECT_NEAR(binary_cross_entropy(50.0, 1.0), std::exp(-50.0), 1e-25);
  EXPECT_NEAR(binary_cross_entropy(-50.0, 1.0), 50.0, 1e-12);
  EXPECT_NEAR(binary_cross_entropy(-50.0, 0.0), std::exp(-50.0), 1e-25);
  EXPECT_NEAR(binary_cross_entropy(0.0, 1.0), std::log(2.0), 1e-15);
}

TEST(EvalAccumulator, OneClassGivesNan) {
  EvalAccumulator acc(network::LossLayer::Kind::BinaryCrossEntropy);
  const std::vector<float> logits{1, 2, 3}, labels{1, 1, 1};
  acc.add(logits, labels, 3);
  EXPECT_TRUE(std::isnan(acc.finish().auc));
}

TEST(EvalAccumulator, NanScoresGiveANanAucAndAreCountedWithoutHanging) {
  auto rng = testing::make_rng();
  for (std::size_t n : {1u, 7u, 1023u, 65537u}) {
    std::vector<float> logits(n), labels(n);
    for (std::size_t i = 0; i < n; ++i) {
      logits[i] = static_cast<float>(static_cast<int>(rng() % 5) - 2);
      labels[i] = static_cast<float>(i % 2);
    }
    std::size_t nans = 0;
    for (std::size_t i = 0; i < n; i += 1 + rng() % 3) {
      logits[i] = std::numeric_limits<float>::quiet_NaN();
      ++nans;
    }
    EvalAccumulator acc(network::LossLayer::Kind::BinaryCrossEntropy, {}, 0.5);
    acc.add(logits, labels, static_cast<std::int64_t>(n));
    const EvalResult r = acc.finish();
    EXPECT_TRUE(std::isnan(r.auc)) << n;
    EXPECT_EQ(r.nan_scores, static_cast<std::int64_t>(nans)) << n;
    EXPECT_TRUE(std::isnan(r.average_loss)) << n;
  }
}

TEST(EvalAccumulator, InfiniteLogitsAreRankedLikeAnyOther) {
  const float inf = std::numeric_limits<float>::infinity();
  EvalAccumulator acc(network::LossLayer::Kind::BinaryCrossEntropy);
  const std::vector<float> logits{-inf, -1, 0, 1, inf}, labels{0, 0, 1, 0, 1};
  acc.add(logits, labels, 5);
  const EvalResult r = acc.finish();
  EXPECT_EQ(r.nan_scores, 0);
  EXPECT_NEAR(r.auc, pairwise_auc(acc.scores(), labels), 1e-12);
}

TEST(EvalAccumulator, HitRateIsThePrecisionAboveTheThreshold) {
  auto rng = testing::make_rng();
  for (double threshold : {0.8, 0.5, 0.0}) {
    const std::size_t n = 1 + rng() % 2000;
    std::vector<float> logits(n), labels(n);
    for (std::size_t i = 0; i < n; ++i) {
      logits[i] = static_cast<float>(static_cast<double>(rng() % 2001) / 250.0 - 4.0);
      labels[i] = rng() % 4 == 0 ? 1.0f : 0.0f;
    }
    EvalAccumulator acc(network::LossLayer::Kind::BinaryCrossEntropy, {}, threshold);
    acc.add(logits, labels, static_cast<std::int64_t>(n));
    const EvalResult r = acc.finish();
    double predicted = 0, hits = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
      if (p > threshold) {
        ++predicted;
        hits += labels[i];
      }
    }
    ASSERT_TRUE(r.hit_rate.has_value());
    if (predicted == 0) {
      EXPECT_TRUE(std::isnan(*r.hit_rate));
    } else {
      EXPECT_NEAR(*r.hit_rate, hits / predicted, 1e-12) << threshold;
    }
  }
  EvalAccumulator none(network::LossLayer::Kind::BinaryCrossEntropy);
  none.add(std::vector<float>{1}, std::vector<float>{1}, 1);
  EXPECT_FALSE(none.finish().hit_rate.has_value());
}

}  // namespace
}  // namespace ember::train
