// Host tables with a device cache (the "host" storage location) against the whole table at the
// device place, on CPU ranks: every embedding type, optimizer and update type, 1 and 3 ranks,
// cache ratios 1 %, 5 %, 50 % and 100 %, with and without prefetching, every eviction policy;
// the outputs of every step and the final model must be the same bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "host_cache_support.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::cache_config;
using testing::make_cache_problem;
using testing::Problem;
using testing::total;
using testing::with_storage;

optim::OptimizerConfig optimizer(optim::OptimizerType type, optim::UpdateType update) {
  return testing::cache_optimizer(type, update);
}

using testing::Case;
using testing::case_name;

class HostCache : public ::testing::TestWithParam<Case> {};

TEST_P(HostCache, EveryOptimizerAndRatioTrainsExactlyAsTheWholeTable) {
  const auto [type, D] = GetParam();
  auto rng = ember::testing::make_rng(100 + D);
  for (optim::OptimizerType ot : {optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD,
                                  optim::OptimizerType::Nesterov, optim::OptimizerType::Adam,
                                  optim::OptimizerType::AdaGrad}) {
    for (optim::UpdateType ut :
         {optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
      const Combiner combiner = rng() % 2 == 0 ? Combiner::Sum : Combiner::Mean;
      Problem p =
          make_cache_problem(cache_config(type, combiner, rng()), optimizer(ot, ut), 36, rng);
      p.loss_scaler = 2.0f;
      const auto whole = testing::run_ranks(p, D);
      for (double ratio : {0.01, 0.05, 0.5, 1.0}) {
        const std::string what = std::string(optim::optimizer_name(ot)) + "/" +
                                 optim::update_type_name(ut) + ", cache ratio " +
                                 std::to_string(ratio);
        const auto cached = testing::run_ranks(with_storage(p, ratio, true), D);
        testing::expect_identical_runs(cached, whole, what);
        EXPECT_GT(total(cached, &CacheStats::lookups), 0) << what;
        // The smallest cache must evict (else the test proves little); the whole one never does.
        if (ratio == 0.01) {
          EXPECT_GT(total(cached, &CacheStats::written_back), 0) << what;
        }
        if (ratio == 1.0) {
          EXPECT_EQ(total(cached, &CacheStats::written_back), 0) << what;
        }
        EXPECT_EQ(total(cached, &CacheStats::hits) + total(cached, &CacheStats::fetched),
                  total(cached, &CacheStats::lookups))
            << what;
        if (ratio == 0.05) {
          testing::expect_identical_runs(testing::run_ranks(with_storage(p, ratio, false), D),
                                         whole, what + ", no prefetch");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HostCache,
                         ::testing::Values(Case{EmbeddingType::DistributedSlotHash, 1},
                                           Case{EmbeddingType::DistributedSlotHash, 3},
                                           Case{EmbeddingType::LocalizedSlotHash, 1},
                                           Case{EmbeddingType::LocalizedSlotHash, 3},
                                           Case{EmbeddingType::LocalizedSlotOneHot, 1},
                                           Case{EmbeddingType::LocalizedSlotOneHot, 3}),
                         case_name);

TEST(HostCache, EveryEvictionPolicyIsExact) {
  auto rng = ember::testing::make_rng();
  for (EvictionPolicy policy :
       {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    Problem p = make_cache_problem(
        cache_config(EmbeddingType::DistributedSlotHash, Combiner::Sum, rng()),
        optimizer(optim::OptimizerType::Adam, optim::UpdateType::Global), 30, rng);
    const auto whole = testing::run_ranks(p, 2);
    testing::expect_identical_runs(testing::run_ranks(with_storage(p, 0.01, true, policy), 2),
                                   whole, eviction_policy_name(policy));
  }
}

// The distinct keys of a batch (one-hot, one rank: a key is its row).
std::set<std::int64_t> distinct_keys(const testing::HostBatch& b) {
  return {b.keys.begin(), b.keys.end()};
}

// A cache that holds the largest batch but not a batch and the next one together: the batch
// prepared ahead (prefetch) must not need room the running batch holds. Training stays exact.
TEST(HostCache, ACacheForOneBatchTrainsWithPrefetchWhenTwoDoNotFit) {
  auto rng = ember::testing::make_rng();
  for (optim::UpdateType ut : {optim::UpdateType::Local, optim::UpdateType::Global}) {
    Problem p =
        make_cache_problem(cache_config(EmbeddingType::LocalizedSlotOneHot, Combiner::Sum, rng()),
                           optimizer(optim::OptimizerType::Adam, ut), 24, rng, 64);
    std::size_t one = 0, two = 0;
    for (std::size_t t = 0; t < p.batches.size(); ++t) {
      const std::set<std::int64_t> here = distinct_keys(p.batches[t]);
      one = std::max(one, here.size());
      if (t + 1 < p.batches.size()) {
        std::set<std::int64_t> both = distinct_keys(p.batches[t + 1]);
        both.insert(here.begin(), here.end());
        two = std::max(two, both.size());
      }
    }
    ASSERT_GT(two, one + 8) << "the batches must not fit two at a time";
    const auto whole = testing::run_ranks(p, 1);
    Problem cached = with_storage(p, 0.5, true);
    cached.config.storage.cache_ratio = 0;
    cached.config.storage.cache_rows = static_cast<std::int64_t>(one);
    const std::string what = std::string(optim::update_type_name(ut)) + ", cache of " +
                             std::to_string(one) + " rows, two batches need up to " +
                             std::to_string(two);
    const auto run = testing::run_ranks(cached, 1);
    testing::expect_identical_runs(run, whole, what);
    EXPECT_GT(total(run, &CacheStats::written_back), 0) << what;
  }
}

}  // namespace
}  // namespace ember::embedding
