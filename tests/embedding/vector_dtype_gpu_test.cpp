// The GPU's pooling into f32 / f16 / bf16 outputs and its update from 16-bit output gradients,
// against the CPU: one-hot bags (DLRM's gather: the 8-columns-a-thread kernel), multi-hot bags
// and one entry per bag without offsets (the hybrid's gather kernel, with and without scales),
// every table x output type, odd and empty batches, and the widths that take the other kernels; the
// update from a 16-bit gradient bit for bit what its f32 copy gives; the layer (forward_into,
// backward with a 16-bit gradient, update) against the CPU layer.
#include <gtest/gtest.h>
#include <algorithm>
#include <numeric>

#include <cstring>

#include "embedding_reference_support.hpp"
#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "support/test_support.hpp"
#include "vector_dtype_support.hpp"

namespace ember::embedding {
namespace {

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = t.to(Place::host());
  std::vector<std::uint8_t> out(h.numel() * dtype_size(h.dtype()));
  if (!out.empty()) std::memcpy(out.data(), h.data(), out.size());
  return out;
}

// A table of `rows` x `dim` random values of `dtype` at `place` (the same values at each place
// for the same seed).
Tensor random_table(std::int64_t rows, std::int64_t dim, DType dtype, std::uint64_t seed,
                    Place place) {
  return Tensor::uniform({rows, dim}, -1.0, 1.0, seed, DType::F32, Place::host())
      .to(dtype)
      .to(place);
}

struct PoolCase {
  std::vector<std::int64_t> offsets, rows;
  std::vector<float> scale;
};

// The bags: one-hot (one row each, a few absent: -1; the short-bag kernel), multi-hot (0..5
// rows, mean: pool8 and the others), sparse (0 to 3 rows, 0.9 a bag on average, mean: the
// short-bag kernel's further entries), and one-hot without offsets, without scales too unless
// scaled (the hybrid's gather).
enum class Bags { OneHot, MultiHot, Sparse, NoOffsets, NoOffsetsScaled };

std::int64_t entries_of_bag(Bags kind, std::mt19937_64& rng) {
  if (kind == Bags::MultiHot) return static_cast<std::int64_t>(rng() % 6);
  if (kind != Bags::Sparse) return 1;
  const int u = static_cast<int>(rng() % 10);
  return u < 4 ? 0 : (u < 8 ? 1 : 2 + u % 2);
}

PoolCase pool_case(std::int64_t bags, std::int64_t table_rows, Bags kind, std::mt19937_64& rng) {
  PoolCase c;
  c.offsets.push_back(0);
  const bool onehot = kind != Bags::MultiHot && kind != Bags::Sparse;
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t n = entries_of_bag(kind, rng);
    for (std::int64_t k = 0; k < n; ++k) {
      const bool absent = rng() % 50 == 0;
      c.rows.push_back(absent ? -1 : static_cast<std::int64_t>(rng() % table_rows));
    }
    c.offsets.push_back(static_cast<std::int64_t>(c.rows.size()));
    c.scale.push_back(onehot ? 1.0f : (n == 0 ? 0.0f : 1.0f / static_cast<float>(n)));
  }
  return c;
}

// The pooled output of `c` at `place`, written `shift` elements into its buffer (a shift moves
// the output off the 16-byte alignment the widest kernel needs).
std::vector<std::uint8_t> pool_at(const PoolCase& c, std::int64_t bags, const Tensor& host_table,
                                  DType out_dtype, std::int64_t shift, Place place, Bags kind) {
  const std::int64_t V = host_table.size(1);
  const Tensor table = host_table.to(place);
  const Tensor offsets = Tensor::from_vector(c.offsets, place);
  const Tensor rows =
      Tensor::from_vector(c.rows.empty() ? std::vector<std::int64_t>{0} : c.rows, place);
  const Tensor scale =
      Tensor::from_vector(c.scale.empty() ? std::vector<float>{0.0f} : c.scale, place);
  const Tensor buffer = Tensor::full({bags * V + shift}, -7.0, out_dtype, place);
  const Tensor out = buffer.slice(0, shift, shift + bags * V);
  const bool no_offsets = kind == Bags::NoOffsets || kind == Bags::NoOffsetsScaled;
  kernels::on(place).pool(no_offsets ? nullptr : offsets.data<std::int64_t>(),
                          rows.data<std::int64_t>(),
                          kind == Bags::NoOffsets ? nullptr : scale.data<float>(), bags,
                          static_cast<std::int64_t>(c.rows.size()),
                          kernels::Values{table.data(), testing::value_type_of(table.dtype())}, V,
                          out.data(), testing::value_type_of(out_dtype),
                          place.is_cuda() ? current_stream(place.device()) : nullptr);
  return bytes_of(out);
}

