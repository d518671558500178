// Device hash tables prepare a training batch ahead too (SparseEmbedding::inserts_ahead): its new
// keys are inserted during the step before, so the run must be the one that inserts them in the
// batch's forward, bit for bit, and nothing else may use the layer in between.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;

constexpr EmbeddingType kHashTypes[] = {EmbeddingType::DistributedSlotHash,
                                        EmbeddingType::LocalizedSlotHash};

// `steps` batches of 12 samples whose keys repeat within and across batches, with new keys in
// every batch; the steps listed in `evaluations` evaluate instead of training.
Problem hash_problem(EmbeddingType type, optim::UpdateType update, int steps,
                     const std::vector<int>& evaluations, std::mt19937_64& rng) {
  Problem p;
  p.config = testing::small_config(type, Combiner::Mean, DType::I64, 5, rng());
  p.optimizer = testing::test_optimizer(optim::OptimizerType::Adam, update);
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(testing::random_batch(12, testing::kSmallSlotSizes, 3, rng));
    p.grads.push_back(testing::random_grad(12 * p.config.slot_num * p.config.vec_size, rng));
    bool evaluates = false;
    for (int e : evaluations)
      evaluates = evaluates || e == t;
    p.training.push_back(!evaluates);
  }
  return p;
}

// Steps 0-6 with an evaluation at step 3: the batches of steps 1, 2, 5 and 6 are prepared during
// the step before (step 4's comes after the evaluation, so it is prepared in its forward), on 1
// to 3 ranks, for both hash types, Local and LazyGlobal. Global updates every row in use, which
// keys inserted ahead would join a step early, so it prepares every batch in its forward.
TEST(HashAhead, BatchesPreparedAheadTrainBitForBitAsInTheirForward) {
  auto rng = ember::testing::make_rng(31);
  for (EmbeddingType type : kHashTypes) {
    for (optim::UpdateType update : testing::kEveryUpdateType) {
      const Problem base = hash_problem(type, update, 7, {3}, rng);
      for (int D : {1, 2, 3}) {
        Problem ahead = base;
        ahead.prefetch = true;
        const std::string what = std::string(embedding_type_name(type)) + " " +
                                 optim::update_type_name(update) + " on " + std::to_string(D) +
                                 " ranks";
        const testing::RunResult got = testing::run_ranks(ahead, D);
        testing::expect_identical_runs(got, testing::run_ranks(base, D), what);
        testing::expect_same_run(got, testing::run_reference(base), 1e-5, what);
        const std::int64_t prepared = update == optim::UpdateType::Global ? 0 : 4;
        EXPECT_EQ(got.forwards_prepared_ahead, std::vector<std::int64_t>(D, prepared)) << what;
      }
    }
  }
}

TEST(HashAhead, OnlyDeviceHashTablesWithoutGlobalUpdatesInsertAhead) {
  auto rng = ember::testing::make_rng(32);
  auto comms = distributed::make_in_process_communicators(1, 60.0);
  for (EmbeddingType type : kHashTypes) {
    for (optim::UpdateType update : testing::kEveryUpdateType) {
      const Problem p = hash_problem(type, update, 1, {}, rng);
      SparseEmbedding e(p.config, p.optimizer, *comms[0]);
      const bool inserts = update != optim::UpdateType::Global;
      EXPECT_EQ(e.inserts_ahead(), inserts) << embedding_type_name(type);
      EXPECT_EQ(e.prepares_ahead(), inserts) << embedding_type_name(type);
    }
  }
  Problem onehot =
      hash_problem(EmbeddingType::LocalizedSlotOneHot, optim::UpdateType::Local, 1, {}, rng);
  SparseEmbedding e(onehot.config, onehot.optimizer, *comms[0]);
  EXPECT_FALSE(e.inserts_ahead());
  EXPECT_TRUE(e.prepares_ahead());
}

