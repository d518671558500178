// f16 and bf16 embedding tables on a GPU against the CPU: pooling bitwise, the update kernels
// (both widths of access, hot rows, every optimizer, both roundings) within one 16-bit step of
// the CPU, and the layer for every type x optimizer x update type.
#include <gtest/gtest.h>

#include <cstring>

#include "embedding_reference_support.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using kernels::Rounding;
using kernels::ValueType;

Tensor bits_tensor(const std::vector<std::uint16_t>& bits, DType dtype, Place place) {
  Tensor h = Tensor::empty({static_cast<std::int64_t>(bits.size())}, dtype, Place::host());
  if (!bits.empty()) std::memcpy(h.data(), bits.data(), bits.size() * 2);
  return h.to(place);
}

std::vector<std::uint16_t> tensor_bits(const Tensor& t) {
  const Tensor h = t.to(Place::host());
  std::vector<std::uint16_t> bits(h.numel());
  if (!bits.empty()) std::memcpy(bits.data(), h.data(), bits.size() * 2);
  return bits;
}

template <class V>
std::vector<std::uint16_t> random_bits(std::int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-0.08f, 0.08f);
  std::vector<std::uint16_t> out(n);
  for (auto& b : out)
    b = V(dist(rng)).bits;
  return out;
}

struct Run {
  std::vector<std::uint16_t> values;
  std::vector<float> state;
  std::vector<float> pooled;
};

// Pools and updates `values` (a 16-bit table) with the batch at `place`.
Run run_half(const testing::UpdateBatch& b, DType dtype, Rounding rounding,
             const optim::UpdateStep& u, const std::vector<std::uint16_t>& values,
             const std::vector<float>& state, bool cuda) {
  const Place place = cuda ? Place::cuda(0) : Place::host();
  const StreamHandle s = cuda ? current_stream(0) : nullptr;
  const auto n = static_cast<std::int64_t>(b.rows.size());
  const std::int64_t V = b.vec_size;
  const Tensor rows = Tensor::from_vector(b.rows, place);
  const Tensor entry_bag = Tensor::from_vector(b.entry_bag, place);
  const Tensor scale = Tensor::from_vector(b.scale, place);
  const Tensor grad = Tensor::from_vector(b.grad, place);
  Tensor sorted = Tensor::empty({std::max<std::int64_t>(n, 1)}, DType::I32, place);
  Tensor unique = Tensor::empty({std::max<std::int64_t>(n, 1)}, DType::I64, place);
  Tensor offsets = Tensor::empty({n + 1}, DType::I64, place);
  Tensor count = Tensor::empty({1}, DType::I64, place);
  Tensor w = bits_tensor(values, dtype, place);
  Tensor s0 = Tensor::from_vector(state, place);
  const kernels::Values table{w.data(), dtype == DType::F16 ? ValueType::F16 : ValueType::BF16,
                              rounding, kernels::rounding_seed(5)};
  const kernels::KernelTable& steps = kernels::on(place);
  // Pooling: bags in entry order (the batch's entries grouped by bag as the CSR would).
  std::vector<std::int64_t> bag_offsets(b.bags + 1, 0), bag_rows;
  for (std::int64_t bag = 0; bag < b.bags; ++bag) {
    for (std::int64_t e = 0; e < n; ++e) {
      if (b.entry_bag[e] == bag) bag_rows.push_back(b.rows[e]);
    }
    bag_offsets[bag + 1] = static_cast<std::int64_t>(bag_rows.size());
  }
  const Tensor pool_offsets = Tensor::from_vector(bag_offsets, place);
  const Tensor pool_rows =
      Tensor::from_vector(bag_rows.empty() ? std::vector<std::int64_t>{0} : bag_rows, place);
  Tensor pooled = Tensor::empty({b.bags, V}, DType::F32, place);
  steps.pool(pool_offsets.data<std::int64_t>(), pool_rows.data<std::int64_t>(), scale.data<float>(),
             b.bags, static_cast<std::int64_t>(bag_rows.size()), table, V, pooled.data<float>(),
             ValueType::F32, s);
  steps.segments(rows.data<std::int64_t>(), entry_bag.data<std::int64_t>(), n, b.rows_in_table,
                 sorted.data<std::int32_t>(), unique.data<std::int64_t>(),
                 offsets.data<std::int64_t>(), count.data<std::int64_t>(), s);
  // Adam keeps two states per weight; the others at most one.
  Tensor s1 = Tensor::from_vector(state, place);
  const kernels::RowStates st{u.type == optim::OptimizerType::SGD ? nullptr : s0.data<float>(),
                              u.type == optim::OptimizerType::Adam ? s1.data<float>() : nullptr,
                              nullptr};
  steps.update_rows(kernels::Segments{sorted.data<std::int32_t>(), unique.data<std::int64_t>(),
                                      offsets.data<std::int64_t>(), count.data<std::int64_t>(), n},
                    scale.data<float>(), grad.data<float>(), ValueType::F32, table, V, st, 2, u,
                    nullptr, s);
  Run run;
  run.pooled = pooled.to_vector<float>();
  run.values = tensor_bits(w);
  run.state = s0.to_vector<float>();
  if (u.type == optim::OptimizerType::Adam) {
    const std::vector<float> second = s1.to_vector<float>();
    run.state.insert(run.state.end(), second.begin(), second.end());
  }
  return run;
}

