// HybridSparseEmbedding on CPU ranks: bit for bit LocalizedSlotSparseEmbeddingOneHot on one rank
// (every optimizer and update type, 16-bit tables, rows hotter than a gradient chunk), the same
// within float rounding on 2, 3, 4 and 6 ranks, checkpoints in the one-hot layout both ways,
// the choice of frequent categories, the configuration keys and the errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/hybrid_frequent.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"
#include "vector_dtype_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;

const std::vector<std::int64_t> kSizes = {7, 20, 3, 50, 11};  // vocabulary 91

EmbeddingConfig make_config(EmbeddingType type, std::uint64_t seed, DType key = DType::I64) {
  EmbeddingConfig c;
  c.name = "emb";
  c.type = type;
  c.vec_size = 6;
  c.combiner = Combiner::Sum;
  c.slot_num = static_cast<std::int64_t>(kSizes.size());
  c.slot_size_array = kSizes;
  c.key_dtype = key;
  c.seed = seed;
  return c;
}

// `steps` batches of 0 or 1 key per slot (one-hot data with empty slots); the second-to-last
// step evaluates.
Problem make_problem(const optim::OptimizerConfig& o, int steps, std::int64_t batch,
                     std::mt19937_64& rng, bool with_eval = true) {
  Problem p;
  p.config = make_config(EmbeddingType::LocalizedSlotOneHot, rng());
  p.optimizer = o;
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(testing::random_batch(batch, kSizes, 1, rng));
    p.grads.push_back(testing::random_grad(batch * p.config.slot_num * p.config.vec_size, rng));
    p.training.push_back(!(with_eval && t == steps - 2));
  }
  p.loss_scaler = 4.0f;
  for (auto& g : p.grads) {
    for (auto& x : g)
      x *= p.loss_scaler;
  }
  return p;
}

Problem as_hybrid(Problem p, std::vector<std::int64_t> frequent) {
  p.config.type = EmbeddingType::Hybrid;
  p.config.hybrid.frequent_keys = std::move(frequent);
  return p;
}

using testing::kEveryOptimizer;
using testing::kEveryUpdateType;

std::string name_of(optim::OptimizerType o, optim::UpdateType u) {
  return std::string(optim::optimizer_name(o)) + "/" + optim::update_type_name(u);
}

TEST(HybridEmbedding, OneRankIsOneHotBitForBit) {
  auto rng = ember::testing::make_rng(1);
  for (optim::OptimizerType ot : kEveryOptimizer) {
    for (optim::UpdateType ut : kEveryUpdateType) {
      const Problem onehot = make_problem(testing::test_optimizer(ot, ut), 5, 12, rng);
      const Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 12));
      testing::expect_identical_runs(testing::run_ranks(hybrid, 1), testing::run_ranks(onehot, 1),
                                     name_of(ot, ut));
    }
  }
}

TEST(HybridEmbedding, OneRankIsOneHotBitForBitWithSixteenBitTablesAndU32Keys) {
  auto rng = ember::testing::make_rng(2);
  for (DType dtype : {DType::F16, DType::BF16}) {
    for (optim::OptimizerType ot :
         {optim::OptimizerType::Adam, optim::OptimizerType::MomentumSGD}) {
      for (optim::UpdateType ut : kEveryUpdateType) {
        Problem onehot = make_problem(testing::test_optimizer(ot, ut), 4, 12, rng);
        onehot.config.value_dtype = dtype;
        onehot.config.key_dtype = DType::U32;
        const Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 20));
        testing::expect_identical_runs(testing::run_ranks(hybrid, 1), testing::run_ranks(onehot, 1),
                                       std::string(dtype_name(dtype)) + " " + name_of(ot, ut));
      }
    }
  }
}

// Rows of a few hundred occurrences a batch: their sums run over several kGradientChunks, on
// this rank before the all-reduce, in the one-hot layer's order.
TEST(HybridEmbedding, HotRowsOverSeveralGradientChunksAreBitForBit) {
  auto rng = ember::testing::make_rng(3);
  for (optim::OptimizerType ot : {optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad}) {
    for (optim::UpdateType ut : {optim::UpdateType::Local, optim::UpdateType::Global}) {
      const Problem onehot = make_problem(testing::test_optimizer(ot, ut), 3, 2400, rng, false);
      const Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 8));
      testing::expect_identical_runs(testing::run_ranks(hybrid, 1), testing::run_ranks(onehot, 1),
                                     name_of(ot, ut));
    }
  }
}

