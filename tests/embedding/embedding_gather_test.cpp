// SparseEmbedding::forward_gather on a CPU rank: training runs whose forwards hand out codes
// (tensor/row_gather.hpp) instead of pooled vectors give, bit for bit, the vectors, model and
// row counts of the same runs pooled by forward_into, for every table type, both combiners, bags
// of 0 to 3 keys (zeros, the row itself, and pooled rows in one batch) and an optimizer with
// LazyGlobal rows caught up before they are read. Where the rows cannot be read in place (two
// ranks, the hybrid layer) it refuses, saying why.
#include <gtest/gtest.h>

#include <thread>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/distributed/collectives.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;

Problem gather_problem(EmbeddingType type, Combiner combiner, optim::UpdateType update,
                       std::mt19937_64& rng) {
  Problem p;
  p.config = testing::small_config(type, combiner, DType::I64, 6, rng());
  p.optimizer =
      testing::test_optimizer(update == optim::UpdateType::LazyGlobal ? optim::OptimizerType::Adam
                                                                      : optim::OptimizerType::SGD,
                              update);
  for (int t = 0; t < 4; ++t) {
    p.batches.push_back(testing::random_batch(13, testing::kSmallSlotSizes, 3, rng));
    p.grads.push_back(testing::random_grad(13 * p.config.slot_num * p.config.vec_size, rng));
    p.training.push_back(t != 2);  // an evaluation step pools as before
  }
  return p;
}

TEST(EmbeddingGather, GivesThePooledRunBitForBit) {
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : {EmbeddingType::LocalizedSlotOneHot, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::DistributedSlotHash}) {
    for (Combiner combiner : {Combiner::Sum, Combiner::Mean}) {
      for (optim::UpdateType update : {optim::UpdateType::Local, optim::UpdateType::LazyGlobal}) {
        Problem p = gather_problem(type, combiner, update, rng);
        const auto pooled = testing::run_ranks(p, 1);
        p.gather = true;
        const auto gathered = testing::run_ranks(p, 1);
        testing::expect_identical_runs(gathered, pooled,
                                       cat(embedding_type_name(type), " ", combiner_name(combiner),
                                           " ", optim::update_type_name(update)));
      }
    }
  }
}

TEST(EmbeddingGather, RefusesWhereTheRowsCannotBeReadInPlace) {
  auto rng = ember::testing::make_rng();
  const Problem p = gather_problem(EmbeddingType::LocalizedSlotOneHot, Combiner::Sum,
                                   optim::UpdateType::Local, rng);
  auto comms = distributed::make_in_process_communicators(2, 60.0);
  std::vector<std::string> messages(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      SparseEmbedding emb(p.config, p.optimizer, *comms[r]);
      EXPECT_FALSE(emb.gathers());
      const Tensor out = Tensor::empty({13, p.config.slot_num, p.config.vec_size});
      const Tensor codes = Tensor::empty({13 * p.config.slot_num}, DType::I32);
      try {
        emb.forward_gather(CsrTensor(), 0, 13, codes, out);
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const std::string& m : messages)
    EXPECT_NE(m.find("cannot be read in place (2 ranks)"), std::string::npos) << m;

  auto one = distributed::make_in_process_communicators(1, 60.0);
  SparseEmbedding emb(p.config, p.optimizer, *one[0]);
  EXPECT_TRUE(emb.gathers());
  EXPECT_NE(emb.table_data(), nullptr);
  const Tensor out = Tensor::empty({13, p.config.slot_num, p.config.vec_size});
  const Tensor wrong = Tensor::empty({13 * p.config.slot_num - 1}, DType::I32);
  EMBER_EXPECT_THROW_WITH(emb.forward_gather(CsrTensor(), 0, 13, wrong, out), Error,
                          "gather codes must be 65 contiguous i32 values");
}

}  // namespace
}  // namespace ember::embedding
