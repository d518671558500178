// CacheDirectory's plans against a plain reference of the same rules, on random streams of
// batches (odd sizes, batches prepared ahead with evaluation batches in between, abandoned plans,
// loaded rows, emptied caches, batches too large for the cache), for every policy and several
// OpenMP thread counts: the plans, and the record after every step, must be the same. The
// reference keeps a stamp per slot and sorts the slots for every eviction: slow and obviously
// right. Also the pieces the directory is built from: the policy's logs stay bounded, the chunks
// of a loop cover it in order, large arrays keep their values; and the staging lists written from
// a plan.
#include <omp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/embedding/cache_directory.hpp"
#include "ember/embedding/host_chunks.hpp"
#include "ember/embedding/large_page_allocator.hpp"
#include "ember/embedding/staging_layout.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

constexpr std::int32_t kOnHost = CacheDirectory::kOnHost, kAbsent = CacheDirectory::kAbsent;

// The rules of cache_directory.hpp and cache_policy.hpp, written plainly.
class ReferenceDirectory {
 public:
  ReferenceDirectory(std::int64_t rows, std::int64_t slots, EvictionPolicy policy, bool made)
      : policy_(policy),
        slot_of_(static_cast<std::size_t>(rows), made ? kOnHost : kAbsent),
        row_count_(static_cast<std::size_t>(rows), 0),
        slots_(static_cast<std::size_t>(slots)),
        materialized_(made ? rows : 0) {
    for (std::int64_t i = slots - 1; i >= 0; --i)
      free_.push_back(static_cast<std::int32_t>(i));
  }