TEST(HybridEmbedding, SeveralRanksMatchOneHotWithinRounding) {
  auto rng = ember::testing::make_rng(4);
  for (int D : {2, 3, 4, 6}) {  // 6 ranks: more than the 5 slots, rank 5 owns none
    for (optim::OptimizerType ot : kEveryOptimizer) {
      for (optim::UpdateType ut : kEveryUpdateType) {
        const Problem onehot = make_problem(testing::test_optimizer(ot, ut), 5, 12, rng);
        const Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 15));
        const auto want = testing::run_ranks(onehot, 1);
        const auto got = testing::run_ranks(hybrid, D);
        testing::expect_same_run(got, want, 2e-5,
                                 name_of(ot, ut) + " on " + std::to_string(D) + " ranks");
        // The model is the one-hot model: every key of slot_size_array, nothing else.
        EXPECT_EQ(got.snapshot.keys, want.snapshot.keys);
        EXPECT_EQ(got.rows_in_use_per_step, want.rows_in_use_per_step);
        // Each training step's backward runs two collectives (the infrequent gradients'
        // all-to-all, one all-reduce of the frequent rows' sums and users), its update none.
        const auto steps = std::count(hybrid.training.begin(), hybrid.training.end(), true);
        for (int r = 0; r < D; ++r) {
          EXPECT_EQ(got.collectives_in_backward[r], 2 * steps) << name_of(ot, ut) << ", rank " << r;
          EXPECT_EQ(got.collectives_in_update[r], 0) << name_of(ot, ut) << ", rank " << r;
        }
      }
    }
  }
}

// Mixed precision: 16-bit outputs and gradients cross between the ranks as they are (the
// infrequent vectors' all-to-all both ways), which gives the bits of the f32 exchange rounded
// once: at an even width (moved as 32-bit words) and an odd one (which goes in f32), with a rank
// that owns no slot (6 ranks, 5 slots).
TEST(HybridEmbedding, SeveralRanksExchange16BitVectorsAsTheF32ExchangeRounded) {
  auto rng = ember::testing::make_rng(6);
  for (int D : {1, 2, 3, 6}) {
    for (std::int64_t width : {6, 5}) {
      for (DType dtype : {DType::F16, DType::BF16}) {
        const std::string what = std::to_string(D) + " ranks, width " + std::to_string(width) +
                                 ", " + std::string(dtype_name(dtype));
        Problem onehot = make_problem(
            testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::Global), 4,
            6 * D, rng);
        onehot.config.vec_size = width;
        for (auto& g : onehot.grads)
          g.resize(g.size() / 6 * static_cast<std::size_t>(width));
        testing::expect_16bit_exchange_is_the_f32_one_rounded(
            as_hybrid(onehot, testing::most_used_keys(onehot, 15)), D, false, dtype, what);
      }
    }
  }
}

TEST(HybridEmbedding, SeveralRanksAreDeterministic) {
  auto rng = ember::testing::make_rng(5);
  const Problem onehot = make_problem(
      testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal), 6, 24,
      rng);
  const Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 10));
  testing::expect_identical_runs(testing::run_ranks(hybrid, 3), testing::run_ranks(hybrid, 3),
                                 "two runs on 3 ranks");
}

TEST(HybridEmbedding, NoFrequentKeysAndEveryKeyFrequent) {
  auto rng = ember::testing::make_rng(6);
  std::vector<std::int64_t> every(91);
  std::iota(every.begin(), every.end(), std::int64_t{0});
  for (const auto& frequent : {std::vector<std::int64_t>{}, every}) {
    const Problem onehot = make_problem(
        testing::test_optimizer(optim::OptimizerType::MomentumSGD, optim::UpdateType::Global), 4,
        12, rng);
    const Problem hybrid = as_hybrid(onehot, frequent);
    const auto want = testing::run_ranks(onehot, 1);
    const std::string what = std::to_string(frequent.size()) + " frequent keys";
    testing::expect_identical_runs(testing::run_ranks(hybrid, 1), want, what);
    testing::expect_same_run(testing::run_ranks(hybrid, 3), want, 2e-5, what + ", 3 ranks");
  }
}

TEST(HybridEmbedding, EmptyBatchesAndSamplesWithoutKeys) {
  auto rng = ember::testing::make_rng(7);
  Problem onehot = make_problem(
      testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::Local), 3, 6, rng);
  // Step 0 has no key at all (the random batches also leave slots empty).
  auto& empty = onehot.batches[0];
  empty.keys.clear();
  std::fill(empty.offsets.begin(), empty.offsets.end(), 0);
  const Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 5));
  testing::expect_identical_runs(testing::run_ranks(hybrid, 1), testing::run_ranks(onehot, 1),
                                 "1 rank");
  testing::expect_same_run(testing::run_ranks(hybrid, 3), testing::run_ranks(onehot, 1), 2e-5,
                           "3 ranks");
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(HybridEmbedding, SavesTheOneHotLayoutByteForByte) {
  auto rng = ember::testing::make_rng(8);
  ember::testing::ScratchDir dir;
  Problem onehot = make_problem(
      testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal), 4, 12,
      rng);
  Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 12));
  onehot.save_after = dir / "onehot";
  hybrid.save_after = dir / "hybrid";
  testing::run_ranks(onehot, 1);
  testing::run_ranks(hybrid, 1);
  for (const char* file : {"keys", "vectors", "adam_m", "adam_v", "optimizer_step"}) {
    const std::string want = file_bytes(dir / "onehot" / file);
    EXPECT_FALSE(want.empty()) << file;
    EXPECT_EQ(file_bytes(dir / "hybrid" / file), want) << file;
  }
}

