// Saves of several ranks: each rank writes its own rows into rank_<r>/ (and one rank the
// HugeCTR-like file set itself); loads on one rank, on the same rank count (each rank its own
// shard) and on another (every shard read, rows kept by owner) give the saved model back bit for
// bit, for every embedding type, device and host tables, with optimizer states. A missing or
// damaged shard is refused naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "embedding_reference_support.hpp"
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

using testing::kShardedSizes;
using testing::loading;
using testing::on_host;

Problem problem(EmbeddingType type, optim::OptimizerType ot, int steps, std::mt19937_64& rng) {
  return testing::sharded_save_problem(type, ot, steps, rng);
}

template <class T>
std::vector<T> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

void expect_same_model(const EmbeddingSnapshot& got, const EmbeddingSnapshot& want,
                       const std::string& what) {
  EXPECT_EQ(got.keys, want.keys) << what;
  EXPECT_EQ(got.slots, want.slots) << what;
  EXPECT_EQ(got.vectors, want.vectors) << what;  // bit for bit
  EXPECT_EQ(got.states, want.states) << what;
  EXPECT_EQ(got.step, want.step) << what;
}

std::string type_name(EmbeddingType t) {
  return embedding_type_name(t);
}

const EmbeddingType kEveryType[] = {EmbeddingType::DistributedSlotHash,
                                    EmbeddingType::LocalizedSlotHash,
                                    EmbeddingType::LocalizedSlotOneHot, EmbeddingType::Hybrid};

TEST(ShardedSave, LoadsOnOneTheSameAndAnotherRankCountBitForBit) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  for (EmbeddingType type : kEveryType) {
    for (bool host : {false, true}) {
      if (host && type == EmbeddingType::Hybrid) continue;  // Hybrid has no host tables
      for (optim::OptimizerType ot : {optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad}) {
        Problem p = problem(type, ot, 4, rng);
        if (host) p = on_host(p);
        const std::string what =
            type_name(type) + (host ? " host" : " device") + " " + optim::optimizer_name(ot);
        for (int saved_ranks : {1, 2, 3}) {
          const fs::path saved = dir / cat("r", saved_ranks);
          Problem saving = p;
          saving.save_after = saved;
          const EmbeddingSnapshot want = testing::run_ranks(saving, saved_ranks).snapshot;
          ASSERT_FALSE(want.keys.empty()) << what;
          EXPECT_EQ(fs::exists(saved / "keys"), saved_ranks == 1) << what;
          for (int r = 0; r < 4; ++r) {
            EXPECT_EQ(fs::is_directory(saved / cat("rank_", r)), saved_ranks > 1 && r < saved_ranks)
                << what << ": rank_" << r;
          }
          for (int load_ranks : {1, 2, 3}) {
            const auto got = testing::run_ranks(loading(p, saved), load_ranks).snapshot;
            expect_same_model(
                got, want,
                cat(what, ": saved by ", saved_ranks, " rank(s), loaded by ", load_ranks));
          }
        }
      }
    }
  }
}

// 16-bit tables save f32 (widened exactly), shard by shard; loaded on any rank count they hold
// the same 16-bit values.
TEST(ShardedSave, SixteenBitTablesLoadOnAnyRankCountBitForBit) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  for (DType dtype : {DType::F16, DType::BF16}) {
    for (EmbeddingType type : kEveryType) {
      Problem p = problem(type, optim::OptimizerType::Adam, 3, rng);
      p.config.value_dtype = dtype;
      p.save_after = dir / "m";
      const EmbeddingSnapshot want = testing::run_ranks(p, 2).snapshot;
      ASSERT_TRUE(fs::is_directory(dir / "m" / "rank_1"));
      for (int ranks : {1, 2, 3}) {
        expect_same_model(testing::run_ranks(loading(p, dir / "m"), ranks).snapshot, want,
                          cat(type_name(type), " ", dtype_name(dtype), " loaded by ", ranks));
      }
    }
  }
}

// The key's slot in kShardedSizes' ranges.
std::int64_t slot_of(std::int64_t key) {
  std::int64_t begin = 0;
  for (std::size_t s = 0; s < kShardedSizes.size(); ++s) {
    if (key < begin + kShardedSizes[s]) return static_cast<std::int64_t>(s);
    begin += kShardedSizes[s];
  }
  return -1;
}