  // nullopt: the plan cannot be made (nothing changed).
  std::optional<CachePlan> plan(const std::vector<std::int64_t>& rows, bool training) {
    CachePlan p;
    p.training = training;
    std::int64_t pinned_hits = 0;
    for (const std::int64_t r : rows) {
      if (r < 0) continue;
      if (r >= static_cast<std::int64_t>(slot_of_.size())) return std::nullopt;
      const std::int32_t s = slot_of_[static_cast<std::size_t>(r)];
      if (s >= 0) {
        if (slot(s).waiting) {
          if (training) return std::nullopt;
          continue;
        }
        ++p.lookups;
        ++p.hits;
        p.pinned.push_back(s);
        if (slot(s).pins == 0) ++pinned_hits;
      } else if (s == kOnHost) {
        ++p.lookups;
        p.fetch_rows.push_back(r);
      } else if (training) {
        p.new_rows.push_back(r);
      }
    }
    const auto need = static_cast<std::int64_t>(p.fetch_rows.size() + p.new_rows.size());
    const auto free_slots = static_cast<std::int64_t>(free_.size());
    if (need > free_slots + cached() - pinned_slots() - pinned_hits) return std::nullopt;
    for (const std::int32_t s : p.pinned) {
      ++slot(s).pins;
      use(s, false);
    }
    std::vector<std::int32_t> taken;
    while (static_cast<std::int64_t>(taken.size()) < need && !free_.empty()) {
      taken.push_back(free_.back());
      free_.pop_back();
      high_water_ = std::max<std::int64_t>(high_water_, taken.back() + 1);
    }
    // The victims: occupied, not pinned, by (queue, last use).
    std::vector<std::tuple<int, std::uint64_t, std::int32_t>> order;
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      const Slot& x = slots_[s];
      if (x.row >= 0 && x.pins == 0) order.emplace_back(x.queue, x.stamp, static_cast<int>(s));
    }
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; static_cast<std::int64_t>(taken.size()) < need; ++i) {
      const std::int32_t s = std::get<2>(order.at(i));
      p.evict_rows.push_back(slot(s).row);
      p.evict_slots.push_back(s);
      slot_of_[static_cast<std::size_t>(slot(s).row)] = kOnHost;
      slot(s).row = -1;
      taken.push_back(s);
    }
    std::size_t next = 0;
    for (const std::int64_t r : p.fetch_rows) {
      p.fetch_slots.push_back(taken[next]);
      place(r, taken[next++], false, p);
    }
    for (const std::int64_t r : p.new_rows) {
      p.new_slots.push_back(taken[next]);
      place(r, taken[next++], true, p);
    }
    return p;
  }

  void started(const CachePlan& p) {
    for (const std::int64_t s : p.new_slots) {
      if (!slot(s).waiting) continue;
      slot(s).waiting = false;
      ++materialized_;
    }
  }
  void release(const CachePlan& p) {
    for (const std::int32_t s : p.pinned)
      slot(s).pins = std::max(0, slot(s).pins - 1);
  }
  void abandon(const CachePlan& p) {
    for (std::size_t i = 0; i < p.new_slots.size(); ++i) {
      const auto s = static_cast<std::int32_t>(p.new_slots[i]);
      if (!slot(s).waiting || slot(s).row != p.new_rows[i]) continue;
      slot_of_[static_cast<std::size_t>(p.new_rows[i])] = kAbsent;
      slot(s) = Slot{};
      free_.push_back(s);
    }
    for (const std::int32_t s : p.pinned) {
      if (slot(s).row >= 0) slot(s).pins = std::max(0, slot(s).pins - 1);
    }
  }
  void loaded(const std::vector<std::int64_t>& rows) {
    for (const std::int64_t r : rows) {
      if (slot_of_[static_cast<std::size_t>(r)] != kAbsent) continue;
      slot_of_[static_cast<std::size_t>(r)] = kOnHost;
      ++materialized_;
    }
  }
  void clear(std::vector<std::int64_t>& rows, std::vector<std::int64_t>& slots) {
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      const Slot& x = slots_[s];
      if (x.row >= 0) {
        slot_of_[static_cast<std::size_t>(x.row)] = x.waiting ? kAbsent : kOnHost;
        if (!x.waiting) {
          rows.push_back(x.row);
          slots.push_back(static_cast<std::int64_t>(s));
        }
      }
      slots_[s] = Slot{};
    }
    free_.clear();
    for (auto i = static_cast<std::int64_t>(slots_.size()) - 1; i >= 0; --i)
      free_.push_back(static_cast<std::int32_t>(i));
    high_water_ = 0;
  }

  // Every observable part of the record equals the directory's.
  void expect_same(const CacheDirectory& d, const std::string& what) const {
    ASSERT_EQ(d.cached(), cached()) << what;
    ASSERT_EQ(d.high_water(), high_water_) << what;
    ASSERT_EQ(d.materialized(), materialized_) << what;
    for (std::size_t r = 0; r < slot_of_.size(); ++r)
      ASSERT_EQ(d.slot_of(static_cast<std::int64_t>(r)), slot_of_[r]) << what << ", row " << r;
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      const auto i = static_cast<std::int32_t>(s);
      ASSERT_EQ(d.row_in(i), slots_[s].row) << what << ", slot " << s;
      ASSERT_EQ(d.pinned(i), slots_[s].pins > 0) << what << ", slot " << s;
      ASSERT_EQ(d.waiting(i), slots_[s].waiting) << what << ", slot " << s;
    }
  }

  std::int64_t rows() const { return static_cast<std::int64_t>(slot_of_.size()); }
  std::int32_t slot_of(std::int64_t r) const { return slot_of_[static_cast<std::size_t>(r)]; }

 private:
  struct Slot {
    std::int64_t row = -1;
    int pins = 0;
    bool waiting = false;
    int queue = -1;
    std::uint64_t stamp = 0;  // the order of uses: the last one is the largest
    std::uint32_t slot_count = 0;
  };
  Slot& slot(std::int64_t s) { return slots_[static_cast<std::size_t>(s)]; }
  std::int64_t cached() const {
    return static_cast<std::int64_t>(slots_.size()) - static_cast<std::int64_t>(free_.size());
  }
  std::int64_t pinned_slots() const {
    return std::count_if(slots_.begin(), slots_.end(), [](const Slot& x) { return x.pins > 0; });
  }
  void place(std::int64_t r, std::int32_t s, bool waiting, CachePlan& p) {
    slot_of_[static_cast<std::size_t>(r)] = s;
    slot(s).row = r;
    slot(s).waiting = waiting;
    ++slot(s).pins;
    p.pinned.push_back(s);
    use(s, true);
  }
  // lru: one queue; lfu: log2 of the uses since the row came in; lfu_history: of all its uses.
  void use(std::int32_t s, bool entering) {
    std::uint32_t* count = nullptr;
    if (policy_ == EvictionPolicy::Lfu) {
      count = &slot(s).slot_count;
      if (entering) *count = 0;
    } else if (policy_ == EvictionPolicy::LfuHistory) {
      count = &row_count_[static_cast<std::size_t>(slot(s).row)];
    }
    int q = 0;
    if (count != nullptr) {
      ++*count;
      q = std::min(31, static_cast<int>(std::bit_width(*count)) - 1);
    }
    slot(s).queue = q;
    slot(s).stamp = ++clock_;
  }

  EvictionPolicy policy_;
  std::vector<std::int32_t> slot_of_;
  std::vector<std::uint32_t> row_count_;
  std::vector<Slot> slots_;
  std::vector<std::int32_t> free_;
  std::int64_t high_water_ = 0, materialized_ = 0;
  std::uint64_t clock_ = 0;
};