void check_pool(Bags kind) {
  auto rng = ember::testing::make_rng(static_cast<int>(kind) + 1);
  const std::int64_t table_rows = 5000;
  // 128: 8 or 16 columns a thread; 12: 4 columns a lane; 11 (DeepFM's), 7 and 1: a thread per
  // column of the flattened output.
  for (std::int64_t dim : {128, 64, 8, 12, 11, 7, 1}) {
    for (DType table_dtype : {DType::F32, DType::F16, DType::BF16}) {
      const Tensor table = random_table(table_rows, dim, table_dtype, rng(), Place::host());
      // Row 0 is -0 throughout: a bag of it alone pools to +0 (a sum from 0), on both sides.
      table.slice(0, 0, 1).copy_from(Tensor::full({1, dim}, -0.0, table_dtype, Place::host()));
      for (std::int64_t bags : {0, 1, 7, 1023, 65537}) {
        // The other widths: the small batches, and 11 at a full batch.
        if (dim != 128 && dim != 11 && bags == 65537) continue;
        PoolCase c = pool_case(bags, table_rows, kind, rng);
        if (kind == Bags::NoOffsetsScaled) {
          for (auto& x : c.scale)
            x = static_cast<float>(rng() % 1000) / 250.0f;
        }
        if (kind != Bags::MultiHot && kind != Bags::Sparse) {
          for (std::size_t i = 0; i < c.rows.size(); i += 97)
            c.rows[i] = c.rows[i] < 0 ? -1 : 0;  // row 0's -0
        }
        for (DType out : {DType::F32, DType::F16, DType::BF16}) {
          for (std::int64_t shift : {0, 4}) {
            const char* names[] = {"one-hot", "multi-hot", "sparse", "no offsets",
                                   "no offsets, scaled"};
            const std::string what =
                std::string(names[static_cast<int>(kind)]) + ", dim " + std::to_string(dim) + ", " +
                std::string(dtype_name(table_dtype)) + " table, " + std::string(dtype_name(out)) +
                " output, " + std::to_string(bags) + " bags, shift " + std::to_string(shift);
            const auto gpu = pool_at(c, bags, table, out, shift, Place::cuda(0), kind);
            const auto cpu = pool_at(c, bags, table, out, shift, Place::host(), kind);
            ASSERT_EQ(gpu.size(), cpu.size()) << what;
            // Entry order and one rounding on both sides: the same bits.
            EXPECT_TRUE(gpu == cpu) << what;
          }
        }
      }
    }
  }
}

TEST(VectorDtypesGpu, OneHotPoolingMatchesTheCpuBitwise) {
  EMBER_REQUIRE_GPU();
  check_pool(Bags::OneHot);
}

TEST(VectorDtypesGpu, MultiHotPoolingMatchesTheCpuBitwise) {
  EMBER_REQUIRE_GPU();
  check_pool(Bags::MultiHot);
  check_pool(Bags::Sparse);
}

TEST(VectorDtypesGpu, PoolingWithoutOffsetsMatchesTheCpuBitwise) {
  EMBER_REQUIRE_GPU();
  check_pool(Bags::NoOffsets);
  check_pool(Bags::NoOffsetsScaled);
}