TEST(HybridEmbedding, CheckpointsMoveBetweenHybridAndOneHotAcrossRankCounts) {
  auto rng = ember::testing::make_rng(9);
  ember::testing::ScratchDir dir;
  for (optim::UpdateType ut : kEveryUpdateType) {
    const Problem whole =
        make_problem(testing::test_optimizer(optim::OptimizerType::Adam, ut), 6, 12, rng);
    const auto frequent = testing::most_used_keys(whole, 10);
    auto want = testing::run_ranks(whole, 1);
    for (std::size_t t = 0; t < 3; ++t)  // a resumed run's outputs start at step 3
      std::fill(want.outputs[t].begin(), want.outputs[t].end(), 0.0f);
    const std::string what = optim::update_type_name(ut);
    // Hybrid on 2 ranks for three steps, then one-hot on 3 ranks.
    {
      Problem first = as_hybrid(whole, frequent);
      first.batches.resize(3);
      first.grads.resize(3);
      first.training.resize(3);
      first.save_after = dir / "a";
      testing::run_ranks(first, 2);
      Problem rest = whole;
      rest.first_step = 3;
      rest.load_before = dir / "a";
      const auto got = testing::run_ranks(rest, 3);
      testing::expect_same_run(got, want, 2e-5, what + ": hybrid x2 -> one-hot x3");
    }
    // One-hot on 3 ranks, then hybrid on 2.
    {
      Problem first = whole;
      first.batches.resize(3);
      first.grads.resize(3);
      first.training.resize(3);
      first.save_after = dir / "b";
      testing::run_ranks(first, 3);
      Problem rest = as_hybrid(whole, frequent);
      rest.first_step = 3;
      rest.load_before = dir / "b";
      const auto got = testing::run_ranks(rest, 2);
      testing::expect_same_run(got, want, 2e-5, what + ": one-hot x3 -> hybrid x2");
    }
  }
}

TEST(HybridEmbedding, LoadingPutsEveryRowWhereItWas) {
  auto rng = ember::testing::make_rng(10);
  ember::testing::ScratchDir dir;
  Problem onehot = make_problem(
      testing::test_optimizer(optim::OptimizerType::MomentumSGD, optim::UpdateType::Global), 3, 12,
      rng);
  onehot.save_after = dir / "m";
  const auto saved = testing::run_ranks(onehot, 1);
  for (int D : {1, 3}) {
    Problem hybrid = as_hybrid(onehot, testing::most_used_keys(onehot, 10));
    hybrid.save_after.clear();
    hybrid.first_step = hybrid.batches.size();  // load, then only the final snapshot
    hybrid.load_before = dir / "m";
    const auto got = testing::run_ranks(hybrid, D);
    EXPECT_EQ(got.snapshot.keys, saved.snapshot.keys) << D;
    EXPECT_EQ(got.snapshot.vectors, saved.snapshot.vectors) << D;
    EXPECT_EQ(got.snapshot.states, saved.snapshot.states) << D;
    EXPECT_EQ(got.snapshot.step, saved.snapshot.step) << D;
  }
}

// Makes bag `bag` of `b` hold exactly `keys`.
void set_bag(testing::HostBatch& b, std::int64_t bag, const std::vector<std::int64_t>& keys) {
  const std::int64_t begin = b.offsets[bag], end = b.offsets[bag + 1];
  b.keys.erase(b.keys.begin() + begin, b.keys.begin() + end);
  b.keys.insert(b.keys.begin() + begin, keys.begin(), keys.end());
  const auto change = static_cast<std::int64_t>(keys.size()) - (end - begin);
  for (std::size_t i = bag + 1; i < b.offsets.size(); ++i)
    b.offsets[i] += change;
}

// `base` run with each training batch prefetched after the step before (as the session does)
// against the same run without: the same bit for bit on D ranks, with `forwards` of each rank's
// forwards starting from the batch prepared ahead (none would be the same run trivially).
void expect_prepared_ahead_as_in_forward(const Problem& base, int D, std::int64_t forwards,
                                         const std::string& what) {
  Problem ahead = base;
  ahead.prefetch = true;
  const std::string where = std::string(embedding_type_name(base.config.type)) + " " + what +
                            " on " + std::to_string(D) + " ranks";
  const testing::RunResult got = testing::run_ranks(ahead, D);
  testing::expect_identical_runs(got, testing::run_ranks(base, D), where);
  EXPECT_EQ(got.forwards_prepared_ahead, std::vector<std::int64_t>(D, forwards)) << where;
}

