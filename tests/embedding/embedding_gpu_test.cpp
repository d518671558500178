// The CUDA hash table and sparse embedding against the CPU ones.
#include <gtest/gtest.h>

#include <set>
#include <unordered_map>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/embedding/hash_table.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

#define EMBER_REQUIRE_NCCL()                                        \
  do {                                                              \
    EMBER_REQUIRE_GPU();                                            \
    if (!nccl_compiled()) GTEST_SKIP() << "this build has no NCCL"; \
  } while (0)

template <class Key>
void table_matches_cpu(DType dtype) {
  auto rng = ember::testing::make_rng(sizeof(Key));
  for (std::int64_t n : {1, 7, 1023, 65537, 1 << 20}) {
    const std::int64_t distinct = std::max<std::int64_t>(1, n / 4);
    std::vector<Key> pool(distinct);
    for (auto& k : pool) {
      do {
        k = static_cast<Key>(rng());
      } while (k == static_cast<Key>(~0ull));
    }
    std::vector<Key> keys(n);
    for (auto& k : keys)
      k = pool[rng() % distinct];
    HashTable gpu(dtype, distinct, Place::cuda(0));
    Tensor rows = Tensor::empty({n}, DType::I64, Place::cuda(0));
    const InsertResult fresh = gpu.insert_or_find(Tensor::from_vector(keys, Place::cuda(0)), rows);
    const auto r = rows.to_vector<std::int64_t>();
    std::unordered_map<Key, std::int64_t> seen;
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_GE(r[i], 0);
      auto [it, inserted] = seen.emplace(keys[i], r[i]);
      ASSERT_EQ(it->second, r[i]) << "key " << keys[i] << " got two rows";
    }
    std::set<std::int64_t> distinct_rows;
    for (const auto& [k, row] : seen)
      distinct_rows.insert(row);
    EXPECT_EQ(distinct_rows.size(), seen.size()) << "two keys share a row";
    EXPECT_EQ(gpu.size(), static_cast<std::int64_t>(seen.size()));
    EXPECT_EQ(fresh.end, gpu.size());
    const auto by_row = gpu.keys_by_row().template to_vector<Key>();
    for (const auto& [k, row] : seen)
      EXPECT_EQ(by_row[row], k);
    // find agrees with the insert, absent keys read -1, like the CPU table.
    std::vector<Key> probe = keys;
    for (std::int64_t i = 0; i < n; i += 3)
      probe[i] = static_cast<Key>(rng() | 1);
    Tensor found = Tensor::empty({n}, DType::I64, Place::cuda(0));
    gpu.find(Tensor::from_vector(probe, Place::cuda(0)), found);
    HashTable cpu(dtype, distinct + n, Place::host());
    auto [dk, dr] = gpu.dump();
    cpu.load(dk.to(Place::host()), dr.to(Place::host()));
    Tensor cpu_found = Tensor::empty({n}, DType::I64);
    cpu.find(Tensor::from_vector(probe), cpu_found);
    EXPECT_EQ(found.to_vector<std::int64_t>(), cpu_found.to_vector<std::int64_t>());
  }
}

TEST(HashTableGpu, U32MatchesCpu) {
  EMBER_REQUIRE_GPU();
  table_matches_cpu<std::uint32_t>(DType::U32);
}
TEST(HashTableGpu, I64MatchesCpu) {
  EMBER_REQUIRE_GPU();
  table_matches_cpu<std::int64_t>(DType::I64);
}

TEST(HashTableGpu, HeavyConcurrentInsertsOfCollidingKeys) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  // 60000 keys into 65536 slots (load 0.92: long probe chains), each key 64 times over,
  // shuffled, so thousands of threads race to claim the same slots.
  const std::int64_t distinct = 60000, repeats = 64, slots = 65536;
  std::vector<std::int64_t> keys;
  for (std::int64_t k = 0; k < distinct; ++k) {
    for (std::int64_t j = 0; j < repeats; ++j)
      keys.push_back(k * 65536);
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  HashTable table(DType::I64, distinct, Place::cuda(0), slots);
  Tensor rows = Tensor::empty({static_cast<std::int64_t>(keys.size())}, DType::I64, Place::cuda(0));
  table.insert_or_find(Tensor::from_vector(keys, Place::cuda(0)), rows);
  const auto r = rows.to_vector<std::int64_t>();
  std::unordered_map<std::int64_t, std::int64_t> seen;
  std::set<std::int64_t> used;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_GE(r[i], 0);
    auto [it, inserted] = seen.emplace(keys[i], r[i]);
    ASSERT_EQ(it->second, r[i]);
    used.insert(r[i]);
  }
  EXPECT_EQ(used.size(), static_cast<std::size_t>(distinct));
  EXPECT_EQ(table.size(), distinct);
  EXPECT_EQ(*used.rbegin(), distinct - 1);
}