// update_rows on one batch at `place`, the gradient a tensor of grad_dtype; returns the table.
std::vector<float> update_at(const testing::UpdateBatch& b, const std::vector<float>& grad,
                             DType grad_dtype, const std::vector<float>& table,
                             optim::OptimizerType type, Place place) {
  const StreamHandle s = place.is_cuda() ? current_stream(place.device()) : nullptr;
  const Tensor scale = Tensor::from_vector(b.scale, place);
  const Tensor g = Tensor::from_vector(grad).to(grad_dtype).to(place);
  Tensor w = Tensor::from_vector(table, place);
  Tensor s0 = Tensor::full({b.rows_in_table * b.vec_size}, 0.1, DType::F32, place);
  optim::OptimizerConfig o;
  o.type = type;
  o.initial_accu_value = 0.1f;
  const optim::UpdateStep u = optim::make_update_step(o, 1e-2f, 1, 8.0f);
  const testing::SegmentedBatch seg = testing::segment_batch(b, place, s);
  const kernels::RowStates st{type == optim::OptimizerType::SGD ? nullptr : s0.data<float>(),
                              nullptr, nullptr};
  kernels::on(place).update_rows(
      seg.segments(), scale.data<float>(), g.data(), testing::value_type_of(grad_dtype),
      kernels::Values{w.data<float>()}, b.vec_size, st, 1, u, nullptr, s);
  return w.to_vector<float>();
}

TEST(VectorDtypesGpu, UpdateFromA16BitGradientIsItsF32CopysBitwiseAndTheCpus) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  const std::int64_t C = kernels::kGradientChunk;
  // Rows of one entry up to several hot chunks (the partial-sum path).
  const std::vector<std::int64_t> lengths = {1, 2, 7, C, C + 1, 2 * C + 1, 1023, 4097};
  // 4 columns a lane, 1 column a lane, and the narrow path (16 lanes an entry; an entry a lane).
  for (std::int64_t dim : {128, 17, 11, 16, 1}) {
    const testing::UpdateBatch b = testing::random_update_batch(lengths, 5, 1023, dim, rng);
    std::vector<float> table(b.rows_in_table * dim);
    std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
    for (auto& x : table)
      x = dist(rng);
    for (DType grad : {DType::F16, DType::BF16}) {
      const std::vector<float> rounded = testing::round_through(b.grad, grad);
      for (optim::OptimizerType type : {optim::OptimizerType::SGD, optim::OptimizerType::AdaGrad}) {
        const std::string what = "dim " + std::to_string(dim) + ", " +
                                 std::string(dtype_name(grad)) + " gradient, " +
                                 optim::optimizer_name(type);
        const auto gpu = update_at(b, b.grad, grad, table, type, Place::cuda(0));
        const auto gpu_copy = update_at(b, rounded, DType::F32, table, type, Place::cuda(0));
        const auto cpu = update_at(b, b.grad, grad, table, type, Place::host());
        testing::expect_same_bits(gpu, gpu_copy, what + " (GPU: 16-bit vs its f32 copy)");
        // The sums are the CPU's bit for bit; the step may fuse a multiply-add.
        EXPECT_LE(testing::max_relative_error(gpu, cpu), 1e-5) << what;
      }
    }
  }
}

// update_rows as the hybrid sums its frequent rows' gradients (optim::store_sum_step on a zeroed
// table: each row's gradient sum, exactly), with the batch's scale or none.
std::vector<float> gradient_sums_at(const testing::UpdateBatch& b, DType grad_dtype, bool no_scale,
                                    Place place) {
  const StreamHandle s = place.is_cuda() ? current_stream(place.device()) : nullptr;
  const Tensor scale = Tensor::from_vector(b.scale, place);
  const Tensor g = Tensor::from_vector(b.grad).to(grad_dtype).to(place);
  Tensor sums = Tensor::zeros({b.rows_in_table, b.vec_size}, DType::F32, place);
  const testing::SegmentedBatch seg = testing::segment_batch(b, place, s);
  kernels::on(place).update_rows(seg.segments(), no_scale ? nullptr : scale.data<float>(), g.data(),
                                 testing::value_type_of(grad_dtype),
                                 kernels::Values{sums.data<float>()}, b.vec_size,
                                 kernels::RowStates{}, 1, optim::store_sum_step(), nullptr, s);
  return sums.to_vector<float>();
}

