// The CPU hash table against std::unordered_map.
#include "ember/embedding/hash_table.hpp"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <unordered_map>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

template <class Key>
std::vector<Key> random_keys(std::int64_t n, std::int64_t distinct, std::mt19937_64& rng) {
  std::vector<Key> pool(distinct);
  for (auto& k : pool) {
    do {
      k = static_cast<Key>(rng());
    } while (k == static_cast<Key>(~0ull));
  }
  std::vector<Key> keys(n);
  for (auto& k : keys)
    k = pool[rng() % distinct];
  return keys;
}

template <class Key>
void check_against_map(DType dtype) {
  auto rng = testing::make_rng(sizeof(Key));
  for (std::int64_t n : {0, 1, 7, 1023, 65537}) {
    const std::int64_t distinct = std::max<std::int64_t>(1, n / 3);
    HashTable table(dtype, distinct + 5, Place::host());
    std::unordered_map<Key, std::int64_t> ref;
    const auto keys = random_keys<Key>(n, distinct, rng);
    Tensor rows = Tensor::empty({n}, DType::I64);
    const InsertResult inserted = table.insert_or_find(Tensor::from_vector(keys), rows);
    const auto r = rows.to_vector<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      auto [it, fresh] = ref.emplace(keys[i], r[i]);
      ASSERT_EQ(it->second, r[i]) << "key " << keys[i] << " got two rows";
    }
    EXPECT_EQ(table.size(), static_cast<std::int64_t>(ref.size()));
    EXPECT_EQ(inserted.first, 0);
    EXPECT_EQ(inserted.end, table.size());
    std::set<std::int64_t> distinct_rows;
    for (const auto& [k, row] : ref)
      distinct_rows.insert(row);
    EXPECT_EQ(distinct_rows.size(), ref.size()) << "two keys share a row";
    if (!ref.empty()) {
      EXPECT_EQ(*distinct_rows.begin(), 0);
      EXPECT_EQ(*distinct_rows.rbegin(), table.size() - 1);
    }
    // keys_by_row is the reverse map.
    const auto by_row = table.keys_by_row().template to_vector<Key>();
    for (const auto& [k, row] : ref)
      EXPECT_EQ(by_row[row], k);
    // find: present keys give the same rows, absent ones -1.
    auto probe = random_keys<Key>(n, distinct + 3, rng);
    Tensor found = Tensor::empty({n}, DType::I64);
    table.find(Tensor::from_vector(probe), found);
    const auto f = found.to_vector<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      const auto it = ref.find(probe[i]);
      EXPECT_EQ(f[i], it == ref.end() ? -1 : it->second);
    }
    // dump -> load into a fresh table reproduces every pair.
    auto [dk, dr] = table.dump();
    HashTable copy(dtype, distinct + 5, Place::host());
    copy.load(dk, dr);
    Tensor again = Tensor::empty({n}, DType::I64);
    copy.find(Tensor::from_vector(keys), again);
    EXPECT_EQ(again.to_vector<std::int64_t>(), r);
    EXPECT_EQ(copy.size(), table.size());
  }
}

TEST(HashTable, U32MatchesUnorderedMap) {
  check_against_map<std::uint32_t>(DType::U32);
}
TEST(HashTable, I64MatchesUnorderedMap) {
  check_against_map<std::int64_t>(DType::I64);
}

TEST(HashTable, ConcurrentInsertsFromManyThreadsGiveOneRowPerKey) {
  auto rng = testing::make_rng();
  const int threads = 8;
  const std::int64_t per_thread = 20000, distinct = 30000;
  HashTable table(DType::I64, distinct, Place::host());
  std::vector<std::vector<std::int64_t>> keys(threads), rows(threads);
  for (auto& k : keys) {
    for (std::int64_t i = 0; i < per_thread; ++i) {
      k.push_back(static_cast<std::int64_t>(rng() % distinct) * 7919);  // colliding keys
    }
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Tensor r = Tensor::empty({per_thread}, DType::I64);
      table.insert_or_find(Tensor::from_vector(keys[t]), r);
      rows[t] = r.to_vector<std::int64_t>();
    });
  }
  for (auto& t : pool)
    t.join();
  std::unordered_map<std::int64_t, std::int64_t> seen;
  std::set<std::int64_t> used_rows;
  for (int t = 0; t < threads; ++t) {
    for (std::int64_t i = 0; i < per_thread; ++i) {
      ASSERT_GE(rows[t][i], 0);
      auto [it, fresh] = seen.emplace(keys[t][i], rows[t][i]);
      ASSERT_EQ(it->second, rows[t][i]);
      used_rows.insert(rows[t][i]);
    }
  }
  EXPECT_EQ(used_rows.size(), seen.size());
  EXPECT_EQ(table.size(), static_cast<std::int64_t>(seen.size()));
}

TEST(HashTable, FullTableIsAClearErrorAndStaysFull) {
  HashTable table(DType::U32, 10, Place::host(), 0, "embedding layer 'emb'");
  std::vector<std::uint32_t> keys(25);
  for (std::uint32_t i = 0; i < 25; ++i)
    keys[i] = 100 + i;
  Tensor rows = Tensor::empty({25}, DType::I64);
  try {
    table.insert_or_find(Tensor::from_vector(keys), rows);
    FAIL() << "no error for a full table";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("embedding layer 'emb'"), std::string::npos) << m;
    EXPECT_NE(m.find("capacity 10"), std::string::npos) << m;
    EXPECT_NE(m.find("15 new key(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("workspace_size_per_gpu_in_mb"), std::string::npos) << m;
  }
  // No key shares a row: those that fitted have distinct rows, the others none.
  const auto r = rows.to_vector<std::int64_t>();
  std::set<std::int64_t> got;
  for (auto x : r) {
    if (x >= 0) {
      EXPECT_TRUE(got.insert(x).second) << "row " << x << " given twice";
    }
  }
  EXPECT_EQ(got.size(), 10u);
  EXPECT_EQ(table.size(), 10);
  Tensor one = Tensor::empty({1}, DType::I64);
  EXPECT_THROW(table.insert_or_find(Tensor::from_vector(std::vector<std::uint32_t>{1}), one),
               Error);
}

TEST(HashTable, ReservedKeyIsAnError) {
  HashTable table(DType::I64, 10, Place::host());
  Tensor rows = Tensor::empty({2}, DType::I64);
  try {
    table.insert_or_find(Tensor::from_vector(std::vector<std::int64_t>{5, -1}), rows);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key -1"), std::string::npos) << e.what();
  }
}

TEST(HashTable, BadArguments) {
  EXPECT_THROW(HashTable(DType::F32, 10, Place::host()), Error);
  EXPECT_THROW(HashTable(DType::U32, 0, Place::host()), Error);
  EXPECT_THROW(HashTable(DType::U32, 10, Place::host(), 12), Error);
  HashTable table(DType::U32, 10, Place::host());
  Tensor rows = Tensor::empty({3}, DType::I64);
  EXPECT_THROW(table.find(Tensor::zeros({3}, DType::I64), rows), Error);
  EXPECT_THROW(table.load(Tensor::from_vector(std::vector<std::uint32_t>{1, 2}),
                          Tensor::from_vector(std::vector<std::int64_t>{0, 0})),
               Error);
}

}  // namespace
}  // namespace ember::embedding
