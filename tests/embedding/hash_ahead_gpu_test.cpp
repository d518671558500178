// Device hash tables preparing training batches ahead on a GPU: each batch's keys are inserted on
// the layer's own stream while the step before still runs (its update, long writes queued on the
// compute stream), yet the run is the one that inserts them in each forward, bit for bit (the
// same rows in the same order, the same initial values, the same updates), on one GPU and on
// every GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedding_reference_support.hpp"
#include "ember/core/device.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

const std::vector<std::int64_t> kSizes = {70, 2000, 3, 5000, 110};

// `steps` batches of `batch` samples with up to 3 keys a bag: many keys are new in each batch.
// Step 3 evaluates.
testing::Problem hash_problem(EmbeddingType type, optim::UpdateType update, std::int64_t batch,
                              std::mt19937_64& rng) {
  testing::Problem p;
  p.config = testing::small_config(type, Combiner::Sum, DType::I64, 9, rng(), kSizes, 8000);
  p.optimizer = testing::test_optimizer(optim::OptimizerType::Adam, update);
  for (int t = 0; t < 6; ++t) {
    p.batches.push_back(testing::random_batch(batch, kSizes, 3, rng));
    p.grads.push_back(testing::random_grad(batch * p.config.slot_num * p.config.vec_size, rng));
    p.training.push_back(t != 3);
  }
  return p;
}

TEST(HashAheadGpu, BatchesPreparedAheadTrainBitForBitAsInTheirForward) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  auto rng = ember::testing::make_rng();
  std::vector<int> device_counts = {1};
  if (cuda_device_count() > 1) device_counts.push_back(cuda_device_count());
  for (int D : device_counts) {
    for (EmbeddingType type :
         {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash}) {
      for (optim::UpdateType update : {optim::UpdateType::Local, optim::UpdateType::LazyGlobal}) {
        const testing::Problem base = hash_problem(type, update, 1023 * D, rng);
        testing::Problem ahead = base;
        ahead.prefetch = true;
        ahead.busy_compute = true;
        const std::string what = std::string(embedding_type_name(type)) + " " +
                                 optim::update_type_name(update) + " on " + std::to_string(D) +
                                 " GPU(s)";
        const testing::RunResult got = testing::run_ranks(ahead, D, true);
        testing::expect_identical_runs(got, testing::run_ranks(base, D, true), what);
        testing::expect_same_run(got, testing::run_ranks(base, D, false), 1e-4,
                                 what + " against CPU ranks");
        // Steps 1, 2 and 5 (step 4 comes after the evaluation, and is prepared in its forward).
        EXPECT_EQ(got.forwards_prepared_ahead, std::vector<std::int64_t>(D, 3)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace ember::embedding