template <class V>
float widen_bits(std::uint16_t b) {
  return static_cast<float>(V::from_bits(b));
}

template <class V>
void check_update(DType dtype, std::mt19937_64& rng) {
  const std::int64_t C = kernels::kGradientChunk;
  const std::vector<std::int64_t> lengths = {1, 2, 7, C, C + 1, 2 * C + 1, 1023, 4097};
  for (std::int64_t dim : {128, 7, 260, 1, 16}) {
    const testing::UpdateBatch b = testing::random_update_batch(lengths, 5, 300, dim, rng);
    const auto values = random_bits<V>(b.rows_in_table * dim, rng);
    const std::vector<float> state(b.rows_in_table * dim, 0.1f);
    for (optim::OptimizerType ot :
         {optim::OptimizerType::SGD, optim::OptimizerType::AdaGrad, optim::OptimizerType::Adam}) {
      optim::OptimizerConfig o;
      o.type = ot;
      o.initial_accu_value = 0.1f;
      const optim::UpdateStep u = optim::make_update_step(o, 1e-3f, 2, 8.0f);
      for (Rounding rounding : {Rounding::Nearest, Rounding::Stochastic}) {
        const std::string what = std::string(dtype_name(dtype)) + " dim " + std::to_string(dim) +
                                 " " + optim::optimizer_name(ot) + " " +
                                 kernels::rounding_name(rounding);
        const Run cpu = run_half(b, dtype, rounding, u, values, state, false);
        const Run gpu = run_half(b, dtype, rounding, u, values, state, true);
        EXPECT_EQ(gpu.pooled, cpu.pooled) << what;  // widened exactly, summed in entry order
        ASSERT_EQ(gpu.values.size(), cpu.values.size());
        std::int64_t differ = 0;
        for (std::size_t i = 0; i < cpu.values.size(); ++i) {
          if (gpu.values[i] == cpu.values[i]) continue;
          ++differ;
          // The optimizer step may differ in the last f32 bit (fused multiply-adds), which can
          // move a rounding to the neighbouring 16-bit value, never further.
          const int step = std::abs(static_cast<int>(gpu.values[i] & 0x7fff) -
                                    static_cast<int>(cpu.values[i] & 0x7fff));
          ASSERT_LE(step, 1) << what << " element " << i << ": " << widen_bits<V>(gpu.values[i])
                             << " vs " << widen_bits<V>(cpu.values[i]);
        }
        EXPECT_LE(differ, static_cast<std::int64_t>(cpu.values.size() / 100 + 1)) << what;
        EXPECT_LE(testing::max_relative_error(gpu.state, cpu.state), 1e-5) << what;
      }
    }
  }
}

TEST(HalfEmbeddingGpu, PoolAndUpdateMatchTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_update<Half>(DType::F16, rng);
  check_update<BFloat16>(DType::BF16, rng);
}

TEST(HalfEmbeddingGpu, LayerMatchesCpuForEveryTypeOptimizerAndUpdateType) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  const std::vector<std::int64_t> slots = {7, 20, 3, 50, 11};
  for (DType dt : {DType::F16, DType::BF16}) {
    const double tol = dt == DType::F16 ? 4e-3 : 3e-2;
    for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                               EmbeddingType::LocalizedSlotOneHot}) {
      for (optim::OptimizerType ot : {optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD,
                                      optim::OptimizerType::Nesterov, optim::OptimizerType::Adam,
                                      optim::OptimizerType::AdaGrad}) {
        for (optim::UpdateType ut :
             {optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
          testing::Problem p;
          p.config.name = "emb16";
          p.config.type = type;
          p.config.vec_size = 8;
          p.config.slot_num = static_cast<std::int64_t>(slots.size());
          p.config.max_vocabulary_size_per_gpu = 200;
          if (type != EmbeddingType::DistributedSlotHash) p.config.slot_size_array = slots;
          p.config.key_dtype = DType::I64;
          p.config.seed = rng();
          p.config.value_dtype = dt;
          p.optimizer.type = ot;
          p.optimizer.update_type = ut;
          p.optimizer.schedule.base_lr = ot == optim::OptimizerType::Adam ? 0.05f : 0.3f;
          p.optimizer.momentum_factor = 0.8f;
          p.optimizer.initial_accu_value = 0.1f;
          for (int t = 0; t < 4; ++t) {
            p.batches.push_back(testing::random_batch(16, slots, 3, rng));
            p.grads.push_back(testing::random_grad(16 * p.config.slot_num * 8, rng));
            p.training.push_back(true);
          }
          const std::string what = std::string(dtype_name(dt)) + " " + embedding_type_name(type) +
                                   " " + optim::optimizer_name(ot) + " " +
                                   optim::update_type_name(ut);
          testing::expect_same_run(testing::run_ranks(p, 1, true), testing::run_ranks(p, 1, false),
                                   tol, what);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ember::embedding