// The session prepares each training batch ahead, during the step before (prefetch()): the
// rows, the exchange's plan and the grouping for the update come from the keys alone, so the
// run is the same bit for bit, with an evaluation batch between a batch prepared and its
// forward, for the one-hot layer and the hybrid.
TEST(HybridEmbedding, BatchesPreparedAheadTrainBitForBitAsInTheirForward) {
  auto rng = ember::testing::make_rng(13);
  for (int D : {1, 2, 3}) {
    for (optim::OptimizerType ot : {optim::OptimizerType::Adam, optim::OptimizerType::SGD}) {
      for (optim::UpdateType ut : kEveryUpdateType) {
        const Problem onehot = make_problem(testing::test_optimizer(ot, ut), 6, 12, rng);
        for (const Problem& base :
             {onehot, as_hybrid(onehot, testing::most_used_keys(onehot, 15))}) {
          // Steps 1, 2, 3 and 5 train on a batch prepared ahead (step 4 evaluates between the
          // prefetch of step 5's batch and its forward).
          expect_prepared_ahead_as_in_forward(base, D, 4, name_of(ot, ut));
        }
      }
    }
  }
}

// An evaluation batch larger than the training batches, between a prefetch and its forward:
// the hybrid's constants and exchange plan grow for it in its forward, so the training batch
// after the one already prepared is prepared in its own forward (which sizes them back), and
// the ones after are prepared ahead again. The one-hot layer has nothing sized by the batch.
TEST(HybridEmbedding, ALargerEvaluationBatchCostsTheHybridOnePreparationAhead) {
  auto rng = ember::testing::make_rng(15);
  for (int D : {1, 2}) {
    Problem onehot = make_problem(
        testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal), 8, 12,
        rng, false);
    onehot.batches[4] = testing::random_batch(36, kSizes, 1, rng);
    onehot.grads[4].assign(36 * onehot.config.slot_num * onehot.config.vec_size, 0.0f);
    onehot.training[4] = false;
    for (const Problem& base : {onehot, as_hybrid(onehot, testing::most_used_keys(onehot, 15))}) {
      // Training steps 1, 2, 3, 5, 6, 7 follow a prefetch; the hybrid prepares step 6's batch in
      // its forward.
      expect_prepared_ahead_as_in_forward(
          base, D, base.config.type == EmbeddingType::Hybrid ? 5 : 6, "larger evaluation batch");
    }
  }
}

// A batch prepared for nothing (another training batch comes first, or the caller forgets it)
// is dropped, and a prepared batch's data error is raised by its own forward, not by the
// prefetch.
TEST(HybridEmbedding, APreparedBatchServesOnlyItsOwnForward) {
  auto rng = ember::testing::make_rng(14);
  const Problem onehot =
      make_problem(testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::Local), 3,
                   8, rng, false);
  for (const Problem& p : {onehot, as_hybrid(onehot, testing::most_used_keys(onehot, 10))}) {
    const std::string what(embedding_type_name(p.config.type));
    const std::int64_t S = p.config.slot_num, V = p.config.vec_size, B = 8;
    auto comms = distributed::make_in_process_communicators(1, 60.0);
    SparseEmbedding ahead(p.config, p.optimizer, *comms[0]);
    SparseEmbedding plain(p.config, p.optimizer, *comms[0]);
    const CsrTensor a = testing::to_csr(p.batches[0], p.config.key_dtype),
                    b = testing::to_csr(p.batches[1], p.config.key_dtype);
    const Tensor grad = Tensor::from_vector(p.grads[0], Shape{B, S, V});
    ahead.prefetch(b, 0, B);  // b is prepared, a comes first
    for (SparseEmbedding* e : {&ahead, &plain}) {
      e->forward(a, 0, B);
      e->backward(grad);
      e->update();
    }
    const std::vector<float> got = ahead.forward(b, 0, B).to_vector<float>();
    EXPECT_EQ(got, plain.forward(b, 0, B).to_vector<float>()) << what;
    EXPECT_EQ(ahead.forwards_prepared_ahead(), 0) << what;
    // Forgotten (its forward will not come): the same batch later is prepared in its forward.
    for (SparseEmbedding* e : {&ahead, &plain}) {
      e->backward(grad);
      e->update();
    }
    ahead.prefetch(a, 0, B);
    ahead.forget_prepared();
    EXPECT_EQ(ahead.forward(a, 0, B).to_vector<float>(), plain.forward(a, 0, B).to_vector<float>())
        << what;
    EXPECT_EQ(ahead.forwards_prepared_ahead(), 0) << what;
    plain.backward(grad);
    plain.update();

    testing::HostBatch bad = p.batches[2];
    set_bag(bad, 3 * S + 4, {40});  // sample 3, slot 4 (keys [80, 91))
    const CsrTensor c = testing::to_csr(bad, p.config.key_dtype);
    ahead.backward(grad);
    ahead.update();
    EXPECT_NO_THROW(ahead.prefetch(c, 0, B)) << what;
    EMBER_EXPECT_THROW_WITH(ahead.forward(c, 0, B), DataError,
                            "key 40 of sample 3 in slot 4 is outside the slot's range [80, 91)");
  }
}

