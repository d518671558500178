// Host tables saved and loaded across storage locations and rank counts (identical files,
// identical next steps), the "storage" configuration and its errors, the choice of location, and
// the bad inputs: a cache smaller than one batch, a host table larger than the host.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iterator>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/embedding/embedding_config.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/storage_config.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using testing::Problem;
namespace fs = std::filesystem;

const std::vector<std::int64_t> kSizes = {900, 4000, 3000, 2500};

Problem problem(EmbeddingType type, optim::OptimizerType ot, optim::UpdateType ut, int steps,
                std::mt19937_64& rng) {
  Problem p;
  p.config.name = "emb";
  p.config.type = type;
  p.config.vec_size = 5;
  p.config.slot_num = static_cast<std::int64_t>(kSizes.size());
  p.config.max_vocabulary_size_per_gpu = 9000;
  if (type != EmbeddingType::DistributedSlotHash) p.config.slot_size_array = kSizes;
  p.config.key_dtype = DType::U32;
  p.config.seed = rng();
  p.optimizer.type = ot;
  p.optimizer.update_type = ut;
  p.optimizer.schedule.base_lr = 0.1f;
  p.optimizer.momentum_factor = 0.7f;
  for (int t = 0; t < steps; ++t) {
    testing::HostBatch h;
    h.batch = 6;
    h.offsets.push_back(0);
    std::int64_t begin = 0;
    for (std::int64_t b = 0; b < 6; ++b) {
      begin = 0;
      for (std::int64_t size : kSizes) {
        for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
          const double u = std::pow(static_cast<double>(rng() % 10000) / 10000.0, 3.0);
          h.keys.push_back(begin + static_cast<std::int64_t>(u * static_cast<double>(size)));
        }
        h.offsets.push_back(static_cast<std::int64_t>(h.keys.size()));
        begin += size;
      }
    }
    p.batches.push_back(h);
    p.grads.push_back(testing::random_grad(6 * p.config.slot_num * 5, rng));
    p.training.push_back(true);
  }
  return p;
}

Problem on_host(Problem p, double ratio) {
  p.config.storage.location = StorageLocation::Host;
  p.config.storage.cache_ratio = ratio;
  p.prefetch = true;
  return p;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(HostCacheIo, SavedFilesAreTheSameWhereverTheRowsLived) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    Problem p = problem(type, optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal, 20, rng);
    // One rank writes the file set itself; three, one shard per rank (the same shards
    // wherever the rows lived).
    for (int ranks : {1, 3}) {
      Problem device = p, host = on_host(p, 0.02);
      device.save_after = dir / "device";
      host.save_after = dir / "host";
      (void)testing::run_ranks(device, ranks);
      (void)testing::run_ranks(host, ranks);
      for (int r = 0; r < ranks; ++r) {
        const fs::path set = ranks == 1 ? fs::path() : fs::path(cat("rank_", r));
        ASSERT_TRUE(fs::exists(dir / "device" / set / "keys")) << set;
        for (const char* name :
             {"keys", "vectors", "adam_m", "adam_v", "optimizer_step", "slot_ids"}) {
          ASSERT_EQ(fs::exists(dir / "device" / set / name), fs::exists(dir / "host" / set / name))
              << set << name;
          if (!fs::exists(dir / "device" / set / name)) continue;
          EXPECT_EQ(file_bytes(dir / "device" / set / name), file_bytes(dir / "host" / set / name))
              << embedding_type_name(type) << ": " << set << name;
        }
      }
    }
  }
}

// What a resumed run must equal: the same save (LazyGlobal brings every row up to date when it
// saves, which a run that never saved does not do) loaded back into the whole table.
TEST(HostCacheIo, SaveWithCacheLoadWholeAndTheReverseGiveIdenticalNextSteps) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    for (optim::UpdateType ut : {optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
      const Problem p = problem(type, optim::OptimizerType::MomentumSGD, ut, 24, rng);
      const std::string what =
          std::string(embedding_type_name(type)) + "/" + optim::update_type_name(ut);
      auto first_half = [&](Problem q, const char* name) {
        q.batches.resize(12);
        q.save_after = dir / name;
        (void)testing::run_ranks(q, 2);
      };
      auto second_half = [&](Problem q, const char* name, int ranks) {
        q.first_step = 12;
        q.load_before = dir / name;
        return testing::run_ranks(q, ranks);
      };
      first_half(p, "whole");
      first_half(on_host(p, 0.01), "cached");
      const auto want = second_half(p, "whole", 3);
      testing::expect_identical_runs(second_half(p, "cached", 3), want,
                                     what + ": saved with a cache, loaded whole");
      testing::expect_identical_runs(second_half(on_host(p, 0.01), "whole", 1), want,
                                     what + ": saved whole, loaded with a cache");
      testing::expect_identical_runs(second_half(on_host(p, 0.02), "cached", 2), want,
                                     what + ": saved and loaded with a cache");
    }
  }
}