// The hybrid's frequent rows' sums (rows of thousands of entries, one entry a bag, no scale)
// and a scaled multi-hot batch, from f32, f16 and bf16 gradients: the GPU's are the CPU's bit
// for bit.
TEST(VectorDtypesGpu, GradientSumsAreTheCpusBitwise) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  const std::int64_t C = kernels::kGradientChunk;
  const std::vector<std::int64_t> lengths = {1, 2, 7, C, C + 1, 2 * C + 1, 4097, 30011, 65537};
  for (std::int64_t dim : {128, 17, 7, 1}) {
    std::int64_t entries = 1000;  // absent (infrequent) entries
    for (const std::int64_t l : lengths)
      entries += l;
    // One entry a bag (the hybrid), and several (a multi-hot batch).
    for (const std::int64_t bags : {entries, std::int64_t{1023}}) {
      testing::UpdateBatch b = testing::random_update_batch(lengths, 1000, bags, dim, rng);
      if (bags == entries) {
        std::iota(b.entry_bag.begin(), b.entry_bag.end(), std::int64_t{0});
      }
      for (DType grad : {DType::F32, DType::F16, DType::BF16}) {
        for (const bool no_scale : {true, false}) {
          const std::string what = "dim " + std::to_string(dim) + ", " + std::to_string(bags) +
                                   " bags, " + std::string(dtype_name(grad)) + " gradient" +
                                   (no_scale ? ", no scale" : ", scaled");
          const auto gpu = gradient_sums_at(b, grad, no_scale, Place::cuda(0));
          const auto cpu = gradient_sums_at(b, grad, no_scale, Place::host());
          testing::expect_same_bits(gpu, cpu, what);
        }
      }
    }
  }
}

testing::Problem layer_problem(EmbeddingType type, DType table, optim::OptimizerType opt,
                               std::int64_t batch, std::mt19937_64& rng) {
  // A 3-key slot: at 65537 samples its rows take ~22000 entries each (hot chunks).
  const std::vector<std::int64_t> slots = {3, 50, 1000, 7};
  testing::Problem p;
  p.config.name = "vectors_gpu";
  p.config.type = type;
  p.config.vec_size = 64;
  p.config.slot_num = static_cast<std::int64_t>(slots.size());
  p.config.max_vocabulary_size_per_gpu = 1100;
  if (type != EmbeddingType::DistributedSlotHash) p.config.slot_size_array = slots;
  p.config.key_dtype = DType::I64;
  p.config.seed = rng();
  p.config.value_dtype = table;
  p.config.combiner = type == EmbeddingType::LocalizedSlotOneHot ? Combiner::Sum : Combiner::Mean;
  p.optimizer.type = opt;
  p.optimizer.schedule.base_lr = opt == optim::OptimizerType::Adam ? 0.01f : 0.1f;
  p.loss_scaler = 4.0f;
  for (int t = 0; t < 3; ++t) {
    p.batches.push_back(type == EmbeddingType::LocalizedSlotOneHot
                            ? testing::onehot_batch(batch, slots, rng)
                            : testing::random_batch(batch, slots, 4, rng));
    p.grads.push_back(testing::random_grad(batch * p.config.slot_num * 64, rng));
    p.training.push_back(true);
  }
  return p;
}

// The layer on the GPU against the CPU layer: the first forward bit for bit (a gather and one
// rounding on both), the later ones and the model within the last bits of the optimizer step
// (and one 16-bit step where that moves a rounding); and the GPU from 16-bit gradients bit for
// bit what it gives from their f32 copies.
void check_layer(EmbeddingType type, optim::OptimizerType opt,
                 const std::vector<std::int64_t>& batches) {
  auto rng = ember::testing::make_rng(static_cast<std::uint64_t>(type) * 7 +
                                      static_cast<std::uint64_t>(opt));
  for (DType table : {DType::F32, DType::F16}) {
    for (DType vectors : {DType::F32, DType::F16, DType::BF16}) {
      for (std::int64_t batch : batches) {
        const std::string what =
            std::string(embedding_type_name(type)) + " " + optim::optimizer_name(opt) + ", " +
            std::string(dtype_name(table)) + " table, " + std::string(dtype_name(vectors)) +
            " outputs and gradients, batch " + std::to_string(batch);
        testing::Problem p = layer_problem(type, table, opt, batch, rng);
        const testing::DtypeRun gpu = testing::run_with_dtypes(p, Place::cuda(0), vectors, vectors);
        const testing::DtypeRun cpu = testing::run_with_dtypes(p, Place::host(), vectors, vectors);
        ASSERT_EQ(gpu.outputs.size(), cpu.outputs.size()) << what;
        testing::expect_same_bits(gpu.outputs[0], cpu.outputs[0], what + ", first output");
        const double model_tol = table == DType::F16 ? 3e-3 : 1e-4;
        // Later outputs are gathered from the updated rows, so they carry the model's tolerance
        // too: a fused multiply-add can move a 16-bit table's rounding by one unit (2^-11).
        const double out_tol = std::max(model_tol, vectors == DType::BF16  ? 2e-2
                                                   : vectors == DType::F16 ? 3e-3
                                                                           : 1e-4);
        for (std::size_t t = 1; t < gpu.outputs.size(); ++t) {
          EXPECT_LE(testing::max_relative_error(gpu.outputs[t], cpu.outputs[t]), out_tol)
              << what << ", output of step " << t;
        }
        EXPECT_EQ(gpu.snapshot.keys, cpu.snapshot.keys) << what;
        EXPECT_LE(testing::max_relative_error(gpu.snapshot.vectors, cpu.snapshot.vectors),
                  model_tol)
            << what;
        if (vectors == DType::F32) continue;
        for (auto& g : p.grads)
          g = testing::round_through(g, vectors);
        const testing::DtypeRun copy =
            testing::run_with_dtypes(p, Place::cuda(0), vectors, DType::F32);
        testing::expect_same_dtype_runs(gpu, copy, what + " (16-bit gradient vs its f32 copy)");
      }
    }
  }
}

