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
#include "sharded_save_support.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;
namespace fs = std::filesystem;

using testing::loading;

Problem problem(EmbeddingType type, bool host, std::mt19937_64& rng) {
  Problem p = testing::sharded_save_problem(type, optim::OptimizerType::Adam, 4, rng);
  return host ? testing::on_host(std::move(p)) : p;
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
