// An embedding's batch vectors in 16 bits (mixed precision) on the CPU, the reference of the GPU
// paths: forward_into an f16 / bf16 output is the f32 forward rounded once, and a 16-bit output
// gradient gives exactly what its f32 copy gives (it widens exactly); bad outputs and gradients
// are refused with their numbers.
#include <gtest/gtest.h>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/distributed/collectives.hpp"
#include "support/test_support.hpp"
#include "vector_dtype_support.hpp"

namespace ember::embedding {
namespace {

const std::vector<std::int64_t> kSlots = {3, 40, 7, 300};

testing::Problem problem(EmbeddingType type, DType table, optim::OptimizerType opt,
                         std::int64_t batch, int steps, std::mt19937_64& rng,
                         std::int64_t vec_size = 16) {
  testing::Problem p;
  p.config.name = "vectors";
  p.config.type = type;
  p.config.vec_size = vec_size;
  p.config.slot_num = static_cast<std::int64_t>(kSlots.size());
  p.config.max_vocabulary_size_per_gpu = 400;
  if (type != EmbeddingType::DistributedSlotHash) p.config.slot_size_array = kSlots;
  p.config.key_dtype = DType::I64;
  p.config.seed = rng();
  p.config.value_dtype = table;
  p.config.combiner = type == EmbeddingType::LocalizedSlotHash ? Combiner::Mean : Combiner::Sum;
  p.optimizer.type = opt;
  p.optimizer.schedule.base_lr = opt == optim::OptimizerType::Adam ? 0.05f : 0.3f;
  p.optimizer.initial_accu_value = 0.1f;
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(type == EmbeddingType::LocalizedSlotOneHot
                            ? testing::onehot_batch(batch, kSlots, rng)
                            : testing::random_batch(batch, kSlots, 3, rng));
    p.grads.push_back(testing::random_grad(batch * p.config.slot_num * vec_size, rng));
    p.training.push_back(t != 1);  // one evaluation step between training steps
  }
  return p;
}

const EmbeddingType kTypes[] = {EmbeddingType::LocalizedSlotOneHot,
                                EmbeddingType::LocalizedSlotHash,
                                EmbeddingType::DistributedSlotHash};

TEST(VectorDtypes, ForwardIntoA16BitOutputIsTheF32ForwardRounded) {
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : kTypes) {
    for (DType table : {DType::F32, DType::F16}) {
      for (std::int64_t batch : {0, 1, 7, 33}) {
        const testing::Problem p = problem(type, table, optim::OptimizerType::SGD, batch, 3, rng);
        const testing::DtypeRun wide =
            testing::run_with_dtypes(p, Place::host(), DType::F32, DType::F32);
        for (DType out : {DType::F16, DType::BF16}) {
          const std::string what =
              std::string(embedding_type_name(type)) + ", " + std::string(dtype_name(table)) +
              " table, " + std::string(dtype_name(out)) + " output, batch " + std::to_string(batch);
          const testing::DtypeRun got = testing::run_with_dtypes(p, Place::host(), out, DType::F32);
          for (std::size_t t = 0; t < got.outputs.size(); ++t) {
            testing::expect_same_bits(got.outputs[t], testing::round_through(wide.outputs[t], out),
                                      what + ", step " + std::to_string(t));
          }
          testing::expect_same_bits(got.snapshot.vectors, wide.snapshot.vectors, what);
        }
      }
    }
  }
}

TEST(VectorDtypes, SixteenBitGradientGivesWhatItsF32CopyGives) {
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : kTypes) {
    for (optim::OptimizerType opt :
         {optim::OptimizerType::SGD, optim::OptimizerType::AdaGrad, optim::OptimizerType::Adam}) {
      for (DType grad : {DType::F16, DType::BF16}) {
        testing::Problem p = problem(type, DType::F32, opt, 21, 3, rng);
        p.loss_scaler = 8.0f;
        const testing::DtypeRun got = testing::run_with_dtypes(p, Place::host(), grad, grad);
        for (auto& g : p.grads)
          g = testing::round_through(g, grad);
        const testing::DtypeRun want = testing::run_with_dtypes(p, Place::host(), grad, DType::F32);
        testing::expect_same_dtype_runs(got, want,
                                        std::string(embedding_type_name(type)) + " " +
                                            optim::optimizer_name(opt) + " " +
                                            std::string(dtype_name(grad)) + " gradient");
      }
    }
  }
}

// Several ranks move 16-bit outputs and gradients between them as they are (LocalizedSlot's
// all-to-all both ways, DistributedSlot's gradient all-gather; its forward sums in f32): the
// same bits as the f32 exchange rounded once, for every type, at an even width (moved as 32-bit
// words) and an odd one (which goes in f32), with ranks that hold no slot (3 ranks, 4 slots).
TEST(VectorDtypes, SeveralRanksExchange16BitVectorsAsTheF32ExchangeRounded) {
  auto rng = ember::testing::make_rng();
  for (int ranks : {2, 3}) {
    for (EmbeddingType type : kTypes) {
      for (std::int64_t vec_size : {16, 7}) {
        for (DType dtype : {DType::F16, DType::BF16}) {
          const std::string what = std::string(embedding_type_name(type)) + ", " +
                                   std::to_string(ranks) + " ranks, width " +
                                   std::to_string(vec_size) + ", " + std::string(dtype_name(dtype));
          testing::expect_16bit_exchange_is_the_f32_one_rounded(
              problem(type, DType::F32, optim::OptimizerType::Adam, 5 * ranks, 3, rng, vec_size),
              ranks, false, dtype, what);
        }
      }
    }
  }
}

TEST(VectorDtypes, BadOutputsAndGradientsAreRefused) {
  auto rng = ember::testing::make_rng();
  const testing::Problem p =
      problem(EmbeddingType::LocalizedSlotOneHot, DType::F32, optim::OptimizerType::SGD, 4, 1, rng);
  const distributed::CommunicatorPtr comm = distributed::make_solo_communicator(Place::host());
  SparseEmbedding emb(p.config, p.optimizer, *comm);
  const testing::HostBatch& h = p.batches[0];
  const CsrTensor csr(Tensor::from_vector(h.offsets), Tensor::from_vector(h.keys),
                      static_cast<std::int64_t>(h.keys.size()));
  const std::int64_t S = p.config.slot_num, V = p.config.vec_size;
  EMBER_EXPECT_THROW_WITH(emb.forward_into(csr, 0, 4, Tensor::empty({4, S, V}, DType::I32)), Error,
                          "must be f32, f16 or bf16, got i32");
  EMBER_EXPECT_THROW_WITH(emb.forward_into(csr, 0, 4, Tensor::empty({4, S, V + 1}, DType::F16)),
                          Error, "embedding forward output");
  EMBER_EXPECT_THROW_WITH(
      emb.forward_into(csr, 0, 4, Tensor::empty({4, V, S}, DType::F16).transpose(1, 2)), Error,
      "must be contiguous");
  emb.forward_into(csr, 0, 4, Tensor::empty({4, S, V}, DType::BF16));
  EMBER_EXPECT_THROW_WITH(emb.backward(Tensor::zeros({4, S, V}, DType::F64)), Error,
                          "takes an f32, f16 or bf16 gradient, got f64");
  EMBER_EXPECT_THROW_WITH(emb.backward(Tensor::zeros({4, S, 2 * V}, DType::F16)), Error,
                          "the forward output's shape");
  emb.backward(Tensor::zeros({4, S, V}, DType::BF16));
  emb.update();
  EXPECT_EQ(emb.step(), 1);
}

}  // namespace
}  // namespace ember::embedding