nlohmann::json layer_json(const nlohmann::json& storage) {
  nlohmann::json j = {{"name", "e1"},
                      {"type", "DistributedSlotSparseEmbeddingHash"},
                      {"bottom", "data1"},
                      {"top", "e1"},
                      {"sparse_embedding_hparam",
                       {{"embedding_vec_size", 4}, {"max_vocabulary_size_per_gpu", 1000}}}};
  if (!storage.is_null()) j["storage"] = storage;
  return j;
}

EmbeddingConfig parse(const nlohmann::json& storage) {
  return parse_embedding_layer(layer_json(storage), SparseInputSpec{"data1", 2, 0}, DType::U32, 1);
}

TEST(StorageConfig, ReadsTheStorageObject) {
  EXPECT_EQ(parse(nullptr).storage.location, StorageLocation::Auto);
  const StorageConfig s = parse({{"location", "host"},
                                 {"cache_ratio", 0.25},
                                 {"host_memory", "pageable"},
                                 {"policy", "lru"}})
                              .storage;
  EXPECT_EQ(s.location, StorageLocation::Host);
  EXPECT_DOUBLE_EQ(s.cache_ratio, 0.25);
  EXPECT_EQ(s.host_memory, HostMemory::Pageable);
  EXPECT_EQ(s.policy, EvictionPolicy::Lru);
  EXPECT_EQ(parse({{"location", "auto"}, {"cache_rows", 64}}).storage.cache_rows, 64);
}

TEST(StorageConfig, BadStorageIsAOneLineErrorNamingTheLayerAndKey) {
  const std::string where = "layer 'e1' (DistributedSlotSparseEmbeddingHash): ";
  EMBER_EXPECT_THROW_WITH(parse({{"location", "gpu"}}), ConfigError,
                          where + "\"storage.location\" must be");
  EMBER_EXPECT_THROW_WITH(parse({{"location", "gpu"}}), ConfigError, "got \"gpu\"");
  for (double bad : {0.0, -0.5, 1.5}) {
    EMBER_EXPECT_THROW_WITH(parse({{"location", "host"}, {"cache_ratio", bad}}), ConfigError,
                            where + "\"storage.cache_ratio\" must be a number in (0, 1]");
  }
  EMBER_EXPECT_THROW_WITH(parse({{"location", "host"}, {"cache_rows", 0}}), ConfigError,
                          where + "\"storage.cache_rows\" must be an integer >= 1, got 0");
  EMBER_EXPECT_THROW_WITH(
      parse({{"location", "host"}, {"cache_rows", 10}, {"cache_ratio", 0.5}}), ConfigError,
      where + "give \"storage.cache_ratio\" or \"storage.cache_rows\", not both");
  EMBER_EXPECT_THROW_WITH(parse({{"location", "device"}, {"cache_ratio", 0.5}}), ConfigError,
                          "it needs \"storage.location\" \"host\" or \"auto\", not \"device\"");
  EMBER_EXPECT_THROW_WITH(parse({{"location", "host"}, {"cache_ration", 0.5}}), ConfigError,
                          where + "unknown key \"storage.cache_ration\"");
  EMBER_EXPECT_THROW_WITH(parse({{"location", "host"}, {"host_memory", "swap"}}), ConfigError,
                          where + "\"storage.host_memory\" must be");
}

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(StorageConfig, AutoPutsTheTableWhereItFits) {
  StorageConfig c;  // auto
  StorageNeeds n;
  n.rows = 1000000;
  n.row_bytes = 512;  // 0.48 GiB
  n.index_bytes = 32000000;
  n.slot_map_bytes = 4000000;
  MemoryAvailable a;
  a.device_total = 80 * kGiB;
  a.device_free = 70 * kGiB;
  a.host_available = 100 * kGiB;
  EXPECT_EQ(decide_storage(c, n, a, "layer 'e'").location, StorageLocation::Device);
  // Too large for the device (less its 8 GiB reserve): host, the largest cache that fits.
  n.rows = 200000000;  // 95 GiB
  const StorageDecision d = decide_storage(c, n, a, "layer 'e'");
  EXPECT_EQ(d.location, StorageLocation::Host);
  const std::uint64_t budget = 70 * kGiB - 8 * kGiB - n.index_bytes - n.slot_map_bytes;
  EXPECT_EQ(d.cache_rows, static_cast<std::int64_t>(budget / 512));
  EXPECT_NE(d.log_line.find("does not fit"), std::string::npos) << d.log_line;
  EXPECT_NE(d.log_line.find("device cache of"), std::string::npos) << d.log_line;
  EXPECT_NE(d.log_line.find("200000000 rows x 512 bytes"), std::string::npos) << d.log_line;
  // Fits in neither: an error with the numbers.
  a.host_available = 50 * kGiB;
  EMBER_EXPECT_THROW_WITH(decide_storage(c, n, a, "layer 'e'"), OutOfMemoryError,
                          "layer 'e': the table (200000000 rows x 512 bytes");
  EMBER_EXPECT_THROW_WITH(decide_storage(c, n, a, "layer 'e'"), OutOfMemoryError,
                          "fits in neither the device");
  // An explicit cache ratio that does not fit on the device.
  StorageConfig host;
  host.location = StorageLocation::Host;
  host.cache_ratio = 0.9;
  a.host_available = 200 * kGiB;
  EMBER_EXPECT_THROW_WITH(decide_storage(host, n, a, "layer 'e'"), OutOfMemoryError,
                          "a device cache of 180000000 rows");
  host.cache_ratio = 0.1;
  EXPECT_EQ(decide_storage(host, n, a, "layer 'e'").cache_rows, 20000000);
  // CPU ranks: auto is the device; host keeps a separate buffer (the whole table by default).
  a.device_is_host = true;
  EXPECT_EQ(decide_storage(c, n, a, "layer 'e'").location, StorageLocation::Device);
  host.cache_ratio = 0;
  EXPECT_EQ(decide_storage(host, n, a, "layer 'e'").cache_rows, n.rows);
}

