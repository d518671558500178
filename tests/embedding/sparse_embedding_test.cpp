// The sparse embedding on CPU ranks against the plain reference: forward (both combiners, empty
// slots, repeated keys), backward and update for every optimizer and update type, D = 1..4 ranks
// for every type, evaluation mode, save/load, and the errors.
#include "ember/embedding/sparse_embedding.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <thread>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::HostBatch;
using testing::Problem;

const std::vector<std::int64_t> kSlotSizes = {7, 20, 3, 50, 11};

EmbeddingConfig base_config(EmbeddingType type, Combiner combiner, DType key_dtype,
                            std::uint64_t seed) {
  return testing::small_config(type, combiner, key_dtype, 6, seed, kSlotSizes);
}

Problem make_problem(const EmbeddingConfig& c, const optim::OptimizerConfig& o, int steps,
                     std::int64_t batch, std::mt19937_64& rng, bool with_eval = false) {
  Problem p;
  p.config = c;
  p.optimizer = o;
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(testing::random_batch(batch, kSlotSizes, 3, rng));
    p.grads.push_back(testing::random_grad(batch * c.slot_num * c.vec_size, rng));
    p.training.push_back(!(with_eval && t == steps - 2));
  }
  return p;
}

using testing::Case;
using testing::case_name;

class ShardedEmbedding : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedEmbedding, ForwardMatchesReferenceForBothCombiners) {
  const auto [type, D] = GetParam();
  auto rng = ember::testing::make_rng(D);
  for (Combiner combiner : {Combiner::Sum, Combiner::Mean}) {
    for (DType key : {DType::U32, DType::I64}) {
      const auto c = base_config(type, combiner, key, rng());
      // One training forward then an evaluation forward of a different batch.
      Problem p = make_problem(
          c, testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local), 3, 12,
          rng,
          /*with_eval=*/true);
      const auto got = testing::run_ranks(p, D);
      const auto want = testing::run_reference(p);
      testing::expect_same_run(
          got, want, 1e-5,
          std::string(combiner_name(combiner)) + " " + std::string(dtype_name(key)));
      // Evaluation inserted nothing: the row count did not move in the evaluation step.
      EXPECT_EQ(got.rows_in_use_per_step, want.rows_in_use_per_step);
      EXPECT_EQ(got.rows_in_use_per_step[1], got.rows_in_use_per_step[0]);
    }
  }
}