TEST(ShardedSave, EachShardHoldsExactlyItsRanksRowsInKeyOrder) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  constexpr int D = 2;
  constexpr std::int64_t V = 7;
  for (EmbeddingType type : kEveryType) {
    Problem p = problem(type, optim::OptimizerType::Adam, 3, rng);
    p.save_after = dir / type_name(type);
    const EmbeddingSnapshot model = testing::run_ranks(p, D).snapshot;
    std::vector<std::int64_t> all_keys;
    std::int64_t rows = 0;
    for (int r = 0; r < D; ++r) {
      const fs::path shard = p.save_after / cat("rank_", r);
      const auto keys = read_all<std::uint32_t>(shard / "keys");
      const auto vectors = read_all<float>(shard / "vectors");
      const auto adam_m = read_all<float>(shard / "adam_m");
      const auto slots = read_all<std::int64_t>(shard / "slot_ids");
      const auto step = read_all<std::int64_t>(shard / "optimizer_step");
      ASSERT_EQ(vectors.size(), keys.size() * V) << type_name(type);
      ASSERT_EQ(adam_m.size(), keys.size() * V) << type_name(type);
      ASSERT_EQ(step, std::vector<std::int64_t>{model.step}) << type_name(type);
      EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end())) << type_name(type) << " rank_" << r;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const std::int64_t key = keys[i];
        const std::int64_t owner = type == EmbeddingType::DistributedSlotHash ? key % D
                                   : type == EmbeddingType::LocalizedSlotHash ? slots.at(i) % D
                                                                              : slot_of(key) % D;
        ASSERT_EQ(owner, r) << type_name(type) << ": key " << key << " in rank_" << r;
        // Its row is the model's (keys are unique in these types but for LocalizedSlot hash,
        // where a key may sit in several slots: (key, slot) is).
        std::size_t at = 0;
        while (at < model.keys.size() &&
               (model.keys[at] != key || (!slots.empty() && model.slots[at] != slots[i])))
          ++at;
        ASSERT_LT(at, model.keys.size()) << key;
        EXPECT_TRUE(std::equal(vectors.begin() + static_cast<std::ptrdiff_t>(i * V),
                               vectors.begin() + static_cast<std::ptrdiff_t>((i + 1) * V),
                               model.vectors.begin() + static_cast<std::ptrdiff_t>(at * V)))
            << key;
        EXPECT_TRUE(std::equal(adam_m.begin() + static_cast<std::ptrdiff_t>(i * V),
                               adam_m.begin() + static_cast<std::ptrdiff_t>((i + 1) * V),
                               model.states[0].begin() + static_cast<std::ptrdiff_t>(at * V)))
            << key;
        all_keys.push_back(key);
      }
      rows += static_cast<std::int64_t>(keys.size());
    }
    // Every row once: a hybrid embedding's replicated frequent rows included.
    EXPECT_EQ(rows, static_cast<std::int64_t>(model.keys.size())) << type_name(type);
    std::sort(all_keys.begin(), all_keys.end());
    EXPECT_EQ(all_keys, model.keys) << type_name(type);
  }
}

TEST(ShardedSave, AMissingOrDamagedShardIsRefusedNamingIt) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir dir;
  Problem p = problem(EmbeddingType::DistributedSlotHash, optim::OptimizerType::Adam, 3, rng);
  p.save_after = dir / "m";
  (void)testing::run_ranks(p, 3);
  // A truncated state file of one shard: refused on every rank count, before anything is read.
  fs::resize_file(dir / "m" / "rank_1" / "adam_v",
                  fs::file_size(dir / "m" / "rank_1" / "adam_v") - 4);
  for (int ranks : {1, 3}) {
    EMBER_EXPECT_THROW_WITH(testing::run_ranks(loading(p, dir / "m"), ranks), DataError,
                            (dir / "m" / "rank_1" / "adam_v").string());
  }
  // A missing shard.
  p.save_after = dir / "n";
  (void)testing::run_ranks(p, 3);
  fs::remove_all(dir / "n" / "rank_1");
  for (int ranks : {1, 2, 3}) {
    EMBER_EXPECT_THROW_WITH(testing::run_ranks(loading(p, dir / "n"), ranks), DataError,
                            "shard rank_1 is missing (the save has 2 shards, the last rank_2)");
  }
  // Shards of two different saves.
  p.save_after = dir / "o";
  (void)testing::run_ranks(p, 2);
  Problem longer = problem(EmbeddingType::DistributedSlotHash, optim::OptimizerType::Adam, 5, rng);
  longer.save_after = dir / "q";
  (void)testing::run_ranks(longer, 2);
  fs::remove_all(dir / "o" / "rank_1");
  fs::copy(dir / "q" / "rank_1", dir / "o" / "rank_1");
  EMBER_EXPECT_THROW_WITH(testing::run_ranks(loading(p, dir / "o"), 2), DataError,
                          "are shards of different saves");
}

}  // namespace
}  // namespace ember::embedding