void expect_same_plan(const CachePlan& got, const CachePlan& want, const std::string& what) {
  EXPECT_EQ(got.training, want.training) << what;
  EXPECT_EQ(got.lookups, want.lookups) << what;
  EXPECT_EQ(got.hits, want.hits) << what;
  EXPECT_EQ(got.fetch_rows, want.fetch_rows) << what;
  EXPECT_EQ(got.fetch_slots, want.fetch_slots) << what;
  EXPECT_EQ(got.new_rows, want.new_rows) << what;
  EXPECT_EQ(got.new_slots, want.new_slots) << what;
  EXPECT_EQ(got.evict_rows, want.evict_rows) << what;
  EXPECT_EQ(got.evict_slots, want.evict_slots) << what;
  EXPECT_EQ(got.pinned, want.pinned) << what;
}

struct Shape {
  std::int64_t rows, slots, batch;  // batch: rows drawn per batch (before duplicates go)
  bool made;
};

// Distinct rows, power-law popular (a few hot rows, a long tail), shuffled or sorted, now and
// then with absent keys (-1) and rows that are not there.
std::vector<std::int64_t> draw_batch(std::mt19937_64& rng, std::int64_t rows, std::int64_t n) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int64_t> b;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = std::pow(u(rng), 3.0);  // denser near 0
    b.push_back(std::min(rows - 1, static_cast<std::int64_t>(x * static_cast<double>(rows))));
  }
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  if (rng() % 4 == 0) std::shuffle(b.begin(), b.end(), rng);
  if (rng() % 5 == 0) b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng() % (b.size() + 1)), -1);
  return b;
}