TEST_P(ShardedEmbedding, EveryOptimizerAndUpdateTypeMatchesReference) {
  const auto [type, D] = GetParam();
  auto rng = ember::testing::make_rng(10 + D);
  for (optim::OptimizerType ot :
       {optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD,
        optim::OptimizerType::Nesterov, optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad,
        optim::OptimizerType::RMSProp, optim::OptimizerType::Ftrl}) {
    for (optim::UpdateType ut :
         {optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
      const auto c = base_config(type, Combiner::Mean, DType::I64, rng());
      Problem p = make_problem(c, testing::test_optimizer(ot, ut), 4, 12, rng);
      p.loss_scaler = 4.0f;
      // Scale the gradients by the loss scaler, as a mixed-precision network would.
      for (auto& g : p.grads) {
        for (auto& x : g)
          x *= p.loss_scaler;
      }
      const auto want = testing::run_reference(p);
      const auto got = testing::run_ranks(p, D);
      const std::string what =
          std::string(optim::optimizer_name(ot)) + "/" + optim::update_type_name(ut);
      testing::expect_same_run(got, want, 2e-5, what);
      // The exchanges are in backward(), none in update(): a caller runs its own collectives
      // beside the update (train::Replica's dense all-reduce).
      for (int r = 0; r < D; ++r) {
        if (D > 1) EXPECT_EQ(got.collectives_in_backward[r], 4) << what << ", rank " << r;
        EXPECT_EQ(got.collectives_in_update[r], 0) << what << ", rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, ShardedEmbedding,
    ::testing::Values(
        Case{EmbeddingType::DistributedSlotHash, 1}, Case{EmbeddingType::DistributedSlotHash, 2},
        Case{EmbeddingType::DistributedSlotHash, 3}, Case{EmbeddingType::DistributedSlotHash, 4},
        Case{EmbeddingType::LocalizedSlotHash, 1}, Case{EmbeddingType::LocalizedSlotHash, 2},
        Case{EmbeddingType::LocalizedSlotHash, 3}, Case{EmbeddingType::LocalizedSlotHash, 4},
        Case{EmbeddingType::LocalizedSlotOneHot, 1}, Case{EmbeddingType::LocalizedSlotOneHot, 2},
        Case{EmbeddingType::LocalizedSlotOneHot, 3}, Case{EmbeddingType::LocalizedSlotOneHot, 4}),
    case_name);

TEST(SparseEmbedding, MoreRanksThanSlotsAndEmptyBatches) {
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : {EmbeddingType::LocalizedSlotHash, EmbeddingType::LocalizedSlotOneHot,
                             EmbeddingType::DistributedSlotHash}) {
    EmbeddingConfig c = base_config(type, Combiner::Sum, DType::U32, rng());
    c.slot_num = 2;
    if (!c.slot_size_array.empty()) c.slot_size_array = {7, 20};
    Problem p;
    p.config = c;
    p.optimizer = testing::test_optimizer(optim::OptimizerType::AdaGrad, optim::UpdateType::Global);
    const std::vector<std::int64_t> sizes = {7, 20};
    for (int t = 0; t < 3; ++t) {
      // Step 1 has no keys at all.
      p.batches.push_back(testing::random_batch(8, sizes, t == 1 ? 0 : 2, rng));
      p.grads.push_back(testing::random_grad(8 * 2 * c.vec_size, rng));
      p.training.push_back(true);
    }
    testing::expect_same_run(testing::run_ranks(p, 4), testing::run_reference(p), 1e-5,
                             embedding_type_name(type));
  }
}

TEST(SparseEmbedding, LazyGlobalEqualsGlobalOverLongGaps) {
  // Few keys, each touched rarely: rows skip many steps before they are touched again.
  auto rng = ember::testing::make_rng();
  for (optim::OptimizerType ot : {optim::OptimizerType::MomentumSGD, optim::OptimizerType::Nesterov,
                                  optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad,
                                  optim::OptimizerType::RMSProp, optim::OptimizerType::Ftrl}) {
    EmbeddingConfig c =
        base_config(EmbeddingType::DistributedSlotHash, Combiner::Sum, DType::I64, rng());
    Problem global;
    global.config = c;
    global.optimizer = testing::test_optimizer(ot, optim::UpdateType::Global);
    // A rate that changes over the gaps (warm-up, then decay): the catch-up must use each missed
    // step's own rate where the rule depends on it (Adam's step sizes, Ftrl's weight).
    global.optimizer.schedule.decay_start = 4;
    global.optimizer.schedule.decay_steps = 6;
    global.optimizer.schedule.end_lr = 0.01f;
    for (int t = 0; t < 12; ++t) {
      HostBatch h;
      h.batch = 2;
      h.offsets = {0};
      for (std::int64_t row = 0; row < 2 * c.slot_num; ++row) {
        if (rng() % 6 == 0) h.keys.push_back(static_cast<std::int64_t>(rng() % 9) * 13);
        h.offsets.push_back(static_cast<std::int64_t>(h.keys.size()));
      }
      global.batches.push_back(h);
      global.grads.push_back(testing::random_grad(2 * c.slot_num * c.vec_size, rng));
      global.training.push_back(true);
    }
    Problem lazy = global;
    lazy.optimizer.update_type = optim::UpdateType::LazyGlobal;
    const auto g = testing::run_ranks(global, 2);
    const auto l = testing::run_ranks(lazy, 2);
    testing::expect_same_run(l, g, 1e-5,
                             std::string("LazyGlobal vs Global, ") + optim::optimizer_name(ot));
  }
}

TEST(SparseEmbedding, SaveLoadGivesIdenticalTablesAndNextStep) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir scratch;
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    const auto c = base_config(type, Combiner::Sum, DType::U32, rng());
    const auto opt =
        testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal);
    Problem p = make_problem(c, opt, 4, 12, rng);
    const auto dir = scratch / embedding_type_name(type);
    // Train 3 steps with 2 ranks and save; then a 3-rank job loads and runs step 4, while the
    // 2-rank job runs step 4 itself. Both must agree, and the loaded tables must be identical.
    std::vector<float> out_saver, out_loader;
    EmbeddingSnapshot snap_saved, snap_loaded, after_saver, after_loader;
    auto job = [&](int D, bool train_and_save, std::vector<float>& out, EmbeddingSnapshot* loaded,
                   EmbeddingSnapshot& after) {
      auto comms = distributed::make_in_process_communicators(D, 60.0);
      out.assign(12 * c.slot_num * c.vec_size, 0.0f);
      ember::testing::run_on_threads(D, [&](int r) {
        SparseEmbedding emb(c, opt, *comms[r]);
        auto step = [&](int t, bool keep) {
          const auto& h = p.batches[t];
          const std::int64_t Bl = 12 / D, S = c.slot_num, V = c.vec_size;
          Tensor keys = Tensor::from_vector(h.keys).to(DType::U32);
          CsrTensor csr(Tensor::from_vector(h.offsets), keys,
                        static_cast<std::int64_t>(h.keys.size()));
          const Tensor o = emb.forward(csr, r * Bl, Bl);
          if (keep) {
            const auto v = o.to_vector<float>();
            std::copy(v.begin(), v.end(), out.begin() + r * Bl * S * V);
          }
          std::vector<float> g(p.grads[t].begin() + r * Bl * S * V,
                               p.grads[t].begin() + (r + 1) * Bl * S * V);
          emb.backward(Tensor::from_vector(g, Shape{Bl, S, V}));
          emb.update();
        };
        if (train_and_save) {
          for (int t = 0; t < 3; ++t)
            step(t, false);
          emb.save(dir);
          auto s = emb.snapshot();
          if (r == 0) snap_saved = s;
        } else {
          emb.load(dir);
          auto s = emb.snapshot();
          if (r == 0 && loaded != nullptr) *loaded = s;
        }
        step(3, true);
        auto s = emb.snapshot();
        if (r == 0) after = s;
      });
    };
    job(2, true, out_saver, nullptr, after_saver);
    job(3, false, out_loader, &snap_loaded, after_loader);
    const std::string what = embedding_type_name(type);
    EXPECT_EQ(snap_loaded.keys, snap_saved.keys) << what;
    EXPECT_EQ(snap_loaded.vectors, snap_saved.vectors) << what;
    EXPECT_EQ(snap_loaded.states, snap_saved.states) << what;
    EXPECT_EQ(snap_loaded.step, 3) << what;
    EXPECT_LE(testing::max_relative_error(out_loader, out_saver), 1e-6) << what;
    EXPECT_EQ(after_loader.keys, after_saver.keys) << what;
    EXPECT_LE(testing::max_relative_error(after_loader.vectors, after_saver.vectors), 1e-6) << what;
    // No temporary directory is left behind.
    for (const auto& entry : std::filesystem::directory_iterator(scratch.path())) {
      EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
    }
  }
}