TEST(HybridEmbedding, SeveralKeysInASlotAreAnError) {
  auto rng = ember::testing::make_rng(11);
  Problem p = as_hybrid(
      make_problem(testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local), 2,
                   6, rng, false),
      {0, 8});
  set_bag(p.batches[1], 4 * 5 + 1, {9, 10});  // sample 4, slot 1 (keys [7, 27))
  for (int D : {1, 2}) {
    EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, D), DataError, "slot 1 of sample 4 has 2 keys");
  }
  // Without frequent keys the layer runs the one-hot code, which still takes one key a slot.
  p.config.hybrid.frequent_keys.clear();
  for (int D : {1, 2}) {
    EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, D), DataError,
                            "slot 1 of sample 4 has more than one key (the second 10); "
                            "HybridSparseEmbedding takes one key per slot, as in HugeCTR");
  }
}

TEST(HybridEmbedding, AKeyOutsideItsSlotIsAnError) {
  auto rng = ember::testing::make_rng(12);
  for (std::int64_t key : {std::int64_t{0}, std::int64_t{40}}) {  // frequent, infrequent
    Problem p = as_hybrid(
        make_problem(testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local),
                     2, 6, rng, false),
        {0, 8});
    set_bag(p.batches[1], 2 * 5 + 4, {key});  // sample 2, slot 4 (keys [80, 91))
    Problem none = p;  // no frequent keys: the one-hot code, the same message
    none.config.hybrid.frequent_keys.clear();
    for (int D : {1, 3}) {
      EMBER_EXPECT_THROW_WITH(testing::run_ranks(none, D), DataError,
                              "key " + std::to_string(key) +
                                  " of sample 2 in slot 4 is outside the slot's range [80, 91)");
      EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, D), DataError,
                              "key " + std::to_string(key) +
                                  " of sample 2 in slot 4 is outside the slot's range [80, 91)");
    }
  }
}

// ---- the frequent categories ----

std::vector<std::int64_t> counted_keys() {
  // key 5 five times, keys 1 and 9 three times, key 4 twice, key 7 once.
  return {5, 9, 1, 5, 4, 9, 5, 7, 1, 5, 1, 4, 9, 5};
}

TEST(HybridFrequent, SingleNodeThresholdRoundingAndTies) {
  HybridConfig c;
  c.communication = HybridCommunication::NVLink_SingleNode;
  c.p_dup_max = 0.84375;  // threshold 8 x 1 x sqrt(2 p / (4 x 3)) = 3 for B = 8, 2 ranks
  c.max_num_frequent_categories = 10;
  FrequentChoiceInputs in;
  in.batch_size = 8;
  in.batch_size_eval = 8;
  in.batches = 1;
  in.ranks = 2;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 3.0);
  auto keys = counted_keys();
  FrequentChoice f = choose_frequent_categories(keys, c, in);
  // 5, 1 and 9 reach 3; rounded up to 4 per 2 ranks adds the next most counted, 4.
  EXPECT_EQ(f.above_threshold, 3);
  EXPECT_EQ(f.keys, (std::vector<std::int64_t>{1, 4, 5, 9}));
  EXPECT_EQ(f.distinct, 5);
  EXPECT_EQ(f.lookups, 14);
  EXPECT_EQ(f.frequent_lookups, 13);
  EXPECT_FALSE(f.capped);
  EXPECT_NE(f.describe(c).find("4 frequent categories (of 5 seen in 14 lookups; 3 counted >= 3"),
            std::string::npos)
      << f.describe(c);
  // The line also says what the traffic rule would pick: 1 batch x 2 ranks x 4 / 4 (f32
  // vectors) x 1.9 / 1.3 (HugeCTR's default bandwidths) = 2.92, reached by 5, 1 and 9.
  EXPECT_EQ(f.traffic_rule_count, 3);
  EXPECT_NE(f.describe(c).find("; frequent_rule traffic would pick 3,"), std::string::npos)
      << f.describe(c);
  // 4 ranks: the 3 round to 4 as well (the threshold is 8 x sqrt(2 p / 2) = 7.3: set p so that
  // it is 3 again).
  in.ranks = 4;
  c.p_dup_max = 0.140625;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 3.0);
  keys = counted_keys();
  EXPECT_EQ(choose_frequent_categories(keys, c, in).keys, (std::vector<std::int64_t>{1, 4, 5, 9}));
  // 6 ranks (batch 12, M = 2, threshold 12 x sqrt(p) = 3): the 3 round to 6, more than the 5
  // categories seen, and HugeCTR then takes one multiple of the rank count off: none.
  in.ranks = 6;
  in.batch_size = 12;
  c.p_dup_max = 0.0625;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 3.0);
  keys = counted_keys();
  const FrequentChoice six = choose_frequent_categories(keys, c, in);
  EXPECT_EQ(six.above_threshold, 3);
  EXPECT_TRUE(six.keys.empty());
}

