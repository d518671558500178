// The cache's bookkeeping and eviction policies (host only): hits, misses, new rows, eviction
// order per policy, rows pinned for a batch prepared ahead, abandoned plans, the "cache too
// small" error (nothing changed), emptying the cache; and HostBackedRows writing evicted rows
// back with their optimizer state.
#include "ember/embedding/cache_directory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ember/core/error.hpp"
#include "ember/embedding/host_backed_rows.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

CacheDirectory directory(std::int64_t rows, std::int64_t slots,
                         EvictionPolicy policy = EvictionPolicy::Lru, bool made = false) {
  return CacheDirectory(rows, slots, policy, made, "layer 'e' (rank 0 of 1)",
                        "raise storage.cache_ratio");
}

// Runs a batch through the directory as the embedding does: plan, start, release.
CachePlan run(CacheDirectory& d, std::vector<std::int64_t> rows, bool training = true) {
  CachePlan p = d.plan(rows, training);
  d.started(p);
  d.release(p);
  return p;
}

std::vector<std::int64_t> sorted(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(EvictionPolicyNames, EveryPolicyRoundTripsThroughItsNameAndOthersAreNone) {
  for (EvictionPolicy p : {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    const auto back = eviction_policy_from_name(eviction_policy_name(p));
    ASSERT_TRUE(back.has_value()) << eviction_policy_name(p);
    EXPECT_EQ(*back, p);
  }
  for (const char* other : {"", "LRU", "lfu-history", "fifo"})
    EXPECT_FALSE(eviction_policy_from_name(other).has_value()) << other;
}

TEST(CacheDirectory, HitsMissesAndNewRows) {
  CacheDirectory d = directory(100, 4);
  CachePlan p = run(d, {3, 7});
  EXPECT_EQ(p.new_rows, (std::vector<std::int64_t>{3, 7}));
  EXPECT_TRUE(p.fetch_rows.empty());
  EXPECT_EQ(p.hits, 0);
  EXPECT_EQ(d.materialized(), 2);
  p = run(d, {-1, 3, 7, 9});  // -1: an absent key
  EXPECT_EQ(p.hits, 2);
  EXPECT_EQ(p.new_rows, (std::vector<std::int64_t>{9}));
  EXPECT_EQ(p.lookups, 2);
  EXPECT_EQ(d.cached(), 3);
  EXPECT_EQ(d.high_water(), 3);
  // An evaluation batch makes nothing: row 11 does not exist yet.
  p = run(d, {3, 11}, false);
  EXPECT_EQ(p.hits, 1);
  EXPECT_TRUE(p.new_rows.empty());
  EXPECT_EQ(d.slot_of(11), CacheDirectory::kAbsent);
}

TEST(CacheDirectory, LruEvictsTheLeastRecentlyUsedAndWritesThemBack) {
  CacheDirectory d = directory(100, 3, EvictionPolicy::Lru);
  run(d, {1});
  run(d, {2});
  run(d, {3});
  run(d, {1});  // 2 is now the least recently used, then 3
  CachePlan p = run(d, {4, 5});
  EXPECT_EQ(sorted(p.evict_rows), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(d.slot_of(2), CacheDirectory::kOnHost);
  EXPECT_EQ(d.slot_of(3), CacheDirectory::kOnHost);
  // The freed slots went to the new rows.
  EXPECT_EQ(sorted(p.new_slots), sorted(p.evict_slots));
  // 2 comes back from the host: a fetch, and 1 (least recent now) leaves.
  p = run(d, {2});
  EXPECT_EQ(p.fetch_rows, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(p.evict_rows, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(p.fetch_slots, p.evict_slots);
}

TEST(CacheDirectory, LfuKeepsFrequentRowsOverRecentOnes) {
  for (EvictionPolicy policy : {EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    CacheDirectory d = directory(100, 3, policy);
    for (int i = 0; i < 5; ++i)
      run(d, {1});   // used 5 times
    run(d, {2, 3});  // once each, more recently
    run(d, {2});     // 2 twice
    CachePlan p = run(d, {4});
    EXPECT_EQ(p.evict_rows, (std::vector<std::int64_t>{3})) << eviction_policy_name(policy);
    p = run(d, {5});
    // 4 (once) and 2 (twice) are in different power-of-two queues: 4 goes.
    EXPECT_EQ(p.evict_rows, (std::vector<std::int64_t>{4})) << eviction_policy_name(policy);
  }
}

TEST(CacheDirectory, LfuHistoryRemembersRowsAfterEviction) {
  CacheDirectory with = directory(100, 2, EvictionPolicy::LfuHistory);
  CacheDirectory without = directory(100, 2, EvictionPolicy::Lfu);
  for (CacheDirectory* d : {&with, &without}) {
    for (int i = 0; i < 6; ++i)
      run(*d, {1});
    run(*d, {2, 3});  // 1 leaves (2 and 3 are this batch's)
    EXPECT_EQ(d->slot_of(1), CacheDirectory::kOnHost);
    run(*d, {1, 2});  // 3 leaves; 1 is back
    run(*d, {2});     // 2 used three times now; 1 once since it came back (4 times before)
  }
  // Row 4 needs a slot: without history 1 looks cold (one use) and goes; with history it is the
  // hottest row and 2 goes.
  EXPECT_EQ(run(without, {4}).evict_rows, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(run(with, {4}).evict_rows, (std::vector<std::int64_t>{2}));
}

TEST(CacheDirectory, RowsOfTheBatchPreparedAheadAreNeverEvicted) {
  for (EvictionPolicy policy :
       {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    CacheDirectory d = directory(100, 4, policy);
    run(d, {1, 2, 3, 4});
    // The next batch is prepared (planned, not released) while the current one runs.
    const CachePlan next = d.plan(std::vector<std::int64_t>{1, 2}, true);
    EXPECT_TRUE(d.pinned(d.slot_of(1)));
    // An evaluation batch in between needs two slots: only 3 and 4 may go, whatever the policy
    // thinks of 1 and 2.
    for (int i = 0; i < 3; ++i)
      run(d, {3, 4});  // make 3 and 4 the hot ones
    CachePlan between = run(d, {50, 51}, false);
    EXPECT_TRUE(between.fetch_rows.empty());      // 50, 51 do not exist: nothing to fetch
    d.loaded(std::vector<std::int64_t>{60, 61});  // two rows on the host
    between = run(d, {60, 61}, false);
    EXPECT_EQ(sorted(between.evict_rows), (std::vector<std::int64_t>{3, 4}))
        << eviction_policy_name(policy);
    EXPECT_GE(d.slot_of(1), 0);
    EXPECT_GE(d.slot_of(2), 0);
    // Three rows from the host cannot come in: two of the four slots are held.
    d.loaded(std::vector<std::int64_t>{62, 63, 64});
    EMBER_EXPECT_THROW_WITH((void)d.plan(std::vector<std::int64_t>{62, 63, 64}, false), Error,
                            "2 of them held for a batch prepared ahead");
    d.started(next);
    d.release(next);
  }
}

TEST(CacheDirectory, TooSmallForOneBatchSaysHowManyRowsAndChangesNothing) {
  CacheDirectory d = directory(100, 3);
  run(d, {1, 2});
  EMBER_EXPECT_THROW_WITH(
      (void)d.plan(std::vector<std::int64_t>{1, 5, 6, 7}, true), Error,
      "layer 'e' (rank 0 of 1): one batch needs 4 distinct rows in the device cache (1 cached, 0 "
      "from the host, 3 new) but the cache holds 3 rows; raise storage.cache_ratio");
  EXPECT_EQ(d.slot_of(5), CacheDirectory::kAbsent);
  EXPECT_GE(d.slot_of(1), 0);
  EXPECT_FALSE(d.pinned(d.slot_of(1)));
  EXPECT_EQ(d.cached(), 2);
  // and it still works
  const CachePlan p = run(d, {1, 5});
  EXPECT_EQ(p.new_rows, (std::vector<std::int64_t>{5}));
}

TEST(CacheDirectory, AbandonedPlansForgetTheirNewRows) {
  CacheDirectory d = directory(100, 4);
  run(d, {1});
  CachePlan p = d.plan(std::vector<std::int64_t>{1, 2, 3}, true);
  EXPECT_EQ(d.materialized(), 1);  // 2 and 3 wait for their batch
  // An evaluation batch does not see the waiting rows.
  const CachePlan eval = run(d, {2, 3}, false);
  EXPECT_EQ(eval.lookups, 0);
  d.abandon(p);
  EXPECT_EQ(d.slot_of(2), CacheDirectory::kAbsent);
  EXPECT_EQ(d.cached(), 1);
  EXPECT_FALSE(d.pinned(d.slot_of(1)));
  // The rows are new again for the batch that makes them.
  p = run(d, {2, 3});
  EXPECT_EQ(p.new_rows, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(d.materialized(), 3);
}

TEST(CacheDirectory, ClearWritesEveryRowBack) {
  CacheDirectory d = directory(10, 3, EvictionPolicy::LfuHistory, true);
  run(d, {0, 4, 9});
  std::vector<std::int64_t> rows, slots;
  d.clear(rows, slots);
  EXPECT_EQ(sorted(rows), (std::vector<std::int64_t>{0, 4, 9}));
  EXPECT_EQ(d.cached(), 0);
  EXPECT_EQ(d.high_water(), 0);
  EXPECT_EQ(d.slot_of(4), CacheDirectory::kOnHost);
  EXPECT_EQ(d.materialized(), 10);
  EXPECT_EQ(run(d, {4}).fetch_rows, (std::vector<std::int64_t>{4}));
}

TEST(CacheDirectory, LargeRandomWorkloadKeepsTheRecordConsistent) {
  auto rng = ember::testing::make_rng();
  for (EvictionPolicy policy :
       {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    const std::int64_t rows = 5000, slots = 257;
    CacheDirectory d = directory(rows, slots, policy);
    auto random_rows = [&](int n) {
      std::vector<std::int64_t> batch;
      for (int i = 0; i < n; ++i)
        batch.push_back(static_cast<std::int64_t>(rng() % rows));
      std::sort(batch.begin(), batch.end());
      batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
      return batch;
    };
    for (int step = 0; step < 400; ++step) {
      // Prepared ahead; now and then an evaluation batch runs before it starts.
      const std::vector<std::int64_t> batch = random_rows(100);
      CachePlan p = d.plan(batch, true);
      if (step % 5 == 4) run(d, random_rows(60), false);
      d.started(p);
      d.release(p);
      std::int64_t cached = 0;
      for (std::int64_t s = 0; s < slots; ++s) {
        const std::int64_t r = d.row_in(static_cast<std::int32_t>(s));
        if (r < 0) continue;
        ++cached;
        ASSERT_EQ(d.slot_of(r), s);
      }
      ASSERT_EQ(cached, d.cached());
      for (std::int64_t r : batch)
        ASSERT_GE(d.slot_of(r), 0) << "row " << r << " of the batch is resident";
    }
  }
}

// Evicted rows reach the host table with their state, and come back as they left.
TEST(HostBackedRows, EvictedRowsAreWrittenBackWithTheirState) {
  RowColumns columns;
  columns.width = 3;
  columns.states = 2;
  columns.steps = true;
  HostBackedRows rows(columns, 50, 2, Place::host(), HostMemory::Pageable, EvictionPolicy::Lru,
                      false, "layer 'e'", "raise storage.cache_ratio");
  EXPECT_EQ(rows.host_memory(), HostMemory::Pageable);
  auto fill_slot = [&](std::int64_t slot, float base) {
    for (int c = 0; c < 3; ++c) {
      float* column = rows.cache(c).data<float>();
      for (std::int64_t i = 0; i < 3; ++i)
        column[slot * 3 + i] = base + static_cast<float>(10 * c + i);
    }
    rows.cache(3).data<std::int64_t>()[slot] = static_cast<std::int64_t>(base);
  };
  auto batch = [&](std::vector<std::int64_t> wanted) {
    CachePlan p = rows.directory().plan(wanted, true);
    rows.stage(p);
    rows.install(p, nullptr, -1);
    rows.start_new_rows(
        p,
        [&](const std::int64_t* r, const std::int64_t* s, std::int64_t n) {
          for (std::int64_t i = 0; i < n; ++i)
            fill_slot(s[i], static_cast<float>(100 * r[i]));
        },
        nullptr);
    rows.directory().started(p);
    rows.directory().release(p);
    return p;
  };
  batch({7, 8});
  const CachePlan p = batch({9});  // 7 leaves
  ASSERT_EQ(p.evict_rows, (std::vector<std::int64_t>{7}));
  for (int c = 0; c < 3; ++c) {
    const auto* host = reinterpret_cast<const float*>(rows.host(c));
    for (std::int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(host[7 * 3 + i], 700.0f + static_cast<float>(10 * c + i)) << "column " << c;
  }
  EXPECT_EQ(reinterpret_cast<const std::int64_t*>(rows.host(3))[7], 700);
  // 7 comes back into the slot 8 leaves, values, states and step as they left.
  const CachePlan back = batch({7});
  ASSERT_EQ(back.fetch_rows, (std::vector<std::int64_t>{7}));
  const std::int64_t slot = back.fetch_slots[0];
  for (int c = 0; c < 3; ++c) {
    for (std::int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(rows.cache(c).data<float>()[slot * 3 + i], 700.0f + static_cast<float>(10 * c + i));
  }
  EXPECT_EQ(rows.cache(3).data<std::int64_t>()[slot], 700);
  // read_rows reads cached and host rows alike.
  std::vector<float> values(9), s0(9), s1(9);
  std::vector<std::int64_t> steps(3);
  const std::vector<std::int64_t> which = {8, 7, 9};
  std::vector<std::byte*> out = {
      reinterpret_cast<std::byte*>(values.data()), reinterpret_cast<std::byte*>(s0.data()),
      reinterpret_cast<std::byte*>(s1.data()), reinterpret_cast<std::byte*>(steps.data())};
  rows.read_rows(which, out, nullptr);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{800, 700, 900}));
  EXPECT_EQ(s1[3 * 2 + 1], 900.0f + 21.0f);
  const CacheStats& st = rows.stats();
  EXPECT_EQ(st.written_back, 2);  // 7, then 8
  EXPECT_EQ(st.fetched, 1);
  EXPECT_EQ(st.new_rows, 3);
  EXPECT_EQ(st.bytes_to_host, 2 * columns.row_bytes());
}

}  // namespace
}  // namespace ember::embedding
