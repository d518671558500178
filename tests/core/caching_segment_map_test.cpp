// The caching device allocator's map from addresses to stream pools (caching_segment_map.hpp):
// exact answers for every address of every registered range, whatever shares its 2 MiB
// granules, also while other threads register and remove ranges. The map never touches the
// addresses, so the tests use made-up ones.
#include "ember/core/caching_segment_map.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using detail::SegmentMap;

constexpr std::uintptr_t KiB = 1024;
constexpr std::uintptr_t MiB = 1024 * 1024;
constexpr std::uintptr_t GiB = 1024 * MiB;

const void* at(std::uintptr_t a) {
  return reinterpret_cast<const void*>(a);
}

// A plain reference: the ranges in a std::map.
struct Reference {
  std::map<std::uintptr_t, std::pair<std::uintptr_t, std::uint32_t>> ranges;
  std::uint32_t find(std::uintptr_t a) const {
    auto it = ranges.upper_bound(a);
    if (it == ranges.begin()) return 0;
    --it;
    return a < it->second.first ? it->second.second : 0;
  }
};

// Every registered range answers with its id at its first and last byte, at each granule
// boundary inside it, and at random offsets.
void expect_agrees(const SegmentMap& map, const Reference& ref, std::mt19937_64& rng) {
  for (const auto& [begin, range] : ref.ranges) {
    const auto [end, id] = range;
    std::vector<std::uintptr_t> probes = {begin, end - 1, begin + (end - begin) / 2};
    for (std::uintptr_t g = (begin | (SegmentMap::kGranule - 1)) + 1; g < end && probes.size() < 64;
         g += SegmentMap::kGranule) {
      probes.push_back(g - 1);
      probes.push_back(g);
    }
    for (int i = 0; i < 8; ++i)
      probes.push_back(begin + rng() % (end - begin));
    for (std::uintptr_t a : probes)
      ASSERT_EQ(map.find(at(a)), id) << "address " << std::hex << a;
  }
}

TEST(CachingSegmentMap, UnknownAddressesHaveNoPool) {
  SegmentMap map;
  EXPECT_EQ(map.find(nullptr), 0u);
  EXPECT_EQ(map.find(at(0x7f0000000000)), 0u);
  EXPECT_EQ(map.find(at(~std::uintptr_t{0})), 0u);
  map.add(at(64 * MiB), 2 * MiB, 3);
  EXPECT_EQ(map.find(at(64 * MiB - 1)), 0u);  // the granule before, never touched
  EXPECT_EQ(map.find(at(64 * MiB)), 3u);
  EXPECT_EQ(map.find(at(66 * MiB - 1)), 3u);
  map.remove(at(64 * MiB));
  EXPECT_EQ(map.find(at(64 * MiB)), 0u);
  EXPECT_EQ(map.find(at(65 * MiB)), 0u);
}

TEST(CachingSegmentMap, TwoPoolsShareAGranule) {
  SegmentMap map;
  // Segments of 2 MiB + 512 B side by side, 512-byte aligned: each boundary falls inside a
  // granule that two pools share.
  const std::uintptr_t base = 1 * GiB + 512;
  const std::uintptr_t len = 2 * MiB + 512;
  for (std::uint32_t i = 0; i < 6; ++i)
    map.add(at(base + i * len), len, i + 1);
  for (std::uint32_t i = 0; i < 6; ++i) {
    const std::uintptr_t b = base + i * len;
    EXPECT_EQ(map.find(at(b)), i + 1);
    EXPECT_EQ(map.find(at(b + len - 1)), i + 1);
    EXPECT_EQ(map.find(at(b + len / 2)), i + 1);
  }
  // Removing one keeps its neighbours exact, in the granules they shared with it too.
  map.remove(at(base + 2 * len));
  EXPECT_EQ(map.find(at(base + 2 * len - 1)), 2u);
  EXPECT_EQ(map.find(at(base + 3 * len)), 4u);
  // And its place can go to another pool.
  map.add(at(base + 2 * len), len, 42);
  EXPECT_EQ(map.find(at(base + 2 * len)), 42u);
  EXPECT_EQ(map.find(at(base + 3 * len - 1)), 42u);
  EXPECT_EQ(map.find(at(base + 2 * len - 1)), 2u);
  EXPECT_EQ(map.find(at(base + 3 * len)), 4u);
}

// Ranges shorter than a granule (the growing segments of a tiny device): three pools in one
// granule are more than its word can say; the lookup asks the exact map there.
TEST(CachingSegmentMap, RangesShorterThanAGranule) {
  SegmentMap map;
  const std::uintptr_t g = 3 * GiB;
  map.add(at(g), 512 * KiB, 1);
  map.add(at(g + 512 * KiB), 512 * KiB, 2);
  map.add(at(g + 1 * MiB), 256 * KiB, 3);
  map.add(at(g + 1 * MiB + 256 * KiB), 256 * KiB, 3);  // the same pool again: one run
  map.add(at(g + 2 * MiB - 64 * KiB), 128 * KiB, 4);   // crosses into the next granule
  EXPECT_EQ(map.find(at(g)), 1u);
  EXPECT_EQ(map.find(at(g + 512 * KiB - 1)), 1u);
  EXPECT_EQ(map.find(at(g + 512 * KiB)), 2u);
  EXPECT_EQ(map.find(at(g + 1 * MiB)), 3u);
  EXPECT_EQ(map.find(at(g + 1 * MiB + 300 * KiB)), 3u);
  EXPECT_EQ(map.find(at(g + 2 * MiB - 1)), 4u);
  EXPECT_EQ(map.find(at(g + 2 * MiB + 63 * KiB)), 4u);
  map.remove(at(g + 512 * KiB));
  map.remove(at(g));
  EXPECT_EQ(map.find(at(g + 1 * MiB)), 3u);
  EXPECT_EQ(map.find(at(g + 2 * MiB - 1)), 4u);
}