TEST(HybridFrequent, TheCapKeepsTheMostCounted) {
  HybridConfig c;
  c.communication = HybridCommunication::NVLink_SingleNode;
  c.p_dup_max = 0.84375;
  c.max_num_frequent_categories = 1;  // x max(2, 1) = 2
  FrequentChoiceInputs in;
  in.batch_size = 8;
  in.batches = 1;
  in.ranks = 2;
  // The cap is in units of the larger batch: 1 x max(8, 1) = 8 holds all four.
  in.batch_size_eval = 1;
  auto keys = counted_keys();
  EXPECT_EQ(choose_frequent_categories(keys, c, in).keys.size(), 4u);
  c.max_num_frequent_categories = 0;
  keys = counted_keys();
  const FrequentChoice none = choose_frequent_categories(keys, c, in);
  EXPECT_TRUE(none.keys.empty());
  EXPECT_TRUE(none.capped);
  // A cap of 1 x max(2, 1) = 2 (batch 2, 4 batches, one rank: M = 2, threshold
  // 2 x 4 x sqrt(p) = 3): of 5, 1 and 9 the two most counted, 5 and then 1 (1 < 9).
  c.max_num_frequent_categories = 1;
  c.p_dup_max = 0.140625;
  in.batch_size = 2;
  in.batches = 4;
  in.ranks = 1;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 3.0);
  keys = counted_keys();
  const FrequentChoice capped = choose_frequent_categories(keys, c, in);
  // One rank exchanges nothing: the traffic rule would replicate nothing (the one-hot code).
  EXPECT_EQ(capped.traffic_rule_count, 0);
  EXPECT_EQ(capped.keys, (std::vector<std::int64_t>{1, 5}));
  EXPECT_TRUE(capped.capped);
  EXPECT_NE(capped.describe(c).find("capped at max_num_frequent_categories x batch = 2"),
            std::string::npos)
      << capped.describe(c);
}

TEST(HybridFrequent, InfinibandThresholdNeedsSeveralProcesses) {
  HybridConfig c;  // IB_NVLink, HugeCTR's default
  c.max_all_reduce_bandwidth = 1e11;
  c.max_all_to_all_bandwidth = 1e11;
  c.efficiency_bandwidth_ratio = 0.75;  // threshold 1 x 2 x 1 x 0.75 x 2 / 1 = 3 on 2 processes
  FrequentChoiceInputs in;
  in.batch_size = 8;
  in.batch_size_eval = 8;
  in.batches = 1;
  in.ranks = 1;
  in.processes = 1;
  auto keys = counted_keys();
  const FrequentChoice one = choose_frequent_categories(keys, c, in);
  EXPECT_TRUE(one.keys.empty());
  EXPECT_NE(one.describe(c).find("none can be frequent with communication_type IB_NVLink"),
            std::string::npos);
  in.processes = 2;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 3.0);
  keys = counted_keys();
  EXPECT_EQ(choose_frequent_categories(keys, c, in).keys, (std::vector<std::int64_t>{1, 5, 9}));
  c.communication = HybridCommunication::IB_NVLink_Hierarchical;
  keys = counted_keys();
  EXPECT_EQ(choose_frequent_categories(keys, c, in).keys, (std::vector<std::int64_t>{1, 5, 9}));
  in.batches = 0;  // nothing counted: nothing frequent
  keys.clear();
  EXPECT_TRUE(choose_frequent_categories(keys, c, in).keys.empty());
}