// Runs one random scenario on the directory and the reference side by side.
void run_scenario(const Shape& shape, EvictionPolicy policy, std::uint64_t seed, int steps,
                  const std::string& label) {
  std::mt19937_64 rng(seed);
  CacheDirectory d(shape.rows, shape.slots, policy, shape.made, "layer 'e'", "raise it");
  ReferenceDirectory ref(shape.rows, shape.slots, policy, shape.made);
  auto planned = [&](const std::vector<std::int64_t>& rows, bool training,
                     const std::string& what) -> std::optional<CachePlan> {
    const std::optional<CachePlan> want = ref.plan(rows, training);
    if (!want) {
      EXPECT_THROW((void)d.plan(rows, training), Error) << what;
      return std::nullopt;
    }
    CachePlan got = d.plan(rows, training);
    expect_same_plan(got, *want, what);
    return got;
  };
  for (int step = 0; step < steps; ++step) {
    const std::string what = label + ", step " + std::to_string(step);
    const std::int64_t n =
        1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(shape.batch));
    const std::optional<CachePlan> next = planned(draw_batch(rng, shape.rows, n), true, what);
    ref.expect_same(d, what + " (planned)");
    if (::testing::Test::HasFatalFailure()) return;
    if (rng() % 4 == 0) {  // an evaluation batch before the prepared batch starts
      const std::optional<CachePlan> eval =
          planned(draw_batch(rng, shape.rows, n / 2 + 1), false, what + " (evaluation)");
      if (eval) {
        d.started(*eval);
        d.release(*eval);
        ref.started(*eval);
        ref.release(*eval);
      }
    }
    if (next) {
      if (rng() % 6 == 0) {
        d.abandon(*next);
        ref.abandon(*next);
      } else {
        d.started(*next);
        d.release(*next);
        ref.started(*next);
        ref.release(*next);
      }
    }
    if (!shape.made && rng() % 7 == 0) {  // rows read from a saved model: only ones not cached
      std::vector<std::int64_t> rows;
      for (int i = 0; i < 50; ++i) {
        const auto r = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(shape.rows));
        if (ref.slot_of(r) < 0) rows.push_back(r);
      }
      d.loaded(rows);
      ref.loaded(rows);
    }
    if (rng() % 23 == 0) {
      std::vector<std::int64_t> rows, slots, want_rows, want_slots;
      d.clear(rows, slots);
      ref.clear(want_rows, want_slots);
      EXPECT_EQ(rows, want_rows) << what;
      EXPECT_EQ(slots, want_slots) << what;
    }
    ref.expect_same(d, what);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

