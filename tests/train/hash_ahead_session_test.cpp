// Training with hash-table embeddings (the DLRM demo's LocalizedSlotSparseEmbeddingHash,
// DeepFM's DistributedSlotSparseEmbeddingHash): each batch is prepared during the step before,
// its new keys inserted then, unless an evaluation or a snapshot comes between the two steps; a
// run with them trains and evaluates bit for bit as one without.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/train/session.hpp"
#include "support/test_support.hpp"
#include "training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

TEST(HashAheadSession, StepsStartFromBatchesPreparedAheadExceptAfterEvaluationsAndSnapshots) {
  ember::testing::ScratchDir dir;
  for (const auto& [name, ranks] : {std::pair{"dlrm", 1}, std::pair{"deepfm", 2}}) {
    const auto json = sample_config(name);
    auto data = make_dataset(json, 4000);
    const std::string what = std::string(name) + " on " + std::to_string(ranks) + " CPU rank(s)";
    Session plain(tiny_config(json, *data, 120, 7), quiet_options("cpu", ranks));
    const TrainResult a = plain.train();
    EXPECT_EQ(plain.forwards_prepared_ahead(), 6) << what;  // the first rank's
    // Evaluations after steps 2, 4 and 6, snapshots after 3 and 6: steps 2 and 6 start from a
    // batch prepared ahead.
    const std::string prefix = (dir.path() / (std::string(name) + "_")).string();
    Session periodic(tiny_config(json, *data, 120, 7,
                                 {"solver.eval_interval=2", "solver.snapshot=3",
                                  "solver.snapshot_prefix=" + prefix}),
                     quiet_options("cpu", ranks));
    const TrainResult b = periodic.train();
    EXPECT_EQ(periodic.forwards_prepared_ahead(), 2) << what;
    EXPECT_EQ(losses_of(b), losses_of(a)) << what;
    ASSERT_TRUE(a.last_eval && b.last_eval) << what;
    EXPECT_EQ(b.last_eval->auc, a.last_eval->auc) << what;
    EXPECT_EQ(b.last_eval->average_loss, a.last_eval->average_loss) << what;
    // Step by step the caller may evaluate or save between two calls: nothing inserted ahead.
    Session steps(tiny_config(json, *data, 120, 7), quiet_options("cpu", ranks));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(steps.train_step()) << what;
      (void)steps.evaluate();
    }
    EXPECT_EQ(steps.forwards_prepared_ahead(), 0) << what;
  }
}

}  // namespace
}  // namespace ember::train