// Runs `body` on one host rank.
void single_rank(const std::function<void(distributed::Communicator&)>& body) {
  auto comms = distributed::make_in_process_communicators(1);
  body(*comms[0]);
}

CsrTensor csr_of(const std::vector<std::int64_t>& offsets, const std::vector<std::int64_t>& keys,
                 DType dtype) {
  return CsrTensor(
      Tensor::from_vector(offsets),
      Tensor::from_vector(keys.empty() ? std::vector<std::int64_t>{0} : keys).to(dtype),
      static_cast<std::int64_t>(keys.size()));
}

TEST(SparseEmbeddingErrors, FullTableNamesLayerNumbersAndKey) {
  single_rank([](distributed::Communicator& comm) {
    EmbeddingConfig c =
        base_config(EmbeddingType::DistributedSlotHash, Combiner::Sum, DType::I64, 1);
    c.slot_num = 1;
    c.max_vocabulary_size_per_gpu = 5;
    SparseEmbedding emb(
        c, testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local), comm);
    try {
      emb.forward(csr_of({0, 4, 8}, {1, 2, 3, 4, 5, 6, 7, 8}, DType::I64), 0, 2);
      FAIL() << "a full table must be an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'emb'"), std::string::npos) << m;
      EXPECT_NE(m.find("capacity 5"), std::string::npos) << m;
      EXPECT_NE(m.find("3 new key(s)"), std::string::npos) << m;
      EXPECT_NE(m.find("max_vocabulary_size_per_gpu"), std::string::npos) << m;
    }
  });
}