TEST(HostCacheErrors, CacheSmallerThanOneBatchSaysHowManyRowsItNeeds) {
  auto rng = ember::testing::make_rng();
  Problem p = problem(EmbeddingType::DistributedSlotHash, optim::OptimizerType::SGD,
                      optim::UpdateType::Local, 3, rng);
  p.config.storage.location = StorageLocation::Host;
  p.config.storage.cache_rows = 3;
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, 1), Error,
                          "embedding layer 'emb' (rank 0 of 1): one batch needs");
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, 1), Error,
                          "but the cache holds 3 rows; raise \"storage.cache_ratio\" or "
                          "\"storage.cache_rows\" (the cache holds 3 of the rank's 9000 rows)");
  // With prefetching the error comes from the forward of the batch that needs the rows.
  p.prefetch = true;
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(p, 1), Error, "one batch needs");
}

TEST(HostCacheErrors, HostTableLargerThanTheHostNamesTheLayerAndNumbers) {
  EmbeddingConfig c;
  c.name = "huge";
  c.vec_size = 128;
  c.slot_num = 1;
  c.max_vocabulary_size_per_gpu = std::int64_t{4} << 30;  // 2 TiB of rows
  c.storage.location = StorageLocation::Host;
  c.storage.cache_rows = 16;
  auto comms = distributed::make_in_process_communicators(1);
  optim::OptimizerConfig o;
  EMBER_EXPECT_THROW_WITH(SparseEmbedding(c, o, *comms[0]), OutOfMemoryError,
                          "embedding layer 'huge' (rank 0 of 1): the host table (4294967296 "
                          "rows x 512 bytes");
  EMBER_EXPECT_THROW_WITH(SparseEmbedding(c, o, *comms[0]), OutOfMemoryError, "of host memory but");
}

// On the CPU a table is in host memory whole: one that cannot be had names its layer and shape
// (here the one-hot layer, whose host vector of keys is allocated first, at once).
TEST(HostCacheErrors, ACpuTableLargerThanTheHostNamesTheLayerAndShape) {
  auto comms = distributed::make_in_process_communicators(1);
  optim::OptimizerConfig o;
  EmbeddingConfig onehot;
  onehot.name = "huge";
  onehot.type = EmbeddingType::LocalizedSlotOneHot;
  onehot.vec_size = 128;
  onehot.slot_num = 2;
  onehot.slot_size_array = {std::int64_t{1} << 40, 3};  // 2^40 keys: 8 TiB of them alone
  EMBER_EXPECT_THROW_WITH(SparseEmbedding(onehot, o, *comms[0]), OutOfMemoryError,
                          "embedding layer 'huge' (rank 0 of 1): the rank's table (1099511627779 "
                          "rows x 128 f32 values) does not fit on host");
}

}  // namespace
}  // namespace ember::embedding