const char* name(EvictionPolicy p) {
  return eviction_policy_name(p);
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : was_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(was_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int was_;
};

TEST(CachePlanReference, SmallOddCachesPlanAsTheReference) {
  const std::uint64_t seed = ember::testing::make_rng()();
  const Shape shapes[] = {{1, 1, 2, false},       {7, 1, 2, true},     {7, 3, 5, false},
                          {101, 7, 9, true},      {1023, 7, 6, false}, {1023, 257, 300, true},
                          {5000, 257, 200, false}};
  for (EvictionPolicy policy :
       {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    for (const Shape& s : shapes) {
      run_scenario(s, policy, seed + static_cast<std::uint64_t>(s.rows * 31 + s.slots), 300,
                   std::string(name(policy)) + ", " + std::to_string(s.rows) + " rows, " +
                       std::to_string(s.slots) + " slots, seed " + std::to_string(seed));
      if (HasFatalFailure()) return;
    }
  }
}

// Batches of tens of thousands of rows: the directory's loops run on several threads (chunks of
// 8192 rows at least); the plans must not depend on how many.
TEST(CachePlanReference, LargeBatchesPlanAsTheReferenceOnAnyThreadCount) {
  const std::uint64_t seed = ember::testing::make_rng()();
  const Shape shape{65537, 40009, 45000, true};
  for (EvictionPolicy policy :
       {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    for (int threads : {1, 2, 3}) {
      ThreadCount use(threads);
      run_scenario(shape, policy, seed, 25,
                   std::string(name(policy)) + ", " + std::to_string(threads) + " threads, seed " +
                       std::to_string(seed));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(CachePlanReference, HotRowsTouchedOverAndOverKeepTheLogsBounded) {
  // One hot row in a cache of 3: every use leaves a stale log entry behind; the logs must be
  // compacted, not grow with the number of batches.
  for (EvictionPolicy policy :
       {EvictionPolicy::Lru, EvictionPolicy::Lfu, EvictionPolicy::LfuHistory}) {
    CacheDirectory d(10, 3, policy, true, "layer 'e'", "raise it");
    ReferenceDirectory ref(10, 3, policy, true);
    for (int i = 0; i < 20000; ++i) {
      const std::vector<std::int64_t> rows = {0, 1 + i % 9};
      const CachePlan p = d.plan(rows, true);
      const std::optional<CachePlan> want = ref.plan(rows, true);
      ASSERT_TRUE(want.has_value());
      expect_same_plan(p, *want, name(policy));
      d.started(p);
      d.release(p);
      ref.started(p);
      ref.release(p);
      ASSERT_LE(d.log_entries(), 4 * 3 + 4096) << name(policy) << ", batch " << i;
    }
    ref.expect_same(d, name(policy));
  }
}

TEST(HostChunks, ChunksCoverTheLoopInOrder) {
  for (std::size_t n : {0, 1, 7, 8191, 8192, 65537, 1000003}) {
    for (std::size_t chunks : {1, 2, 3, 7, 16}) {
      std::size_t at = 0;
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t b = chunk_begin(n, chunks, c), e = chunk_begin(n, chunks, c + 1);
        ASSERT_EQ(b, at);
        ASSERT_LE(e - b, n / chunks + 1);
        at = e;
      }
      ASSERT_EQ(at, n);
      std::vector<int> seen(n, 0);
      for_each_chunk(n, chunks, [&](std::size_t, std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i)
          ++seen[i];
      });
      ASSERT_TRUE(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    }
    EXPECT_GE(chunk_count(n), 1u);
    EXPECT_LE(chunk_count(n),
              std::max<std::size_t>(1, n / kRowsPerChunk));  // chunks are worth the threads
  }
}

TEST(StagingLists, EveryListAndTheMapChangesInOrder) {
  auto rng = ember::testing::make_rng();
  RowColumns columns;
  columns.width = 3;
  columns.states = 1;
  for (int threads : {1, 3}) {
    ThreadCount use(threads);
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{40009}}) {
      CachePlan p;
      auto fill = [&](std::vector<std::int64_t>& v, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
          v.push_back(static_cast<std::int64_t>(rng() % 1000003));
      };
      fill(p.evict_rows, size);
      fill(p.evict_slots, size);
      fill(p.fetch_rows, size + 3);
      fill(p.fetch_slots, size + 3);
      fill(p.new_rows, size / 2);
      fill(p.new_slots, size / 2);
      const StagingLayout l = StagingLayout::of(columns, p);
      ASSERT_EQ(l.m, static_cast<std::int64_t>(size + 3));
      std::vector<std::byte> buffer(l.total);
      write_staging_lists(p, l, buffer.data());
      auto list = [&](std::size_t at, std::size_t n) {
        const auto* v = reinterpret_cast<const std::int64_t*>(buffer.data() + at);
        return std::vector<std::int64_t>(v, v + n);
      };
      EXPECT_EQ(list(l.evict_rows, size), p.evict_rows);
      EXPECT_EQ(list(l.evict_slots, size), p.evict_slots);
      EXPECT_EQ(list(l.fetch_rows, size + 3), p.fetch_rows);
      EXPECT_EQ(list(l.fetch_slots, size + 3), p.fetch_slots);
      EXPECT_EQ(list(l.new_rows, size / 2), p.new_rows);
      EXPECT_EQ(list(l.new_slots, size / 2), p.new_slots);
      // The map's changes: victims leave (-1), then the fetched rows and the new rows arrive.
      std::vector<std::int64_t> rows = p.evict_rows, values(size, -1);
      rows.insert(rows.end(), p.fetch_rows.begin(), p.fetch_rows.end());
      values.insert(values.end(), p.fetch_slots.begin(), p.fetch_slots.end());
      rows.insert(rows.end(), p.new_rows.begin(), p.new_rows.end());
      values.insert(values.end(), p.new_slots.begin(), p.new_slots.end());
      EXPECT_EQ(list(l.map_rows, rows.size()), rows);
      const auto* map_values = reinterpret_cast<const std::int32_t*>(buffer.data() + l.map_values);
      for (std::size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(map_values[i], values[i]) << "entry " << i << " of " << values.size();
    }
  }
}

TEST(LargePageAllocator, LargeAndSmallArraysKeepTheirValues) {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, (std::size_t{3} << 20) / 8 + 5}) {
    std::vector<std::int64_t, LargePageAllocator<std::int64_t>> v(n);
    std::iota(v.begin(), v.end(), 7);
    v.resize(2 * n + 1, -1);
    const auto copy = v;
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(copy[i], static_cast<std::int64_t>(i) + 7);
    ASSERT_EQ(copy.back(), -1);
  }
}

}  // namespace
}  // namespace ember::embedding
