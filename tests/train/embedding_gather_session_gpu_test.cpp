// Solver embedding_gather on a GPU: with 16-bit tables of the activations' dtype (mixed f16 with
// f16 tables, mixed bf16 with bf16 tables) the DLRM configurations' interaction reads the rows
// in place, and trains to bitwise the losses and AUC of the same run pooled (embedding_gather
// false): with the embeddings on their own stream and without, and with a CUDA graph, whose
// replays read the codes the step's lookups write. f32 activations, or tables of another dtype,
// pool (the tensor-core kernels alone read through codes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

RunOutcome train_with(const nlohmann::json& json, const TinyDataset& data,
                      std::vector<std::string> overrides) {
  // The heuristic's cuBLASLt algorithms (no timing), so that both sessions multiply alike.
  overrides.push_back("solver.algorithm_search=false");
  return train_and_evaluate(tiny_config(json, data, 256, 10, overrides), quiet_options("cuda"));
}

TEST(EmbeddingGatherSessionGpu, SixteenBitTablesReadInPlaceTrainBitwiseAsPooled) {
  EMBER_REQUIRE_GPU();
  for (const char* name : {"dlrm", "dlrm_criteo_kaggle"}) {
    const nlohmann::json json = test_sized_config(name);
    const auto data = make_dataset(json, 6000);
    for (const std::vector<std::string>& mode : std::vector<std::vector<std::string>>{
             {"solver.mixed_precision=1024", "solver.embedding_dtype=\"f16\""},
             {"solver.mixed_precision=1024", "solver.embedding_dtype=\"f16\"",
              "solver.cuda_graph=true"},
             {"solver.mixed_precision=1024", "solver.embedding_dtype=\"f16\"",
              "solver.overlap_embedding=false"},
             {"solver.mixed_precision=1024", "solver.mixed_precision_dtype=\"bf16\"",
              "solver.embedding_dtype=\"bf16\"", "solver.cuda_graph=true"}}) {
      const std::string what = std::string(name) + " " + mode[1] + " " + mode.back();
      std::vector<std::string> pooled_mode = mode;
      pooled_mode.push_back("solver.embedding_gather=false");
      const RunOutcome pooled = train_with(json, *data, pooled_mode);
      const RunOutcome gathered = train_with(json, *data, mode);
      EXPECT_TRUE(pooled.gathered.empty()) << what;
      EXPECT_EQ(gathered.gathered, std::vector<std::string>{"sparse_embedding1"}) << what;
      ASSERT_EQ(gathered.losses.size(), pooled.losses.size()) << what;
      for (std::size_t i = 0; i < pooled.losses.size(); ++i)
        EXPECT_EQ(gathered.losses[i], pooled.losses[i]) << what << " iteration " << i + 1;
      EXPECT_EQ(gathered.auc, pooled.auc) << what;
    }
  }
}

TEST(EmbeddingGatherSessionGpu, OtherDtypesPool) {
  EMBER_REQUIRE_GPU();
  const nlohmann::json json = test_sized_config("dlrm");
  const auto data = make_dataset(json, 3000);
  for (const std::vector<std::string>& mode : std::vector<std::vector<std::string>>{
           {},                                                                     // f32, f32
           {"solver.mixed_precision=1024"},                                        // f16, f32
           {"solver.mixed_precision=1024", "solver.embedding_dtype=\"bf16\""}}) {  // f16, bf16
    EXPECT_TRUE(train_with(json, *data, mode).gathered.empty())
        << (mode.empty() ? "fp32" : mode.back());
  }
}

}  // namespace
}  // namespace ember::train