// frequent_rule "traffic": a row is replicated when its lookups a batch pass D x 4 / e (its f32
// sums' all-reduce against its vectors' exchange), weighted by the collectives' bandwidths.
TEST(HybridFrequent, TrafficRuleReplicatesTheRowsThatSaveBytes) {
  HybridConfig c;
  c.rule = FrequentRule::Traffic;
  c.communication = HybridCommunication::IB_NVLink;  // not read by this rule
  c.max_num_frequent_categories = 10;
  c.max_all_reduce_bandwidth = 1e11;
  c.max_all_to_all_bandwidth = 1e11;
  FrequentChoiceInputs in;
  in.batch_size = 8;
  in.batch_size_eval = 8;
  in.batches = 0.5;
  in.ranks = 2;
  in.processes = 1;  // one process: HugeCTR's IB rule would make nothing frequent
  in.exchange_bytes = 2;
  // 0.5 batches x 2 ranks x 4 / 2 = 2: keys 5, 1, 9 and 4 reach it (4 is a multiple of 2).
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 2.0);
  auto keys = counted_keys();
  FrequentChoice f = choose_frequent_categories(keys, c, in);
  EXPECT_EQ(f.above_threshold, 4);
  EXPECT_EQ(f.keys, (std::vector<std::int64_t>{1, 4, 5, 9}));
  EXPECT_NE(f.describe(c).find("4 counted >= 2 times, frequent_rule traffic"), std::string::npos)
      << f.describe(c);
  EXPECT_EQ(f.traffic_rule_count, -1);  // it is the rule in use
  // f32 vectors cost twice the bytes to exchange: half the threshold (1), and so on.
  in.exchange_bytes = 4;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 1.0);
  // Each term: more ranks, a faster all-to-all, a lower efficiency ratio.
  in.exchange_bytes = 2;
  in.ranks = 4;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 4.0);
  c.max_all_to_all_bandwidth = 1.5e11;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 6.0);
  c.efficiency_bandwidth_ratio = 0.5;
  EXPECT_DOUBLE_EQ(frequent_count_threshold(c, in), 3.0);
  keys = counted_keys();
  // 5, 1 and 9 reach 3, rounded up to 4 for 4 ranks.
  EXPECT_EQ(choose_frequent_categories(keys, c, in).keys, (std::vector<std::int64_t>{1, 4, 5, 9}));
  // One rank exchanges nothing: nothing is worth replicating.
  in.ranks = 1;
  EXPECT_TRUE(std::isinf(frequent_count_threshold(c, in)));
  keys = counted_keys();
  const FrequentChoice one = choose_frequent_categories(keys, c, in);
  EXPECT_TRUE(one.keys.empty());
  EXPECT_NE(one.describe(c).find("none can be frequent with frequent_rule traffic on one rank"),
            std::string::npos)
      << one.describe(c);
}

// ---- configuration ----

const char* kHybridLayer = R"({
  "name": "e", "type": "HybridSparseEmbedding", "bottom": "d", "top": "e",
  "sparse_embedding_hparam": {
    "embedding_vec_size": 8, "combiner": "sum", "max_vocabulary_size_per_gpu": 100,
    "slot_size_array": [3, 5, 7],
    "max_num_frequent_categories": 2, "max_num_infrequent_samples": -1, "p_dup_max": 0.02,
    "max_all_reduce_bandwidth": 1.5e11, "max_all_to_all_bandwidth": 2.5e11,
    "efficiency_bandwidth_ratio": 0.9, "communication_type": "NVLink_SingleNode",
    "frequent_rule": "traffic",
    "hybrid_embedding_type": "Distributed", "num_iterations_statistics": 5,
    "use_train_precompute_indices": true, "use_eval_precompute_indices": false}})";

TEST(HybridConfig, ReadsHugeCtrKeys) {
  const EmbeddingConfig c =
      parse_embedding_layer(nlohmann::json::parse(kHybridLayer), {"d", 3, 3}, DType::I64, 7);
  EXPECT_EQ(c.type, EmbeddingType::Hybrid);
  EXPECT_EQ(c.where(), "layer 'e' (HybridSparseEmbedding)");
  EXPECT_EQ(c.vocabulary(), 15);
  EXPECT_EQ(c.hybrid.max_num_frequent_categories, 2);
  EXPECT_EQ(c.hybrid.num_iterations_statistics, 5);
  EXPECT_DOUBLE_EQ(c.hybrid.p_dup_max, 0.02);
  EXPECT_DOUBLE_EQ(c.hybrid.max_all_reduce_bandwidth, 1.5e11);
  EXPECT_DOUBLE_EQ(c.hybrid.max_all_to_all_bandwidth, 2.5e11);
  EXPECT_DOUBLE_EQ(c.hybrid.efficiency_bandwidth_ratio, 0.9);
  EXPECT_EQ(c.hybrid.communication, HybridCommunication::NVLink_SingleNode);
  EXPECT_EQ(c.hybrid.rule, FrequentRule::Traffic);
  EXPECT_TRUE(c.hybrid.frequent_keys.empty());
  // HugeCTR's defaults.
  const EmbeddingConfig d = parse_embedding_layer(nlohmann::json::parse(R"({
    "name": "e", "type": "HybridSparseEmbedding", "bottom": "d", "top": "e",
    "sparse_embedding_hparam": {"embedding_vec_size": 8, "slot_size_array": [3, 5]}})"),
                                                  {"d", 2, 2}, DType::U32, 7);
  EXPECT_EQ(d.hybrid.max_num_frequent_categories, 1);
  EXPECT_EQ(d.hybrid.num_iterations_statistics, -1);  // the solver's
  EXPECT_DOUBLE_EQ(d.hybrid.p_dup_max, 0.01);
  EXPECT_DOUBLE_EQ(d.hybrid.max_all_reduce_bandwidth, 1.3e11);
  EXPECT_DOUBLE_EQ(d.hybrid.max_all_to_all_bandwidth, 1.9e11);
  EXPECT_DOUBLE_EQ(d.hybrid.efficiency_bandwidth_ratio, 1.0);
  EXPECT_EQ(d.hybrid.communication, HybridCommunication::IB_NVLink);
  EXPECT_EQ(d.hybrid.rule, FrequentRule::HugeCTR);  // Ember's key; HugeCTR's rule by default
}