TEST(HashTableGpu, FullTableError) {
  EMBER_REQUIRE_GPU();
  HashTable table(DType::U32, 100, Place::cuda(0), 0, "embedding layer 'g'");
  std::vector<std::uint32_t> keys(1000);
  for (std::uint32_t i = 0; i < 1000; ++i)
    keys[i] = 7 * i + 1;
  Tensor rows = Tensor::empty({1000}, DType::I64, Place::cuda(0));
  try {
    table.insert_or_find(Tensor::from_vector(keys, Place::cuda(0)), rows);
    FAIL() << "no error for a full table";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("capacity 100"), std::string::npos) << m;
    EXPECT_NE(m.find("900 new key(s)"), std::string::npos) << m;
  }
  const auto r = rows.to_vector<std::int64_t>();
  std::set<std::int64_t> got;
  for (auto x : r) {
    if (x >= 0) {
      EXPECT_TRUE(got.insert(x).second) << "row " << x << " given twice";
    }
  }
  EXPECT_EQ(got.size(), 100u);
}

EmbeddingConfig gpu_config(EmbeddingType type, Combiner combiner, DType key, std::uint64_t seed,
                           std::int64_t vec_size) {
  EmbeddingConfig c;
  c.name = "gpu_emb";
  c.type = type;
  c.vec_size = vec_size;
  c.combiner = combiner;
  c.slot_num = 5;
  c.max_vocabulary_size_per_gpu = 5000;
  if (type != EmbeddingType::DistributedSlotHash) c.slot_size_array = {70, 200, 3, 500, 110};
  c.key_dtype = key;
  c.seed = seed;
  return c;
}

TEST(SparseEmbeddingGpu, MatchesCpuForEveryTypeOptimizerAndUpdateType) {
  EMBER_REQUIRE_NCCL();
  auto rng = ember::testing::make_rng();
  const std::vector<std::int64_t> sizes = {70, 200, 3, 500, 110};
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    for (OptimizerType ot :
         {OptimizerType::SGD, OptimizerType::MomentumSGD, OptimizerType::Nesterov,
          OptimizerType::Adam, OptimizerType::AdaGrad}) {
      for (UpdateType ut : {UpdateType::Local, UpdateType::Global, UpdateType::LazyGlobal}) {
        // vec_size 128 takes the 16-byte pooling path, 7 the scalar one.
        const std::int64_t V = (static_cast<int>(ot) % 2 == 0) ? 128 : 7;
        testing::Problem p;
        p.config = gpu_config(type, static_cast<int>(ut) % 2 ? Combiner::Mean : Combiner::Sum,
                              static_cast<int>(ot) % 2 ? DType::U32 : DType::I64, rng(), V);
        p.optimizer.type = ot;
        p.optimizer.update_type = ut;
        p.optimizer.schedule.base_lr = 0.05f;
        p.optimizer.momentum_factor = 0.9f;
        for (int t = 0; t < 4; ++t) {
          p.batches.push_back(testing::random_batch(64, sizes, 6, rng));
          p.grads.push_back(testing::random_grad(64 * 5 * V, rng));
          p.training.push_back(t != 2);
        }
        const auto cpu = testing::run_ranks(p, 1, false);
        const auto gpu = testing::run_ranks(p, 1, true);
        testing::expect_same_run(gpu, cpu, 1e-4,
                                 std::string(embedding_type_name(type)) + " " + optimizer_name(ot) +
                                     "/" + update_type_name(ut));
        EXPECT_EQ(gpu.rows_in_use_per_step, cpu.rows_in_use_per_step);
      }
    }
  }
}

TEST(SparseEmbeddingGpu, AllDevicesWithNcclMatchOneCpuRank) {
  EMBER_REQUIRE_NCCL();
  const int D = cuda_device_count();
  auto rng = ember::testing::make_rng();
  const std::vector<std::int64_t> sizes = {70, 200, 3, 500, 110};
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    testing::Problem p;
    p.config = gpu_config(type, Combiner::Mean, DType::I64, rng(), 32);
    p.optimizer.type = OptimizerType::Adam;
    p.optimizer.update_type = UpdateType::LazyGlobal;
    p.optimizer.schedule.base_lr = 0.01f;
    for (int t = 0; t < 3; ++t) {
      p.batches.push_back(testing::random_batch(16 * D, sizes, 4, rng));
      p.grads.push_back(testing::random_grad(16 * D * 5 * 32, rng));
      p.training.push_back(true);
    }
    testing::expect_same_run(
        testing::run_ranks(p, D, true), testing::run_ranks(p, 1, false), 1e-4,
        std::string(embedding_type_name(type)) + " on " + std::to_string(D) + " GPU(s)");
  }
}

}  // namespace
}  // namespace ember::embedding