TEST(CachingSegmentMap, AddressesBeyondTheTree) {
  SegmentMap map;
  const std::uintptr_t high = std::uintptr_t{1} << 58;
  map.add(at(high), 4 * MiB, 9);
  // A range that ends just past the tree's reach: its lower part is in the tree.
  const std::uintptr_t edge = (std::uintptr_t{1} << 57) - 2 * MiB;
  map.add(at(edge), 4 * MiB, 10);
  EXPECT_EQ(map.find(at(high)), 9u);
  EXPECT_EQ(map.find(at(high + 4 * MiB - 1)), 9u);
  EXPECT_EQ(map.find(at(high + 4 * MiB)), 0u);
  EXPECT_EQ(map.find(at(edge)), 10u);
  EXPECT_EQ(map.find(at(edge + 3 * MiB)), 10u);
  map.remove(at(high));
  EXPECT_EQ(map.find(at(high)), 0u);
}

TEST(CachingSegmentMap, BadRangesAreRefused) {
  SegmentMap map;
  map.add(at(8 * GiB), 2 * MiB, 1);
  EMBER_EXPECT_THROW_WITH(map.add(at(8 * GiB), 2 * MiB, 2), Error, "registered already");
  EMBER_EXPECT_THROW_WITH(map.add(at(9 * GiB), 0, 2), Error, "empty");
  EMBER_EXPECT_THROW_WITH(map.add(at(10 * GiB), 2 * MiB, 0), Error, "out of range");
  EMBER_EXPECT_THROW_WITH(map.add(at(10 * GiB), 2 * MiB, SegmentMap::kMaxPoolId + 1), Error,
                          "out of range");
  EXPECT_EQ(map.find(at(8 * GiB)), 1u);
  map.remove(at(12 * GiB));  // not registered: nothing happens
  EXPECT_EQ(map.find(at(8 * GiB)), 1u);
}

TEST(CachingSegmentMap, RandomRangesMatchAReference) {
  auto rng = testing::make_rng();
  SegmentMap map;
  Reference ref;
  // Ranges of 2 MiB to 40 MiB (and now and then shorter ones) at 512-byte aligned addresses in
  // a 1 GiB window, so that they often meet inside a granule.
  const std::uintptr_t window = 5 * GiB;
  for (int op = 0; op < 3000; ++op) {
    if (ref.ranges.empty() || rng() % 3 != 0) {
      const std::uintptr_t len =
          rng() % 10 == 0 ? 512 * (1 + rng() % 4096) : 2 * MiB + 512 * (rng() % (76 * 1024));
      const std::uintptr_t begin = window + 512 * (rng() % (2 * 1024 * 1024));
      auto next = ref.ranges.lower_bound(begin);
      const bool overlaps_next = next != ref.ranges.end() && next->first < begin + len;
      const bool overlaps_prev =
          next != ref.ranges.begin() && std::prev(next)->second.first > begin;
      if (overlaps_next || overlaps_prev) continue;
      const auto id = static_cast<std::uint32_t>(1 + rng() % 5);
      map.add(at(begin), len, id);
      ref.ranges[begin] = {begin + len, id};
    } else {
      auto it = ref.ranges.begin();
      std::advance(it, rng() % ref.ranges.size());
      map.remove(at(it->first));
      ref.ranges.erase(it);
    }
    if (op % 50 == 0) {
      ASSERT_NO_FATAL_FAILURE(expect_agrees(map, ref, rng));
    }
  }
  ASSERT_NO_FATAL_FAILURE(expect_agrees(map, ref, rng));
}

// Readers look up the ranges they own while writers add and remove other ranges in the same
// granules: a reader's answer is always its own id.
TEST(CachingSegmentMap, LookupsStayExactWhileOthersChange) {
  SegmentMap map;
  constexpr int kThreads = 4;
  // Thread t owns the ranges at slots t, t + kThreads, ...; every slot is 2 MiB + 512 B long, so
  // neighbours share granules. Readers keep their slots registered; writers churn theirs.
  const std::uintptr_t base = 16 * GiB + 512;
  const std::uintptr_t len = 2 * MiB + 512;
  constexpr int kSlots = 64;
  std::atomic<int> wrong{0};
  std::atomic<int> started{0};
  std::atomic<int> writers_done{0};
  auto slots_of = [&](int t) {
    std::vector<std::uintptr_t> mine;
    for (int s = t; s < kSlots; s += kThreads)
      mine.push_back(base + static_cast<std::uintptr_t>(s) * len);
    return mine;
  };
  for (int t = 0; t < kThreads; ++t) {
    for (std::uintptr_t b : slots_of(t))
      map.add(at(b), len, static_cast<std::uint32_t>(t + 1));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const bool reader = t % 2 == 0;
      const auto id = static_cast<std::uint32_t>(t + 1);
      const std::vector<std::uintptr_t> mine = slots_of(t);
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      ++started;
      while (started < kThreads) {
      }
      if (reader) {
        // Until the writers are done; mostly near the ends, in the granules shared with them.
        while (writers_done < kThreads / 2) {
          const std::uintptr_t b = mine[rng() % mine.size()];
          const std::uintptr_t off = rng() % 4096;
          const std::uintptr_t a = rng() % 2 == 0 ? b + off : b + len - 1 - off;
          if (map.find(at(a)) != id) ++wrong;
        }
      } else {
        for (int round = 0; round < 20000; ++round) {
          const std::uintptr_t b = mine[rng() % mine.size()];
          map.remove(at(b));
          map.add(at(b), len, id);
        }
        ++writers_done;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace ember