TEST(HybridConfig, ErrorsNameTheLayerKeyAndNumbers) {
  auto expect_error = [](const std::string& key, const std::string& value,
                         const std::string& needle) {
    nlohmann::json layer = nlohmann::json::parse(kHybridLayer);
    if (value.empty()) {
      layer["sparse_embedding_hparam"].erase(key);
    } else {
      layer["sparse_embedding_hparam"][key] = nlohmann::json::parse(value);
    }
    EMBER_EXPECT_THROW_WITH(parse_embedding_layer(layer, {"d", 3, 3}, DType::I64, 7), ConfigError,
                            "layer 'e' (HybridSparseEmbedding): " + needle);
  };
  expect_error("max_num_frequent_categories", "-1",
               "\"sparse_embedding_hparam.max_num_frequent_categories\" must be an integer >= 0, "
               "got -1");
  expect_error("max_num_frequent_categories", "16",
               "\"sparse_embedding_hparam.max_num_frequent_categories\" = 16 exceeds the "
               "vocabulary of 15 keys");
  expect_error("max_num_frequent_categories", "1.5",
               "\"sparse_embedding_hparam.max_num_frequent_categories\" must be an integer >= 0, "
               "got 1.5");
  expect_error("num_iterations_statistics", "-2",
               "\"sparse_embedding_hparam.num_iterations_statistics\" must be an integer >= 0, "
               "got -2");
  expect_error("p_dup_max", "0",
               "\"sparse_embedding_hparam.p_dup_max\" must be a number in (0, 1], got 0");
  expect_error("p_dup_max", "1.5",
               "\"sparse_embedding_hparam.p_dup_max\" must be a number in (0, 1], got 1.5");
  expect_error("max_all_reduce_bandwidth", "0",
               "\"sparse_embedding_hparam.max_all_reduce_bandwidth\" must be a number > 0, got 0");
  expect_error("efficiency_bandwidth_ratio", "-1",
               "\"sparse_embedding_hparam.efficiency_bandwidth_ratio\" must be a number > 0, got "
               "-1");
  expect_error("communication_type", "\"NVLink\"",
               "\"sparse_embedding_hparam.communication_type\" must be \"IB_NVLink\", "
               "\"IB_NVLink_Hierarchical\" or \"NVLink_SingleNode\", got \"NVLink\"");
  expect_error("frequent_rule", "\"bytes\"",
               "\"sparse_embedding_hparam.frequent_rule\" must be \"hugectr\" or \"traffic\", "
               "got \"bytes\"");
  expect_error("hybrid_embedding_type", "\"Local\"",
               "\"sparse_embedding_hparam.hybrid_embedding_type\" must be \"Distributed\"");
  expect_error("slot_size_array", "",
               "HybridSparseEmbedding needs \"sparse_embedding_hparam.slot_size_array\"");
  expect_error("max_num_frequent_categoris", "1", "unknown key");
  // Host storage; and the hybrid keys on another type.
  nlohmann::json host = nlohmann::json::parse(kHybridLayer);
  host["storage"] = {{"location", "host"}};
  EMBER_EXPECT_THROW_WITH(parse_embedding_layer(host, {"d", 3, 3}, DType::I64, 7), ConfigError,
                          "\"storage.location\" \"host\" is not supported by "
                          "HybridSparseEmbedding");
  nlohmann::json onehot = nlohmann::json::parse(kHybridLayer);
  onehot["type"] = "LocalizedSlotSparseEmbeddingOneHot";
  EMBER_EXPECT_THROW_WITH(parse_embedding_layer(onehot, {"d", 3, 3}, DType::I64, 7), ConfigError,
                          "unknown key \"sparse_embedding_hparam.");
}

TEST(HybridConfig, FrequentKeysMustBeAscendingAndInTheVocabulary) {
  EmbeddingConfig c = make_config(EmbeddingType::Hybrid, 1);
  c.hybrid.frequent_keys = {3, 91};
  EMBER_EXPECT_THROW_WITH(c.validate(), ConfigError,
                          "layer 'emb' (HybridSparseEmbedding): frequent category 1 is key 91, "
                          "outside the vocabulary [0, 91)");
  c.hybrid.frequent_keys = {5, 5};
  EMBER_EXPECT_THROW_WITH(c.validate(), ConfigError, "key 5 (1) follows 5");
  c.hybrid.frequent_keys = {-1};
  EMBER_EXPECT_THROW_WITH(c.validate(), ConfigError, "is key -1");
  c.hybrid.frequent_keys = {0, 90};
  EXPECT_NO_THROW(c.validate());
}

}  // namespace
}  // namespace ember::embedding
