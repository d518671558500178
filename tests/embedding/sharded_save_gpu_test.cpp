// Saves on GPUs (one GPU: the file set; several, through NCCL: one shard per GPU) load on CPU
// ranks of another count and back, bit for bit, for every embedding type, device and host
// tables (the CPU reference of sharded_save_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "embedding_reference_support.hpp"
#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/embedding/embedding_config.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/storage_config.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;
namespace fs = std::filesystem;

const std::vector<std::int64_t> kSizes = {700, 1, 3000, 1023, 65};

Problem problem(EmbeddingType type, bool host, std::mt19937_64& rng) {
  Problem p;
  p.config.name = "emb";
  p.config.type = type == EmbeddingType::Hybrid ? EmbeddingType::LocalizedSlotOneHot : type;
  p.config.vec_size = 7;
  p.config.slot_num = static_cast<std::int64_t>(kSizes.size());
  p.config.max_vocabulary_size_per_gpu = 6000;
  if (type != EmbeddingType::DistributedSlotHash) p.config.slot_size_array = kSizes;
  p.config.key_dtype = DType::U32;
  p.config.seed = rng();
  p.optimizer = testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal);
  for (int t = 0; t < 4; ++t) {
    p.batches.push_back(
        testing::random_batch(12, kSizes, type == EmbeddingType::Hybrid ? 1 : 3, rng));
    p.grads.push_back(testing::random_grad(12 * p.config.slot_num * 7, rng));
    p.training.push_back(true);
  }
  if (type == EmbeddingType::Hybrid) {
    p.config.hybrid.frequent_keys = testing::most_used_keys(p, 20);
    p.config.type = EmbeddingType::Hybrid;
  }
  if (host) {
    p.config.storage.location = StorageLocation::Host;
    p.config.storage.cache_rows = 200;
    p.prefetch = true;
  }
  return p;
}

Problem loading(Problem p, const fs::path& dir) {
  p.load_before = dir;
  p.first_step = p.batches.size();
  return p;
}

void expect_same_model(const EmbeddingSnapshot& got, const EmbeddingSnapshot& want,
                       const std::string& what) {
  ASSERT_FALSE(want.keys.empty()) << what;
  EXPECT_EQ(got.keys, want.keys) << what;
  EXPECT_EQ(got.slots, want.slots) << what;
  EXPECT_EQ(got.vectors, want.vectors) << what;
  EXPECT_EQ(got.states, want.states) << what;
  EXPECT_EQ(got.step, want.step) << what;
}

TEST(ShardedSaveGpu, GpuSavesLoadOnCpuRanksAndBackBitForBit) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  const int gpus = std::min(cuda_device_count(), 2);
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot, EmbeddingType::Hybrid}) {
    for (bool host : {false, true}) {
      if (host && type == EmbeddingType::Hybrid) continue;  // Hybrid has no host tables
      const std::string what =
          cat(embedding_type_name(type), host ? " host" : " device", ", ", gpus, " GPU(s)");
      const Problem p = problem(type, host, rng);
      Problem on_gpu = p;
      on_gpu.save_after = dir / "gpu";
      const EmbeddingSnapshot saved_on_gpu = testing::run_ranks(on_gpu, gpus, true).snapshot;
      EXPECT_EQ(fs::exists(dir / "gpu" / "keys"), gpus == 1) << what;
      EXPECT_EQ(fs::is_directory(dir / "gpu" / "rank_1"), gpus > 1) << what;
      for (int cpu_ranks : {1, 3}) {
        expect_same_model(testing::run_ranks(loading(p, dir / "gpu"), cpu_ranks).snapshot,
                          saved_on_gpu, cat(what, ": loaded by ", cpu_ranks, " CPU rank(s)"));
      }
      expect_same_model(testing::run_ranks(loading(p, dir / "gpu"), gpus, true).snapshot,
                        saved_on_gpu, cat(what, ": loaded by the same GPUs"));
      Problem on_cpu = p;
      on_cpu.save_after = dir / "cpu";
      const EmbeddingSnapshot saved_on_cpu = testing::run_ranks(on_cpu, 3).snapshot;
      expect_same_model(testing::run_ranks(loading(p, dir / "cpu"), gpus, true).snapshot,
                        saved_on_cpu, cat(what, ": 3 CPU ranks' save loaded by the GPUs"));
    }
  }
}

}  // namespace
}  // namespace ember::embedding
