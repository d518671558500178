// The solver keys of issue 12 (nan_policy, keep_snapshots, enable_overlap, HitRate), Ember's
// overlap_embedding, and --set's deletion, read as a user writes them and refused with the
// reader's message when wrong.
#include <gtest/gtest.h>

#include "ember/core/error.hpp"
#include "ember/train/model_config.hpp"
#include "support/test_support.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using nlohmann::json;

json dlrm_with(const std::vector<std::string>& overrides) {
  json c = testing_support::sample_config("dlrm");
  for (const std::string& o : overrides)
    apply_override(c, o);
  return c;
}

TEST(SolverKeys, AreReadWithTheirDefaults) {
  const ModelConfig plain = parse_model_config(dlrm_with({}), "test");
  EXPECT_EQ(plain.solver.nan_policy, NanPolicy::Stop);
  EXPECT_EQ(plain.solver.keep_snapshots, 0);
  EXPECT_FALSE(plain.solver.enable_overlap);
  EXPECT_TRUE(plain.solver.overlap_embedding);
  EXPECT_TRUE(plain.solver.embedding_gather);
  EXPECT_FALSE(plain.solver.hit_rate_threshold().has_value());
  const ModelConfig c = parse_model_config(
      dlrm_with({"solver.nan_policy=skip", "solver.keep_snapshots=3", "solver.enable_overlap=true",
                 "solver.overlap_embedding=false", "solver.embedding_gather=false",
                 R"(solver.eval_metrics=["AUC:0.9","HitRate"])"}),
      "test");
  EXPECT_EQ(c.solver.nan_policy, NanPolicy::Skip);
  EXPECT_EQ(c.solver.keep_snapshots, 3);
  EXPECT_TRUE(c.solver.enable_overlap);
  EXPECT_FALSE(c.solver.overlap_embedding);
  EXPECT_FALSE(c.solver.embedding_gather);
  EXPECT_EQ(c.solver.hit_rate_threshold(), 0.8);  // HugeCTR's threshold
  EXPECT_EQ(c.solver.auc_target(), 0.9);
  const ModelConfig t =
      parse_model_config(dlrm_with({R"(solver.eval_metrics=["HitRate:0.5"])"}), "test");
  EXPECT_EQ(t.solver.hit_rate_threshold(), 0.5);
  EXPECT_FALSE(t.solver.wants(EvalMetric::Kind::AUC));
}

TEST(SolverKeys, BadValuesAreRefusedNamingTheKey) {
  struct Case {
    std::string set, message;
  };
  for (const Case& c : std::vector<Case>{
           {"solver.nan_policy=ignore", R"(solver: "nan_policy" must be "stop" or "skip")"},
           {"solver.keep_snapshots=-1", R"(solver: "keep_snapshots" must be an integer >= 0)"},
           {"solver.enable_overlap=\"yes\"", R"("enable_overlap")"},
           {"solver.overlap_embedding=\"on\"", R"("overlap_embedding")"},
           {"solver.embedding_gather=\"yes\"", R"("embedding_gather")"},
           {R"(solver.eval_metrics=["HitRate:1.5"])", "threshold in [0, 1)"},
           {R"(solver.eval_metrics=["AverageLoss:0.5"])", "AverageLoss without a number"},
           {R"(solver.eval_metrics=["Recall"])", "HitRate"}}) {
    EMBER_EXPECT_THROW_WITH(parse_model_config(dlrm_with({c.set}), "test"), ConfigError, c.message);
  }
}

TEST(SolverKeys, SetNullDeletesAKeyOrAListEntry) {
  json c = testing_support::sample_config("dlrm");
  ASSERT_TRUE(c["solver"].contains("eval_metrics"));
  apply_override(c, "solver.eval_metrics=null");
  EXPECT_FALSE(c["solver"].contains("eval_metrics"));
  const std::size_t layers = c["layers"].size();
  apply_override(c, "layers.fc7.fc_param=null");
  EXPECT_FALSE(c["layers"][layers - 2].contains("fc_param"));
  apply_override(c, "solver.gpu.0=null");
  EXPECT_TRUE(c["solver"]["gpu"].empty());
  EMBER_EXPECT_THROW_WITH(apply_override(c, "solver.no_such_key=null"), ConfigError,
                          "'solver.no_such_key' does not exist");
  // A deleted key falls back to its default.
  const ModelConfig parsed = parse_model_config(dlrm_with({"solver.display=null"}), "test");
  EXPECT_EQ(parsed.solver.display, 200);
}

}  // namespace
}  // namespace ember::train

namespace ember::train {
namespace {

// solver.gpu as HugeCTR writes it for several nodes: one list per process of an MPI job.
TEST(SolverGpuLists, OneListPerProcessOrOneForAll) {
  const auto solver = [](const char* gpu) {
    json c = testing_support::sample_config("dlrm");
    apply_override(c, std::string("solver.gpu=") + gpu);
    return parse_model_config(c, "test").solver;
  };
  const SolverConfig nodes = solver("[[0,1],[2,3],[1]]");
  EXPECT_EQ(nodes.gpu_list(0, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(nodes.gpu_list(1, 3), (std::vector<int>{2, 3}));
  EXPECT_EQ(nodes.gpu_list(2, 3), (std::vector<int>{1}));
  EMBER_EXPECT_THROW_WITH(
      nodes.gpu_list(0, 2), ConfigError,
      "solver.gpu has 3 list(s), one per node, but the MPI job has 2 processes");
  EMBER_EXPECT_THROW_WITH(nodes.gpu_list(0, 1), ConfigError,
                          "this is one process (not started by mpirun)");
  const SolverConfig flat = solver("[0,1]");
  EXPECT_EQ(flat.gpu_list(0, 1), (std::vector<int>{0, 1}));
  EXPECT_EQ(flat.gpu_list(2, 4), (std::vector<int>{0, 1}));
  const SolverConfig one_node = solver("[[3]]");
  EXPECT_EQ(one_node.gpu_list(0, 1), (std::vector<int>{3}));
  EMBER_EXPECT_THROW_WITH(one_node.gpu_list(1, 2), ConfigError, "has 1 list(s)");
  EXPECT_EQ(solver("null").gpu_list(1, 2), (std::vector<int>{0}));
}

}  // namespace
}  // namespace ember::train
