// Training sessions with HybridSparseEmbedding (CPU ranks) against the same model with
// LocalizedSlotSparseEmbeddingOneHot: the same losses and evaluation bit for bit on one rank, the
// same within float rounding on 2 and 3 ranks; the statistics pass that picks the frequent
// categories; checkpoints that load as either type.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <tuple>

#include "ember/train/session.hpp"
#include "tensor/gemm_row_count.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

std::vector<std::string> hybrid(std::vector<std::string> more = {}) {
  std::vector<std::string> o = {
      "layers.sparse_embedding1.type=HybridSparseEmbedding",
      // One process: IB_NVLink (HugeCTR's default) makes nothing frequent; this one does.
      "layers.sparse_embedding1.sparse_embedding_hparam.communication_type=NVLink_SingleNode"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

std::vector<std::string> onehot(std::vector<std::string> more = {}) {
  more.insert(more.begin(), "layers.sparse_embedding1.type=LocalizedSlotSparseEmbeddingOneHot");
  return more;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kEval = {"solver.eval_interval=40", "solver.max_eval_batches=4"};

struct Variant {
  const char* name;
  std::vector<std::string> overrides;
};

const std::vector<Variant> kOptimizers = {
    {"Adam Local", {}},
    {"SGD Global",
     {"optimizer={\"type\":\"SGD\",\"update_type\":\"Global\",\"sgd_hparam\":{\"learning_rate\":"
      "0.05}}"}},
    {"MomentumSGD LazyGlobal",
     {"optimizer={\"type\":\"MomentumSGD\",\"update_type\":\"LazyGlobal\","
      "\"momentum_sgd_hparam\":{\"learning_rate\":0.05,\"momentum_factor\":0.9}}"}},
    {"AdaGrad Local",
     {"optimizer={\"type\":\"AdaGrad\",\"update_type\":\"Local\",\"adagrad_hparam\":{"
      "\"learning_rate\":0.05}}"}},
};

std::size_t frequent_count(const Session& s) {
  return s.config().embeddings.at(0).hybrid.frequent_keys.size();
}

TEST(HybridSession, OneRankTrainsAsOneHotBitForBit) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 12000);
  for (const Variant& v : kOptimizers) {
    Session want(tiny_config(json, *data, 128, 80, kEval + onehot(v.overrides)), quiet_options());
    Session got(tiny_config(json, *data, 128, 80, kEval + hybrid(v.overrides)), quiet_options());
    // The statistics pass found frequent categories, fewer than the vocabulary.
    EXPECT_GT(frequent_count(got), 0u) << v.name;
    EXPECT_LT(frequent_count(got), 26u * 2000u) << v.name;
    const TrainResult a = want.train(), b = got.train();
    ASSERT_EQ(losses_of(b).size(), 80u) << v.name;
    EXPECT_EQ(losses_of(b), losses_of(a)) << v.name;
    ASSERT_TRUE(a.last_eval && b.last_eval) << v.name;
    EXPECT_EQ(b.last_eval->auc, a.last_eval->auc) << v.name;
    EXPECT_EQ(b.last_eval->average_loss, a.last_eval->average_loss) << v.name;
  }
}

TEST(HybridSession, SeveralCpuRanksTrainAsOneHotWithinRounding) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 12000);
  for (int ranks : {2, 3}) {
    for (const Variant& v : {kOptimizers[0], kOptimizers[2]}) {
      Session want(tiny_config(json, *data, 120, 60, kEval + onehot(v.overrides)),
                   quiet_options("cpu", ranks));
      Session got(tiny_config(json, *data, 120, 60, kEval + hybrid(v.overrides)),
                  quiet_options("cpu", ranks));
      EXPECT_GT(frequent_count(got), 0u);
      const TrainResult a = want.train(), b = got.train();
      const auto la = losses_of(a), lb = losses_of(b);
      ASSERT_EQ(lb.size(), la.size());
      const std::string what = std::string(v.name) + ", " + std::to_string(ranks) + " ranks";
      for (std::size_t i = 0; i < la.size(); ++i)
        EXPECT_NEAR(lb[i], la[i], 1e-4 * std::abs(la[i])) << what << ", iteration " << i + 1;
      ASSERT_TRUE(a.last_eval && b.last_eval);
      EXPECT_NEAR(b.last_eval->auc, a.last_eval->auc, 1e-4) << what;
    }
  }
}

// frequent_rule "traffic" replicates only rows looked up often enough to save exchange bytes:
// fewer than HugeCTR's NVLink_SingleNode rule picks here, none on one rank, and the model is the
// one-hot layer's either way.
TEST(HybridSession, TrafficRuleReplicatesFewerRowsAndTrainsTheSameModel) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 12000);
  // A cap neither rule reaches (HugeCTR's default, 1 x the batch, would hold both at 120).
  const std::vector<std::string> uncapped = {
      "layers.sparse_embedding1.sparse_embedding_hparam.max_num_frequent_categories=100"};
  const std::vector<std::string> traffic =
      uncapped + std::vector<std::string>{
                     "layers.sparse_embedding1.sparse_embedding_hparam.frequent_rule=traffic"};
  Session one(tiny_config(json, *data, 120, 30, kEval + hybrid(traffic)), quiet_options());
  EXPECT_EQ(frequent_count(one), 0u);
  Session one_want(tiny_config(json, *data, 120, 30, kEval + onehot()), quiet_options());
  const TrainResult a1 = one_want.train(), b1 = one.train();
  EXPECT_EQ(losses_of(b1), losses_of(a1));

  Session want(tiny_config(json, *data, 120, 60, kEval + onehot()), quiet_options("cpu", 2));
  Session hugectr(tiny_config(json, *data, 120, 1, hybrid(uncapped)), quiet_options("cpu", 2));
  Session got(tiny_config(json, *data, 120, 60, kEval + hybrid(traffic)), quiet_options("cpu", 2));
  EXPECT_GT(frequent_count(got), 0u);
  EXPECT_LT(frequent_count(got), frequent_count(hugectr));
  const TrainResult a = want.train(), b = got.train();
  const auto la = losses_of(a), lb = losses_of(b);
  ASSERT_EQ(lb.size(), la.size());
  for (std::size_t i = 0; i < la.size(); ++i)
    EXPECT_NEAR(lb[i], la[i], 1e-4 * std::abs(la[i])) << "iteration " << i + 1;
  ASSERT_TRUE(a.last_eval && b.last_eval);
  EXPECT_NEAR(b.last_eval->auc, a.last_eval->auc, 1e-4);
}

