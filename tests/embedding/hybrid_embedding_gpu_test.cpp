// HybridSparseEmbedding on GPUs against the CPU: its steps (hybrid_rows, select_items,
// flagged_rows) exactly; the layer on one GPU against one CPU rank within rounding and against
// the one-hot layer on the same GPU bit for bit; on every GPU through NCCL against CPU ranks;
// batches prepared ahead; the data errors, raised one batch late.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

#define EMBER_REQUIRE_NCCL()                                                     \
  do {                                                                           \
    EMBER_REQUIRE_GPU();                                                         \
    if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL"; \
  } while (0)

const std::vector<std::int64_t> kSizes = {70, 200, 3, 500, 110};

template <class T>
std::vector<T> to_host(const Tensor& t) {
  return t.to(Place::host()).to_vector<T>();
}

// hybrid_rows of one rank on the CPU and the GPU, for batches of 1, 7, 1023 and 65537 samples
// with empty slots, frequent keys, a bag of two keys and a key outside its slot.
TEST(HybridKernelsGpu, HybridRowsMatchTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  const std::int64_t S = 5;
  std::vector<std::int64_t> begin(S + 1, 0);
  for (std::int64_t s = 0; s < S; ++s)
    begin[s + 1] = begin[s] + kSizes[s];
  for (std::int64_t B : {1, 7, 1023, 65537}) {
    for (int ranks : {1, 3}) {
      const int rank = ranks - 1;
      const std::int64_t Bl = B / ranks, offset = rank * Bl;
      testing::HostBatch h = testing::random_batch(B, kSizes, 1, rng);
      if (B > 7) {
        // Key 0 somewhere in the middle (outside its slot unless that is slot 0), and the last
        // bag (slot 4 of the last sample) with two keys more.
        if (!h.keys.empty()) h.keys[h.keys.size() / 2] = 0;
        h.keys.push_back(begin[S - 1]);
        h.keys.push_back(begin[S - 1] + 1);
        h.offsets.back() += 2;
      }
      const auto nnz = static_cast<std::int64_t>(h.keys.size());
      std::vector<std::int64_t> frequent(nnz);
      for (auto& f : frequent)
        f = rng() % 3 == 0 ? static_cast<std::int64_t>(rng() % 40) : -1;
      std::vector<std::int64_t> base(S, -1);
      std::int64_t owned = 0, next = 0;
      for (std::int64_t s = rank; s < S; s += ranks) {
        base[s] = next;
        next += kSizes[s];
        ++owned;
      }
      auto run = [&](Place place) {
        const Tensor offsets = Tensor::from_vector(h.offsets, place);
        const Tensor keys =
            Tensor::from_vector(h.keys.empty() ? std::vector<std::int64_t>{0} : h.keys, place);
        const Tensor freq =
            Tensor::from_vector(frequent.empty() ? std::vector<std::int64_t>{0} : frequent, place);
        const Tensor slot_begin = Tensor::from_vector(begin, place);
        const Tensor local_base = Tensor::from_vector(base, place);
        const Tensor frequent_rows =
            Tensor::full({std::max<std::int64_t>(Bl * S, 1)}, 7, DType::I64, place);
        const Tensor expect =
            Tensor::full({std::max<std::int64_t>(Bl * S, 1)}, 7, DType::I64, place);
        const Tensor owned_rows =
            Tensor::full({std::max<std::int64_t>(B * owned, 1)}, 7, DType::I64, place);
        const Tensor used = Tensor::zeros({40}, DType::I32, place);
        const Tensor local_used = Tensor::zeros({40}, DType::I32, place);
        const Tensor bad = Tensor::zeros({3}, DType::I64, place);
        kernels::HybridArgs a;
        a.offsets = offsets.data<std::int64_t>();
        a.frequent = freq.data<std::int64_t>();
        a.batch = B;
        a.slot_num = S;
        a.local_offset = offset;
        a.local_size = Bl;
        a.ranks = ranks;
        a.rank = rank;
        a.slot_begin = slot_begin.data<std::int64_t>();
        a.local_base = local_base.data<std::int64_t>();
        a.owned_count = owned;
        kernels::HybridRows out;
        out.frequent_rows = frequent_rows.data<std::int64_t>();
        out.expect = expect.data<std::int64_t>();
        out.owned_rows = owned_rows.data<std::int64_t>();
        out.used = used.data<std::int32_t>();
        out.local_used = local_used.data<std::int32_t>();
        out.bad = bad.data<std::int64_t>();
        StreamHandle s = place.is_cuda() ? current_stream(place.device()) : nullptr;
        kernels::on(place).keys<std::int64_t>().hybrid_rows(a, keys.data<std::int64_t>(), out, s);
        if (s != nullptr) synchronize_stream(s);
        return std::vector<std::vector<std::int64_t>>{
            to_host<std::int64_t>(frequent_rows),
            to_host<std::int64_t>(expect),
            to_host<std::int64_t>(owned_rows),
            to_host<std::int64_t>(bad),
            to_host<std::int64_t>(used.to(DType::I64)),
            to_host<std::int64_t>(local_used.to(DType::I64))};
      };
      const auto cpu = run(Place::host());
      const auto gpu = run(Place::cuda(0));
      for (std::size_t i = 0; i < cpu.size(); ++i)
        EXPECT_EQ(gpu[i], cpu[i]) << "output " << i << ", batch " << B << ", " << ranks;
      if (B > 7) {
        EXPECT_GE(cpu[3][0], 0) << "the batch has a bad bag";
      }
    }
  }
}

TEST(HybridKernelsGpu, SelectItemsAndFlaggedRowsMatchTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (std::int64_t n : {0, 1, 7, 1023, 65537, 1 << 21}) {
    std::vector<std::int64_t> values(std::max<std::int64_t>(n, 1)), order(values.size());
    for (auto& v : values)
      v = static_cast<std::int64_t>(rng() % 5) - 2;  // -2 .. 2
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::int64_t> bounds = {0, n / 3, n / 3, n};  // an empty segment too
    std::vector<std::int32_t> marks(values.size());
    for (auto& m : marks)
      m = static_cast<std::int32_t>(rng() % 3);
    for (bool ordered : {false, true}) {
      auto run = [&](Place place) {
        const Tensor v = Tensor::from_vector(values, place);
        const Tensor o = Tensor::from_vector(order, place);
        const Tensor b = Tensor::from_vector(bounds, place);
        const Tensor out =
            Tensor::full({static_cast<std::int64_t>(values.size())}, -9, DType::I64, place);
        const Tensor counts = Tensor::zeros({3}, DType::I64, place);
        const Tensor m = Tensor::from_vector(marks, place);
        const Tensor rows =
            Tensor::zeros({static_cast<std::int64_t>(marks.size())}, DType::I64, place);
        StreamHandle s = place.is_cuda() ? current_stream(place.device()) : nullptr;
        const auto& k = kernels::on(place);
        k.select_items(v.data<std::int64_t>(), ordered ? o.data<std::int64_t>() : nullptr, n, -1, 1,
                       b.data<std::int64_t>(), 3, out.data<std::int64_t>(),
                       counts.data<std::int64_t>(), s);
        k.flagged_rows(m.data<std::int32_t>(), n, rows.data<std::int64_t>(), s);
        if (s != nullptr) synchronize_stream(s);
        return std::vector<std::vector<std::int64_t>>{
            to_host<std::int64_t>(out), to_host<std::int64_t>(counts),
            n > 0 ? to_host<std::int64_t>(rows.slice(0, 0, n)) : std::vector<std::int64_t>{}};
      };
      const auto cpu = run(Place::host());
      const auto gpu = run(Place::cuda(0));
      const std::int64_t total = cpu[1][0] + cpu[1][1] + cpu[1][2];
      EXPECT_EQ(std::vector<std::int64_t>(gpu[0].begin(), gpu[0].begin() + total),
                std::vector<std::int64_t>(cpu[0].begin(), cpu[0].begin() + total))
          << n << (ordered ? " ordered" : "");
      EXPECT_EQ(gpu[1], cpu[1]) << n;
      EXPECT_EQ(gpu[2], cpu[2]) << n;
    }
  }
}

// ---- the layer ----

// Batches of up to one key per slot, `steps` of them (the third evaluates).
testing::Problem problem(optim::OptimizerType ot, optim::UpdateType ut, std::int64_t V,
                         std::int64_t batch, std::mt19937_64& rng) {
  testing::Problem p;
  EmbeddingConfig& c = p.config;
  c.name = "gpu_hybrid";
  c.type = EmbeddingType::LocalizedSlotOneHot;
  c.vec_size = V;
  c.slot_num = static_cast<std::int64_t>(kSizes.size());
  c.slot_size_array = kSizes;
  c.key_dtype = static_cast<int>(ot) % 2 ? DType::U32 : DType::I64;
  c.seed = rng();
  p.optimizer.type = ot;
  p.optimizer.update_type = ut;
  p.optimizer.schedule.base_lr = 0.05f;
  p.optimizer.momentum_factor = 0.9f;
  p.optimizer.ftrl_beta = 0.5f;
  p.optimizer.lambda1 = 0.001f;
  p.optimizer.lambda2 = 0.01f;
  for (int t = 0; t < 4; ++t) {
    p.batches.push_back(testing::random_batch(batch, kSizes, 1, rng));
    p.grads.push_back(testing::random_grad(batch * c.slot_num * V, rng));
    p.training.push_back(t != 2);
  }
  return p;
}

testing::Problem as_hybrid(testing::Problem p, std::size_t frequent) {
  p.config.hybrid.frequent_keys = testing::most_used_keys(p, frequent);
  p.config.type = EmbeddingType::Hybrid;
  return p;
}

using testing::kEveryOptimizer;
using testing::kEveryUpdateType;

TEST(HybridEmbeddingGpu, OneGpuMatchesTheCpuAndIsTheOneHotLayerBitForBit) {
  EMBER_REQUIRE_NCCL();
  auto rng = ember::testing::make_rng();
  for (optim::OptimizerType ot : kEveryOptimizer) {
    for (optim::UpdateType ut : kEveryUpdateType) {
      // vec_size 128 takes the 16-byte paths, 7 the scalar ones; 4096 samples make rows of
      // several hundred occurrences (more than one gradient chunk).
      const std::int64_t V = static_cast<int>(ot) % 2 == 0 ? 128 : 7;
      const testing::Problem onehot =
          problem(ot, ut, V, static_cast<int>(ut) == 1 ? 4096 : 64, rng);
      const testing::Problem hybrid = as_hybrid(onehot, 40);
      const std::string what =
          std::string(optim::optimizer_name(ot)) + "/" + optim::update_type_name(ut);
      const auto gpu = testing::run_ranks(hybrid, 1, true);
      testing::expect_same_run(gpu, testing::run_ranks(hybrid, 1, false), 1e-4, what);
      testing::expect_identical_runs(gpu, testing::run_ranks(onehot, 1, true),
                                     what + ": hybrid against one-hot on the GPU");
    }
  }
}

TEST(HybridEmbeddingGpu, AllDevicesMatchCpuRanks) {
  EMBER_REQUIRE_NCCL();
  const int D = cuda_device_count();
  auto rng = ember::testing::make_rng();
  for (optim::OptimizerType ot : {optim::OptimizerType::Adam, optim::OptimizerType::MomentumSGD}) {
    for (optim::UpdateType ut : kEveryUpdateType) {
      const testing::Problem onehot = problem(ot, ut, 128, 48 * D, rng);
      const testing::Problem hybrid = as_hybrid(onehot, 60);
      const std::string what = std::string(optim::optimizer_name(ot)) + "/" +
                               optim::update_type_name(ut) + " on " + std::to_string(D) + " GPU(s)";
      const auto gpu = testing::run_ranks(hybrid, D, true);
      testing::expect_same_run(gpu, testing::run_ranks(hybrid, D, false), 1e-4, what);
      testing::expect_same_run(gpu, testing::run_ranks(onehot, 1, false), 1e-4,
                               what + " against one-hot on one CPU rank");
    }
  }
}

// Batches prepared ahead on their own stream (prefetch()), told that their keys are ready by an
// event while the compute stream still writes memory freed on the host: the run prepared in
// each forward, bit for bit, on one GPU and on every GPU, for the one-hot layer and the hybrid.
TEST(HybridEmbeddingGpu, BatchesPreparedAheadTrainBitForBitAsInTheirForward) {
  EMBER_REQUIRE_NCCL();
  auto rng = ember::testing::make_rng();
  std::vector<int> device_counts = {1};
  if (cuda_device_count() > 1) device_counts.push_back(cuda_device_count());
  for (int D : device_counts) {
    for (optim::UpdateType ut : kEveryUpdateType) {
      const testing::Problem onehot = problem(optim::OptimizerType::Adam, ut, 128, 48 * D, rng);
      for (const testing::Problem& base : {onehot, as_hybrid(onehot, 60)}) {
        testing::Problem ahead = base;
        ahead.prefetch = true;
        ahead.busy_compute = true;
        const std::string what = std::string(embedding_type_name(base.config.type)) + " " +
                                 optim::update_type_name(ut) + " on " + std::to_string(D) +
                                 " GPU(s)";
        const testing::RunResult got = testing::run_ranks(ahead, D, true);
        testing::expect_identical_runs(got, testing::run_ranks(base, D, true), what);
        // Steps 1 and 3 (step 2 evaluates between the prefetch of step 3's batch and its
        // forward).
        EXPECT_EQ(got.forwards_prepared_ahead, std::vector<std::int64_t>(D, 2)) << what;
      }
    }
  }
}

TEST(HybridEmbeddingGpu, DataErrorsAreRaisedByTheNextCall) {
  EMBER_REQUIRE_NCCL();
  auto rng = ember::testing::make_rng();
  testing::Problem p =
      as_hybrid(problem(optim::OptimizerType::SGD, optim::UpdateType::Local, 8, 8, rng), 5);
  // Sample 3, slot 2 (keys [270, 273)) gets two keys.
  auto& b = p.batches[0];
  const std::int64_t bag = 3 * 5 + 2, at = b.offsets[bag], n = b.offsets[bag + 1] - at;
  b.keys.erase(b.keys.begin() + at, b.keys.begin() + at + n);
  b.keys.insert(b.keys.begin() + at, {270, 271});
  for (std::size_t i = bag + 1; i < b.offsets.size(); ++i)
    b.offsets[i] += 2 - n;
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, 1, true), DataError,
                          "slot 2 of sample 3 has 2 keys (the first 270); HybridSparseEmbedding "
                          "takes one key per slot, as in HugeCTR (found on the GPU in an earlier "
                          "batch");
  // The same batch second, prepared ahead on its own stream.
  testing::Problem ahead = p;
  std::swap(ahead.batches[0], ahead.batches[1]);
  ahead.prefetch = true;
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(ahead, 1, true), DataError,
                          "slot 2 of sample 3 has 2 keys (the first 270); HybridSparseEmbedding "
                          "takes one key per slot, as in HugeCTR (found on the GPU in an earlier "
                          "batch");
  // Without frequent keys the layer runs the one-hot kernels, which check the same.
  p.config.hybrid.frequent_keys.clear();
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, 1, true), DataError,
                          "slot 2 of sample 3 has more than one key (the second 271); "
                          "HybridSparseEmbedding takes one key per slot, as in HugeCTR (found on "
                          "the GPU in an earlier batch");
}

}  // namespace
}  // namespace ember::embedding