TEST(VectorDtypesGpu, OneHotLayerMatchesTheCpu) {
  EMBER_REQUIRE_GPU();
  check_layer(EmbeddingType::LocalizedSlotOneHot, optim::OptimizerType::SGD,
              {0, 1, 7, 1023, 65537});
  check_layer(EmbeddingType::LocalizedSlotOneHot, optim::OptimizerType::Adam, {7, 1023});
}

TEST(VectorDtypesGpu, MultiHotLayerMatchesTheCpu) {
  EMBER_REQUIRE_GPU();
  check_layer(EmbeddingType::LocalizedSlotHash, optim::OptimizerType::SGD, {0, 7, 1023});
  check_layer(EmbeddingType::DistributedSlotHash, optim::OptimizerType::AdaGrad, {1, 1023});
}

// Every GPU as a rank (NCCL): 16-bit outputs and gradients cross between the GPUs as they are,
// which gives the bits of the f32 exchange rounded once (the CPU ranks' test,
// VectorDtypes.SeveralRanksExchange16BitVectorsAsTheF32ExchangeRounded, on the devices).
TEST(VectorDtypesGpu, AllDevicesExchange16BitVectorsAsTheF32ExchangeRounded) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  const int D = cuda_device_count();
  if (D < 2) GTEST_SKIP() << "one GPU visible: nothing crosses between devices";
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : {EmbeddingType::LocalizedSlotOneHot, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::DistributedSlotHash}) {
    for (DType dtype : {DType::F16, DType::BF16}) {
      const std::string what = std::string(embedding_type_name(type)) + " on " + std::to_string(D) +
                               " GPUs, " + std::string(dtype_name(dtype));
      testing::expect_16bit_exchange_is_the_f32_one_rounded(
          layer_problem(type, DType::F32, optim::OptimizerType::Adam, 1023 * D, rng), D, true,
          dtype, what);
    }
  }
}

// HybridSparseEmbedding's infrequent vectors the same way, in both directions, over NCCL.
TEST(VectorDtypesGpu, AllDevicesExchangeHybrid16BitVectorsAsTheF32ExchangeRounded) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  const int D = cuda_device_count();
  if (D < 2) GTEST_SKIP() << "one GPU visible: nothing crosses between devices";
  auto rng = ember::testing::make_rng();
  for (DType dtype : {DType::F16, DType::BF16}) {
    const std::string what =
        "hybrid on " + std::to_string(D) + " GPUs, " + std::string(dtype_name(dtype));
    testing::Problem hybrid = layer_problem(EmbeddingType::LocalizedSlotOneHot, DType::F32,
                                            optim::OptimizerType::Adam, 1023 * D, rng);
    hybrid.config.type = EmbeddingType::Hybrid;
    hybrid.config.hybrid.frequent_keys = testing::most_used_keys(hybrid, 64);
    testing::expect_16bit_exchange_is_the_f32_one_rounded(hybrid, D, true, dtype, what);
  }
}

}  // namespace
}  // namespace ember::embedding
