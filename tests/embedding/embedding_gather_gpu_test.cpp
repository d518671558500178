// SparseEmbedding::forward_gather on a GPU rank: runs whose training forwards hand out codes
// (tensor/row_gather.hpp) give, bit for bit, the vectors, model and row counts of the same runs
// pooled by forward_into on the GPU, for f32, f16 and bf16 tables (each read as stored: the
// output has the table's dtype), every table type, both combiners, and bags of 0 to 3 keys in
// one batch (the kernel's codes and its pooled rows, one warp per 32 bags); 1100 samples make
// 5500 bags, past one block's warps.
#include <gtest/gtest.h>

#include "embedding_reference_support.hpp"
#include "ember/core/device.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;

TEST(EmbeddingGatherOnCuda, GivesThePooledRunBitForBit) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (DType table : {DType::F32, DType::F16, DType::BF16}) {
    for (EmbeddingType type : {EmbeddingType::LocalizedSlotOneHot, EmbeddingType::LocalizedSlotHash,
                               EmbeddingType::DistributedSlotHash}) {
      for (Combiner combiner : {Combiner::Sum, Combiner::Mean}) {
        Problem p;
        p.config = testing::small_config(type, combiner, DType::U32, 16, rng());
        p.config.value_dtype = table;
        p.optimizer =
            testing::test_optimizer(optim::OptimizerType::AdaGrad, optim::UpdateType::Local);
        p.out_dtype = table;
        p.grad_dtype = table;
        for (int t = 0; t < 3; ++t) {
          p.batches.push_back(testing::random_batch(1100, testing::kSmallSlotSizes, 3, rng));
          p.grads.push_back(testing::random_grad(1100 * p.config.slot_num * 16, rng));
          p.training.push_back(true);
        }
        const auto pooled = testing::run_ranks(p, 1, true);
        p.gather = true;
        const auto gathered = testing::run_ranks(p, 1, true);
        testing::expect_identical_runs(
            gathered, pooled,
            cat(dtype_name(table), " ", embedding_type_name(type), " ", combiner_name(combiner)));
      }
    }
  }
}

}  // namespace
}  // namespace ember::embedding