// Every training forward but the first starts from the batch prepared during the step before:
// in train() up to max_iter, in train_step() past it too (max_iter is the caller's to keep).
TEST(HybridSession, EveryStepButTheFirstStartsFromABatchPreparedAhead) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  for (const auto& [name, overrides, ranks] :
       {std::tuple{"one-hot", onehot(), 1}, std::tuple{"hybrid", hybrid(), 2}}) {
    Session whole(tiny_config(json, *data, 120, 6, overrides), quiet_options("cpu", ranks));
    EXPECT_EQ(whole.forwards_prepared_ahead(), 0) << name;
    (void)whole.train();
    EXPECT_EQ(whole.forwards_prepared_ahead(), 5) << name;
    Session steps(tiny_config(json, *data, 120, 4, overrides), quiet_options("cpu", ranks));
    for (int i = 0; i < 9; ++i)
      ASSERT_TRUE(steps.train_step()) << name;
    EXPECT_EQ(steps.forwards_prepared_ahead(), 8) << name;
  }
}

TEST(HybridSession, TheStatisticsPassReadsTheBatchesAsked) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  auto frequent = [&](const std::vector<std::string>& overrides) {
    Session s(tiny_config(json, *data, 128, 1,
                          hybrid({"layers.sparse_embedding1.sparse_embedding_hparam."
                                  "max_num_frequent_categories=100"}) +
                              overrides),
              quiet_options());
    return s.config().embeddings.at(0).hybrid.frequent_keys;
  };
  // No batches counted: nothing frequent (the layer then trains as a one-hot layer).
  EXPECT_TRUE(frequent({"solver.num_iterations_statistics=0"}).empty());
  EXPECT_TRUE(frequent({"layers.sparse_embedding1.sparse_embedding_hparam.num_iterations_"
                        "statistics=0",
                        "solver.num_iterations_statistics=20"})
                  .empty());
  // The layer's key wins over the solver's; other batch counts, other categories.
  const auto two = frequent({"solver.num_iterations_statistics=2"});
  const auto twenty = frequent({"solver.num_iterations_statistics=20"});
  EXPECT_FALSE(two.empty());
  EXPECT_FALSE(twenty.empty());
  EXPECT_NE(two, twenty);
  EXPECT_EQ(frequent({"layers.sparse_embedding1.sparse_embedding_hparam.num_iterations_"
                      "statistics=2",
                      "solver.num_iterations_statistics=20"}),
            two);
  EXPECT_LE(twenty.size(), 100u * 128u);
  // The cap: HugeCTR's default max_num_frequent_categories, 1 x the larger batch (128 here).
  Session capped(tiny_config(json, *data, 128, 1, hybrid()), quiet_options());
  EXPECT_EQ(frequent_count(capped), 128u);
  // HugeCTR's default communication type on one process: nothing frequent.
  Session ib(
      tiny_config(json, *data, 128, 1, {"layers.sparse_embedding1.type=HybridSparseEmbedding"}),
      quiet_options());
  EXPECT_EQ(frequent_count(ib), 0u);
}

TEST(HybridSession, CheckpointsLoadAsEitherType) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  ember::testing::ScratchDir dir;
  for (int ranks : {1, 2}) {
    Session trained(tiny_config(json, *data, 128, 40, hybrid()), quiet_options("cpu", ranks));
    trained.train();
    trained.save(dir / "h");
    const EvalResult want = trained.evaluate();
    Session as_onehot(tiny_config(json, *data, 128, 40, onehot()), quiet_options("cpu", 3 - ranks));
    as_onehot.load(dir / "h");
    // Evaluation reads each row as it is: the same numbers whatever the type and rank count
    // (to rounding where the CPU GEMM's rows depend on how the batch is split: gemm_row_count.hpp).
    const EvalResult got = as_onehot.evaluate();
    ember::testing::expect_same_or_close(got.auc, want.auc, 0, 1e-5,
                                         cat("AUC, ", ranks, " rank(s)"));
    ember::testing::expect_same_or_close(got.average_loss, want.average_loss, 1e-6, 0,
                                         cat("loss, ", ranks, " rank(s)"));
    as_onehot.save(dir / "o");
    Session back(tiny_config(json, *data, 128, 40, hybrid()), quiet_options("cpu", ranks));
    back.load(dir / "o");
    const EvalResult again = back.evaluate();
    EXPECT_EQ(again.auc, want.auc) << ranks;
    EXPECT_EQ(again.average_loss, want.average_loss) << ranks;
  }
}

}  // namespace
}  // namespace ember::train
