// On a GPU the embeddings' lookup, backward and update run on a stream of their own beside the
// dense network (solver overlap_embedding, on by default): the same work in another order on the
// device, so every configuration trains to bitwise the losses and AUC of the one-stream step, with
// and without a CUDA graph, on one GPU and on two (there also with HybridSparseEmbedding, whose
// update runs collectives of its own). Consecutive steps of train() start their lookups beside the
// step before's dense all-reduce and optimizer; after an evaluation or a snapshot between two
// steps they wait for it (Replica::train_step's follows_last_step): a mode with both covers that.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

struct Outcome {
  std::vector<double> losses;
  double auc = 0, mid_run_auc = 0;  // mid_run_auc: the last evaluation inside train()
};

Outcome train_with(const nlohmann::json& json, const TinyDataset& data,
                   std::vector<std::string> overrides, const std::vector<int>& gpus) {
  // The heuristic's cuBLASLt algorithms (no timing), so that both sessions multiply alike.
  overrides.push_back("solver.algorithm_search=false");
  SessionOptions o = quiet_options("cuda");
  o.gpus = gpus;
  Session s(tiny_config(json, data, 256, 10, overrides), o);
  Outcome out;
  const TrainResult r = s.train();
  out.losses = losses_of(r);
  if (r.last_eval) out.mid_run_auc = r.last_eval->auc;
  out.auc = s.evaluate().auc;
  return out;
}

void expect_same_training(const std::string& name, const std::vector<int>& gpus,
                          const std::vector<std::string>& model = {}) {
  const nlohmann::json json = test_sized_config(name);
  auto data = make_dataset(json, 6000);
  ember::testing::ScratchDir dir;
  const std::string prefix = (dir.path() / "snap_").string();
  for (std::vector<std::string> mode : std::vector<std::vector<std::string>>{
           {},
           {"solver.mixed_precision=1024"},
           {"solver.mixed_precision=1024", "solver.cuda_graph=true"},
           // Evaluations and snapshots between steps: the lookups after them wait for them.
           {"solver.eval_interval=3", "solver.snapshot=4", "solver.snapshot_prefix=" + prefix,
            "solver.mixed_precision=1024"}}) {
    const std::string what = name + (model.empty() ? "" : " " + model.front()) +
                             (mode.empty() ? " fp32" : " " + mode.back()) + " on " +
                             std::to_string(gpus.size()) + " GPU(s)";
    mode.insert(mode.end(), model.begin(), model.end());
    std::vector<std::string> one_stream = mode;
    one_stream.push_back("solver.overlap_embedding=false");
    const Outcome want = train_with(json, *data, one_stream, gpus);
    const Outcome got = train_with(json, *data, mode, gpus);
    ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
    for (std::size_t i = 0; i < got.losses.size(); ++i)
      EXPECT_EQ(got.losses[i], want.losses[i]) << what << " iteration " << i + 1;
    EXPECT_EQ(got.auc, want.auc) << what;
    EXPECT_EQ(got.mid_run_auc, want.mid_run_auc) << what;
  }
}

TEST(OverlapSessionGpu, EveryConfigTrainsBitwiseAsOnOneStream) {
  EMBER_REQUIRE_GPU();
  for (const std::string& name : all_config_names())
    expect_same_training(name, {0});
}

TEST(OverlapSessionGpu, TwoGpusTrainBitwiseAsOnOneStream) {
  EMBER_REQUIRE_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 or more GPUs";
  for (const char* name : {"dlrm", "deepfm"})
    expect_same_training(name, {0, 1});
  // One process: IB_NVLink (HugeCTR's default) would make nothing frequent.
  expect_same_training("dlrm", {0, 1},
                       {"layers.sparse_embedding1.type=HybridSparseEmbedding",
                        "layers.sparse_embedding1.sparse_embedding_hparam.communication_type="
                        "NVLink_SingleNode"});
}

}  // namespace
}  // namespace ember::train