TEST(SparseEmbeddingErrors, OneHotKeyOutsideItsSlot) {
  single_rank([](distributed::Communicator& comm) {
    EmbeddingConfig c =
        base_config(EmbeddingType::LocalizedSlotOneHot, Combiner::Sum, DType::U32, 1);
    c.slot_num = 2;
    c.slot_size_array = {4, 6};
    SparseEmbedding emb(
        c, testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local), comm);
    try {
      // Slot 1 spans keys [4, 10); key 2 belongs to slot 0.
      emb.forward(csr_of({0, 1, 2}, {1, 2}, DType::U32), 0, 1);
      FAIL();
    } catch (const DataError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("key 2"), std::string::npos) << m;
      EXPECT_NE(m.find("slot 1"), std::string::npos) << m;
      EXPECT_NE(m.find("[4, 10)"), std::string::npos) << m;
    }
  });
}

TEST(SparseEmbeddingErrors, BadCallsAreClearErrors) {
  auto comms = distributed::make_in_process_communicators(1);
  EmbeddingConfig c = base_config(EmbeddingType::DistributedSlotHash, Combiner::Sum, DType::U32, 1);
  c.slot_num = 2;
  SparseEmbedding emb(
      c, testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local), *comms[0]);
  const CsrTensor batch = csr_of({0, 1, 1, 2, 3}, {1, 2, 3}, DType::U32);
  EXPECT_THROW(emb.forward(batch, 1, 2), Error);                                  // wrong share
  EXPECT_THROW(emb.forward(csr_of({0, 1, 2}, {1, 2}, DType::I64), 0, 1), Error);  // key dtype
  EXPECT_THROW(emb.forward(csr_of({0, 1, 2, 3}, {1, 2, 3}, DType::U32), 0, 1), Error);  // rows
  EXPECT_THROW(emb.backward(Tensor::zeros({2, 2, 6})), Error);  // no forward yet
  emb.forward(batch, 0, 2);
  EXPECT_THROW(emb.backward(Tensor::zeros({2, 3, 6})), Error);  // wrong shape
  EXPECT_THROW(emb.update(), Error);                            // no backward
  emb.backward(Tensor::zeros({2, 2, 6}));
  emb.update();
  EXPECT_EQ(emb.step(), 1);
  ember::testing::ScratchDir scratch;
  EXPECT_THROW(emb.load(scratch / "missing"), Error);
  // A vectors file of the wrong size names the file and the numbers.
  emb.save(scratch / "model");
  { std::ofstream(scratch / "model" / "vectors", std::ios::binary | std::ios::trunc) << "abc"; }
  try {
    emb.load(scratch / "model");
    FAIL();
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("vectors"), std::string::npos) << m;
    EXPECT_NE(m.find("3 bytes"), std::string::npos) << m;
  }
}

TEST(EmbeddingConfig, ParsesHugeCtrLayers) {
  const auto layer = nlohmann::json::parse(R"({
    "name": "sparse_embedding1", "type": "DistributedSlotSparseEmbeddingHash",
    "bottom": "data1", "top": "sparse_embedding1",
    "sparse_embedding_hparam": {"embedding_vec_size": 16, "combiner": 0,
                                "workspace_size_per_gpu_in_mb": 8},
    "optimizer": {"type": "Adam", "update_type": "LazyGlobal", "adam_hparam": {"learning_rate": 0.01}}
  })");
  const EmbeddingConfig c = parse_embedding_layer(layer, {"data1", 26, 30}, DType::I64, 7);
  EXPECT_EQ(c.type, EmbeddingType::DistributedSlotHash);
  EXPECT_EQ(c.combiner, Combiner::Sum);
  EXPECT_EQ(c.vec_size, 16);
  EXPECT_EQ(c.slot_num, 26);
  EXPECT_EQ(c.configured_capacity(), 8 * 1048576 / (4 * 16));
  ASSERT_TRUE(c.optimizer.has_value());
  EXPECT_EQ(c.optimizer->update_type, optim::UpdateType::LazyGlobal);
  const auto onehot = parse_embedding_layer(nlohmann::json::parse(R"({
    "name": "e", "type": "LocalizedSlotSparseEmbeddingOneHot", "bottom": ["d"], "top": "e",
    "sparse_embedding_hparam": {"embedding_vec_size": 4, "combiner": "mean",
                                "slot_size_array": [3, 5]}})"),
                                            {"d", 2, 2}, DType::U32, 1);
  EXPECT_EQ(onehot.combiner, Combiner::Mean);
  EXPECT_EQ(onehot.slot_size_array, (std::vector<std::int64_t>{3, 5}));
}