// A batch prepared ahead holds keys it inserted: an evaluation, another batch, a save or a load
// before its forward would see them, so each is refused, naming the layer; the batch's own
// forward then trains as if nothing had been asked. Forgotten, its keys stay in the table with
// their initial rows, as after a forward that looked them up.
TEST(HashAhead, APreparedBatchMustBeTrainedNext) {
  auto rng = ember::testing::make_rng(33);
  for (EmbeddingType type : kHashTypes) {
    const Problem p = hash_problem(type, optim::UpdateType::Local, 3, {}, rng);
    const std::string what(embedding_type_name(type));
    const std::int64_t S = p.config.slot_num, V = p.config.vec_size, B = 12;
    auto comms = distributed::make_in_process_communicators(1, 60.0);
    SparseEmbedding ahead(p.config, p.optimizer, *comms[0]);
    SparseEmbedding plain(p.config, p.optimizer, *comms[0]);
    const DType key = p.config.key_dtype;
    const CsrTensor a = testing::to_csr(p.batches[0], key), b = testing::to_csr(p.batches[1], key),
                    c = testing::to_csr(p.batches[2], key);
    const Tensor grad = Tensor::from_vector(p.grads[0], Shape{B, S, V});
    for (SparseEmbedding* e : {&ahead, &plain}) {
      e->forward(a, 0, B);
      e->backward(grad);
      e->update();
    }
    const std::int64_t rows_before = ahead.rows_in_use();
    ahead.prefetch(b, 0, B);
    EXPECT_GT(ahead.rows_in_use(), rows_before) << what << ": the batch's new keys are in";
    const std::string held =
        "while a training batch prepared ahead holds the new keys it inserted; its forward must "
        "come first";
    EMBER_EXPECT_THROW_WITH(ahead.forward(c, 0, B, false), Error, "an evaluation batch " + held);
    EMBER_EXPECT_THROW_WITH(ahead.forward(c, 0, B), Error, "another training batch " + held);
    EMBER_EXPECT_THROW_WITH(ahead.prefetch(c, 0, B), Error,
                            "preparing another batch ahead " + held);
    ember::testing::ScratchDir dir;
    EMBER_EXPECT_THROW_WITH(ahead.save(dir.path() / "emb"), Error, "a save " + held);
    EMBER_EXPECT_THROW_WITH((void)ahead.snapshot(), Error, "a snapshot of the table " + held);
    EMBER_EXPECT_THROW_WITH(ahead.load(dir.path() / "emb"), Error, "a load " + held);
    EXPECT_EQ(ahead.forward(b, 0, B).to_vector<float>(), plain.forward(b, 0, B).to_vector<float>())
        << what;
    EXPECT_EQ(ahead.forwards_prepared_ahead(), 1) << what;
    for (SparseEmbedding* e : {&ahead, &plain}) {
      e->backward(grad);
      e->update();
    }
    // Forgotten: evaluation works again and finds the batch's keys at their initial rows.
    ahead.prefetch(c, 0, B);
    ahead.forget_prepared();
    plain.forward(c, 0, B);  // inserts the same keys, trains nothing yet
    EXPECT_EQ(ahead.rows_in_use(), plain.rows_in_use()) << what;
    EXPECT_EQ(ahead.forward(c, 0, B, false).to_vector<float>(),
              plain.forward(c, 0, B, false).to_vector<float>())
        << what;
  }
}

// A table that fills up while a batch is prepared ahead: the prefetch raises nothing, and that
// batch's forward raises the full table with its numbers.
TEST(HashAhead, ATableFullWhilePreparingAheadIsRaisedByThatBatchsForward) {
  auto rng = ember::testing::make_rng(34);
  Problem p =
      hash_problem(EmbeddingType::DistributedSlotHash, optim::UpdateType::Local, 1, {}, rng);
  p.config.max_vocabulary_size_per_gpu = 6;
  auto comms = distributed::make_in_process_communicators(1, 60.0);
  SparseEmbedding e(p.config, p.optimizer, *comms[0]);
  const std::int64_t S = p.config.slot_num, V = p.config.vec_size, B = 1;
  // One sample: slots 0-4 with keys 1..5 (5 rows), then keys 6..10 (5 more, 1 fits).
  const testing::HostBatch first{B, {0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}};
  const testing::HostBatch second{B, {0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}};
  e.forward(testing::to_csr(first, p.config.key_dtype), 0, B);
  e.backward(Tensor::zeros({B, S, V}, DType::F32));
  e.update();
  const CsrTensor next = testing::to_csr(second, p.config.key_dtype);
  EXPECT_NO_THROW(e.prefetch(next, 0, B));
  EMBER_EXPECT_THROW_WITH(e.forward(next, 0, B), Error,
                          "the embedding table is full: capacity 6 rows per device, 6 in use, "
                          "and 4 new key(s) of this batch found no row");
}

}  // namespace
}  // namespace ember::embedding
