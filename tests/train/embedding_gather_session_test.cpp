// Solver embedding_gather (on by default): where an Interaction layer reads a one-rank
// embedding with rows of its own dtype, it reads them in place, through each bag's code, instead
// of a pooled copy. On the CPU every configuration trains to bitwise the losses and AUC it gives
// with embedding_gather false; the DLRM configurations (an Interaction over an embedding) read
// in place, but not the hybrid one, nor the others; two CPU ranks (whose rows travel between
// ranks) pool.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

RunOutcome train_with(const nlohmann::json& json, const TinyDataset& data,
                      const std::vector<std::string>& overrides, int ranks) {
  return train_and_evaluate(tiny_config(json, data, 120, 8, overrides),
                            quiet_options("cpu", ranks));
}

// An Interaction layer, and an embedding whose rows stay on their rank (not the hybrid layer).
bool reads_in_place(const nlohmann::json& json) {
  bool interaction = false, hybrid = false;
  for (const auto& layer : json["layers"]) {
    interaction = interaction || layer.value("type", "") == "Interaction";
    hybrid = hybrid || layer.value("type", "") == "HybridSparseEmbedding";
  }
  return interaction && !hybrid;
}

TEST(EmbeddingGatherSession, EveryConfigTrainsBitwiseAsWhenPooled) {
  for (const std::string& name : all_config_names()) {
    const nlohmann::json json = test_sized_config(name);
    const auto data = make_dataset(json, 1500);
    const RunOutcome pooled = train_with(json, *data, {"solver.embedding_gather=false"}, 1);
    const RunOutcome gathered = train_with(json, *data, {}, 1);
    EXPECT_TRUE(pooled.gathered.empty()) << name;
    EXPECT_EQ(!gathered.gathered.empty(), reads_in_place(json)) << name;
    ASSERT_EQ(gathered.losses.size(), pooled.losses.size()) << name;
    for (std::size_t i = 0; i < pooled.losses.size(); ++i)
      EXPECT_EQ(gathered.losses[i], pooled.losses[i]) << name << " iteration " << i + 1;
    EXPECT_EQ(gathered.auc, pooled.auc) << name;
  }
}

TEST(EmbeddingGatherSession, SeveralRanksPool) {
  const nlohmann::json json = test_sized_config("dlrm");
  const auto data = make_dataset(json, 1500);
  const RunOutcome two = train_with(json, *data, {}, 2);
  EXPECT_TRUE(two.gathered.empty());
  EXPECT_EQ(two.losses.size(), 8u);
}

}  // namespace
}  // namespace ember::train