TEST(EmbeddingConfig, ErrorsNameLayerAndKey) {
  auto expect_error = [](const char* text, const char* needle) {
    try {
      parse_embedding_layer(nlohmann::json::parse(text), {"d", 2, 0}, DType::U32, 1);
      FAIL() << text;
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(needle), std::string::npos) << m;
      EXPECT_NE(m.find("'e'"), std::string::npos) << m;
    }
  };
  const char* hp = R"("bottom": "d", "top": "e", "name": "e")";
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 4, "workspace_size_per_gpu_in_mb": 1,
      "combinr": 0}})")
                   .c_str(),
               "combinr");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "extra": 1, "sparse_embedding_hparam": {"embedding_vec_size": 4,
      "workspace_size_per_gpu_in_mb": 1}})")
                   .c_str(),
               "extra");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 4}})")
                   .c_str(),
               "workspace_size_per_gpu_in_mb");
  expect_error((std::string("{") + hp + R"(, "type": "LocalizedSlotSparseEmbeddingOneHot",
      "sparse_embedding_hparam": {"embedding_vec_size": 4, "slot_size_array": [1, 2, 3]}})")
                   .c_str(),
               "slot_size_array");
  expect_error((std::string("{") + hp + R"(, "type": "HashEmbedding",
      "sparse_embedding_hparam": {"embedding_vec_size": 4}})")
                   .c_str(),
               "HashEmbedding");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 4, "combiner": "max",
      "workspace_size_per_gpu_in_mb": 1}})")
                   .c_str(),
               "combiner");
  // The configuration reader's format: the layer, its type and the key's path.
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 4, "workspace_size_per_gpu_in_mb": 1,
      "combinr": 0}})")
                   .c_str(),
               "layer 'e' (DistributedSlotSparseEmbeddingHash): unknown key "
               "\"sparse_embedding_hparam.combinr\" (did you mean "
               "\"sparse_embedding_hparam.combiner\"?)");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 4, "combiner": 2,
      "workspace_size_per_gpu_in_mb": 1}})")
                   .c_str(),
               "\"sparse_embedding_hparam.combiner\" must be \"sum\", \"mean\", 0 or 1, got 2");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 0, "workspace_size_per_gpu_in_mb": 1}})")
                   .c_str(),
               "\"sparse_embedding_hparam.embedding_vec_size\" must be >= 1, got 0");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"embedding_vec_size": 4, "workspace_size_per_gpu_in_mb": 1},
      "optimizer": {"type": "Adam", "adam_hparam": {"beta2": 1.5}}})")
                   .c_str(),
               "\"optimizer.adam_hparam.beta2\" must be in [0, 1), got 1.5");
  expect_error((std::string("{") + hp + R"(, "type": "DistributedSlotSparseEmbeddingHash",
      "sparse_embedding_hparam": {"workspace_size_per_gpu_in_mb": 1}})")
                   .c_str(),
               "\"sparse_embedding_hparam.embedding_vec_size\" is missing");
}

TEST(EmbeddingConfig, LoadFactorIsAcceptedAndIgnored) {
  const auto c = parse_embedding_layer(nlohmann::json::parse(R"({
    "name": "e", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "d", "top": "e",
    "sparse_embedding_hparam": {"embedding_vec_size": 4, "combiner": 1, "load_factor": 0.75,
                                "max_vocabulary_size_per_gpu": 100}})"),
                                       {"d", 2, 0}, DType::U32, 1);
  EXPECT_EQ(c.combiner, Combiner::Mean);
  EXPECT_EQ(c.configured_capacity(), 100);
}

}  // namespace
}  // namespace ember::embedding
