// Host tables with a device cache on the GPU: the same outputs and final model, bit for bit, as
// the whole table on the device (every embedding type, optimizer and update type, cache ratios
// 1 % to 100 %, pinned and pageable host tables, with and without prefetching), the CPU's within
// float tolerance, several GPUs against one CPU rank, and a table larger than the device's free
// memory put on the host by "auto" and trained like the CPU's whole table.
#include <gtest/gtest.h>

#include <string>

#include "embedding_reference_support.hpp"
#include "ember/core/allocator.hpp"
#include "ember/core/device.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/storage_config.hpp"
#include "host_cache_support.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::cache_config;
using testing::cache_optimizer;
using testing::make_cache_problem;
using testing::Problem;
using testing::total;
using testing::with_storage;

#define EMBER_REQUIRE_NCCL()                                                     \
  do {                                                                           \
    EMBER_REQUIRE_GPU();                                                         \
    if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL"; \
  } while (0)

const EmbeddingType kTypes[] = {EmbeddingType::DistributedSlotHash,
                                EmbeddingType::LocalizedSlotHash,
                                EmbeddingType::LocalizedSlotOneHot};

class HostCacheGpu : public ::testing::TestWithParam<EmbeddingType> {};

// One test per embedding type (each runs 15 optimizer x update type pairs, 8 runs a pair).
TEST_P(HostCacheGpu, EveryOptimizerAndRatioMatchesTheWholeTableOnTheDevice) {
  EMBER_REQUIRE_NCCL();
  const EmbeddingType type = GetParam();
  auto rng = ember::testing::make_rng(static_cast<std::uint64_t>(type));
  {
    for (optim::OptimizerType ot : {optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD,
                                    optim::OptimizerType::Nesterov, optim::OptimizerType::Adam,
                                    optim::OptimizerType::AdaGrad}) {
      for (optim::UpdateType ut :
           {optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
        const Combiner combiner = rng() % 2 == 0 ? Combiner::Sum : Combiner::Mean;
        // vec_size 32 takes the 16-byte pooling path.
        EmbeddingConfig config =
            cache_config(type, combiner, rng(), testing::cache_slot_sizes(), 32);
        // A batch of 64 takes up to ~400 distinct rows, and the 1 % cache must hold two batches'
        // (the one trained and the one prepared ahead): a distributed table as large as the key
        // range (the localized ones are, from slot_size_array).
        if (type == EmbeddingType::DistributedSlotHash) {
          std::int64_t keys = 0;
          for (std::int64_t size : testing::cache_slot_sizes())
            keys += size;
          config.max_vocabulary_size_per_gpu = keys;
        }
        Problem p = make_cache_problem(config, cache_optimizer(ot, ut), 24, rng, 64);
        const std::string what = std::string(embedding_type_name(type)) + " " +
                                 optim::optimizer_name(ot) + "/" + optim::update_type_name(ut);
        const auto whole = testing::run_ranks(p, 1, true);
        testing::expect_same_run(whole, testing::run_ranks(p, 1, false), 1e-4,
                                 what + ", whole table: GPU against CPU");
        for (double ratio : {0.01, 0.05, 0.5, 1.0}) {
          const std::string w = what + ", cache ratio " + std::to_string(ratio);
          const auto cached = testing::run_ranks(with_storage(p, ratio, true), 1, true);
          testing::expect_identical_runs(cached, whole, w);
          EXPECT_EQ(total(cached, &CacheStats::hits) + total(cached, &CacheStats::fetched),
                    total(cached, &CacheStats::lookups))
              << w;
          if (ratio == 0.01) {
            EXPECT_GT(total(cached, &CacheStats::written_back), 0) << w;
          }
          if (ratio == 0.05) {
            testing::expect_identical_runs(
                testing::run_ranks(with_storage(p, ratio, false), 1, true), whole,
                w + ", no prefetch");
            testing::expect_identical_runs(
                testing::run_ranks(
                    with_storage(p, ratio, true, EvictionPolicy::Lru, HostMemory::Pageable), 1,
                    true),
                whole, w + ", pageable host table, lru");
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HostCacheGpu, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<EmbeddingType>& info) {
                           return info.param == EmbeddingType::DistributedSlotHash ? "Distributed"
                                  : info.param == EmbeddingType::LocalizedSlotHash ? "LocalizedHash"
                                                                                   : "OneHot";
                         });

TEST(HostCacheGpuRanks, AllDevicesWithACacheMatchOneCpuRank) {
  EMBER_REQUIRE_NCCL();
  const int D = cuda_device_count();
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : kTypes) {
    // A global batch of 32 whatever D: a 5 % cache must hold two batches' rows of every rank's
    // shard. With 4 GPUs the smallest shard is slot 2's 3000 rows (a 150-row cache), and a batch
    // of 128 samples has some 144 distinct rows there (about 40 at 32): the rank failed, and its
    // peers waited in NCCL until the group was aborted (before that, for ever).
    Problem p = make_cache_problem(
        cache_config(type, Combiner::Mean, rng(), testing::cache_slot_sizes(), 16),
        cache_optimizer(optim::OptimizerType::Adam, optim::UpdateType::Global), 16, rng, 32);
    const std::string what =
        std::string(embedding_type_name(type)) + " on " + std::to_string(D) + " GPU(s)";
    const auto cpu = testing::run_ranks(p, 1, false);
    const auto whole = testing::run_ranks(p, D, true);
    testing::expect_same_run(whole, cpu, 1e-4, what + ", whole table");
    const auto cached = testing::run_ranks(with_storage(p, 0.05, true), D, true);
    testing::expect_identical_runs(cached, whole, what + ", cache 5 %");
  }
}

// The session's order at scale: a prefetch whose keys are ready (an event) while the compute
// stream still runs a step whose memory is already freed on the host. The prepared batch's
// buffers come new from the compute stream's pool and must not be written before that step is
// done (issue 13: an illegal address on Criteo Kaggle, gone with CUDA_LAUNCH_BLOCKING=1).
TEST(HostCacheGpuPrefetch, ABusyComputeStreamLeavesThePreparedBatchIntact) {
  EMBER_REQUIRE_NCCL();
  auto rng = ember::testing::make_rng();
  for (EmbeddingType type : kTypes) {
    EmbeddingConfig config =
        cache_config(type, Combiner::Sum, rng(), testing::cache_slot_sizes(), 32);
    if (type == EmbeddingType::DistributedSlotHash) {  // as large as the key range (see above)
      std::int64_t keys = 0;
      for (std::int64_t size : testing::cache_slot_sizes())
        keys += size;
      config.max_vocabulary_size_per_gpu = keys;
    }
    Problem p = make_cache_problem(
        config, cache_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local), 16, rng, 64);
    const auto whole = testing::run_ranks(p, 1, true);
    Problem busy = with_storage(p, 0.05, true);
    busy.busy_compute = true;
    testing::expect_identical_runs(testing::run_ranks(busy, 1, true), whole,
                                   std::string(embedding_type_name(type)) +
                                       ", cache 5 %, prefetch beside a busy compute stream");
  }
}

// "auto" with less free device memory than the table needs: the rows go to the host with the
// largest cache that fits, and training matches the CPU's whole table. The device's memory is
// taken up first, leaving the reserve (device_reserve_bytes) plus half the table.
TEST(HostCacheGpuAuto, ATableLargerThanTheFreeDeviceMemoryTrainsOnTheHost) {
  EMBER_REQUIRE_NCCL();
  const std::vector<std::int64_t> sizes = {3'000'000, 1'000'000, 200'000, 7};
  const std::int64_t V = 64;
  auto rng = ember::testing::make_rng();
  EmbeddingConfig c =
      cache_config(EmbeddingType::LocalizedSlotOneHot, Combiner::Sum, rng(), sizes, V);
  Problem p = make_cache_problem(
      c, cache_optimizer(optim::OptimizerType::AdaGrad, optim::UpdateType::Local), 12, rng, 4096);
  const std::uint64_t table_bytes = 4'200'007ull * (2 * V * 4);  // values and AdaGrad's state
  const DeviceMemoryInfo info = device_memory_info(0);
  const std::uint64_t keep = device_reserve_bytes(info.total_bytes) + table_bytes / 2;
  ASSERT_GT(info.free_bytes, keep + (std::uint64_t{1} << 30)) << "the device is already full";
  const std::size_t hog = info.free_bytes - keep;
  AllocationPtr taken = Allocation::create(raw_allocator(Place::cuda(0)), hog);
  const DeviceMemoryInfo now = device_memory_info(0);
  ASSERT_LT(now.free_bytes, device_reserve_bytes(now.total_bytes) + table_bytes);

  p.config.storage.location = StorageLocation::Auto;
  p.prefetch = true;
  const auto cached = testing::run_ranks(p, 1, true);
  taken.reset();
  ASSERT_EQ(cached.cache_stats.size(), 1u);
  EXPECT_GT(cached.cache_stats[0].lookups, 0) << "auto did not choose a host table";
  p.config.storage.location = StorageLocation::Device;
  testing::expect_same_run(cached, testing::run_ranks(p, 1, false), 1e-4,
                           "a host table on the GPU against the whole table on the CPU");
}

}  // namespace
}  // namespace ember::embedding
