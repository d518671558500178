// The caching device allocator with expandable segments: one segment per stream and pool that
// grows in place, driven against the host stand-in's virtual memory (address reservations whose
// parts are mapped and unmapped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/fake_device_backend.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/error.hpp"
#include "ember/core/expandable_segments.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using testing::fake_stream;
using testing::FakeDeviceBackend;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;
constexpr std::size_t kGranule = 2 * MiB;
// What a growth maps at least; the tests assume it is a whole number of granules above 4 MiB.
constexpr std::size_t kStep = detail::ExpandableSegments::kMinGrowth;
static_assert(kStep % kGranule == 0 && kStep > 4 * MiB);

struct Harness {
  explicit Harness(bool virtual_memory = true, std::size_t capacity = 1024 * MiB) {
    auto owned = std::make_unique<FakeDeviceBackend>();
    fake = owned.get();
    fake->set_capacity(capacity);
    if (virtual_memory) fake->enable_virtual_memory(kGranule);
    CachingDeviceAllocator::Options options;
    options.expandable_segments = true;
    allocator = std::make_unique<CachingDeviceAllocator>(std::move(owned), Place::cuda(0), options);
  }
  CachingAllocatorStats stats() const { return allocator->stats(); }
  char* alloc(std::size_t n, int stream = 0) {
    return static_cast<char*>(allocator->allocate(n, fake_stream(stream)));
  }
  void free(void* p) { allocator->deallocate(p, 0); }

  FakeDeviceBackend* fake;
  std::unique_ptr<CachingDeviceAllocator> allocator;
};

TEST(ExpandableSegments, AFreeEndGrowsInPlace) {
  Harness h;
  ASSERT_TRUE(h.allocator->expandable_segments());
  char* p = h.alloc(kStep - 1 * MiB);  // one growth of the minimum step
  EXPECT_EQ(h.stats().reserved_bytes.current, static_cast<std::int64_t>(kStep));
  h.free(p);
  char* q = h.alloc(kStep + 1 * MiB);  // the free end grows in place, by the minimum step
  EXPECT_EQ(q, p);
  EXPECT_EQ(h.stats().reserved_bytes.current, static_cast<std::int64_t>(2 * kStep));
  EXPECT_EQ(h.fake->maps(), 2);
  EXPECT_EQ(h.stats().segments.current, 1);
  EXPECT_EQ(h.stats().device_mallocs, 2);
  std::memset(q, 1, kStep + 1 * MiB);  // the whole block is mapped memory
  h.free(q);
  EXPECT_EQ(h.fake->segments(), 0u) << "no ordinary segment was used";
}

TEST(ExpandableSegments, AGrowthBeyondTheStepIsRoundedToTheGranule) {
  Harness h;
  char* p = h.alloc(kStep + kGranule + 1);
  EXPECT_EQ(h.stats().reserved_bytes.current, static_cast<std::int64_t>(kStep + 2 * kGranule));
  EXPECT_EQ(h.fake->maps(), 1);
  h.free(p);
}

TEST(ExpandableSegments, BlocksFollowEachOtherWithoutGaps) {
  Harness h;
  char* a = h.alloc(kStep - 1 * MiB);
  char* b = h.alloc(3 * MiB);  // the 1 MiB left after a, grown by one step
  char* c = h.alloc(kStep);    // the kStep - 2 MiB left after b, grown by one step
  EXPECT_EQ(b, a + kStep - 1 * MiB);
  EXPECT_EQ(c, b + 3 * MiB);
  const auto s = h.stats();
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(3 * kStep));
  EXPECT_EQ(s.reserved_bytes.current, s.active_bytes.current + s.cached_bytes);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(h.fake->used()));
  h.free(b);
  h.free(a);
  h.free(c);
  EXPECT_EQ(h.stats().largest_free_block, static_cast<std::int64_t>(3 * kStep)) << "all merged";
}

// The pattern behind trace (d)'s waste with ordinary segments: activations that grow a little
// each time no longer fit the segments the smaller ones left behind.
TEST(ExpandableSegments, GrowingRequestsReuseTheMemoryFreedBefore) {
  std::int64_t reserved[2];
  for (bool expandable : {false, true}) {
    Harness h(expandable);
    std::size_t bytes = 20 * MiB + 300 * KiB;
    for (int round = 0; round < 6; ++round, bytes += 600 * KiB) {
      std::vector<char*> acts;
      for (int i = 0; i < 4; ++i)
        acts.push_back(h.alloc(bytes));
      for (char* p : acts)
        h.free(p);
    }
    reserved[expandable] = h.stats().reserved_bytes.peak;
  }
  const std::int64_t peak_live =
      4 * static_cast<std::int64_t>(20 * MiB + 300 * KiB + 5 * 600 * KiB);
  EXPECT_GT(reserved[0], 3 * peak_live / 2) << "ordinary segments pile up";
  EXPECT_LE(reserved[1], peak_live + static_cast<std::int64_t>(kGranule));
}

TEST(ExpandableSegments, SmallBlocksComeFromASegmentOfTheirOwn) {
  Harness h;
  std::vector<char*> small;
  for (int i = 0; i < 100; ++i)
    small.push_back(h.alloc(64 * KiB));
  char* large = h.alloc(3 * MiB);
  for (int i = 1; i < 100; ++i)
    EXPECT_EQ(small[i], small[i - 1] + 64 * KiB);
  // The large block is in another reservation: not right after the small ones.
  EXPECT_NE(large, small.back() + 64 * KiB);
  // 6.25 MiB of small blocks in whole steps, and a step of its own for the large block.
  EXPECT_EQ(h.stats().reserved_bytes.current,
            static_cast<std::int64_t>((100 * 64 * KiB + kStep - 1) / kStep * kStep + kStep));
  for (char* p : small)
    h.free(p);
  h.free(large);
}

TEST(ExpandableSegments, StreamsHaveSegmentsOfTheirOwn) {
  Harness h;
  char* a = h.alloc(3 * MiB, 1);
  h.free(a);
  char* b = h.alloc(3 * MiB, 2);
  EXPECT_NE(b, a) << "a block freed on stream 1 is not handed to stream 2";
  h.free(b);
  EXPECT_EQ(h.alloc(3 * MiB, 1), a);
  h.free(a);
}

TEST(ExpandableSegments, EmptyCacheUnmapsTheFreeEndsAfterWaitingForTheDevice) {
  Harness h;
  char* a = h.alloc(3 * MiB);
  char* b = h.alloc(7 * MiB);
  char* c = h.alloc(2 * MiB);
  ASSERT_EQ(c, b + 7 * MiB);
  h.free(b);
  h.allocator->empty_cache();
  // b's memory is in the middle of the segment (c after it): it stays mapped.
  EXPECT_EQ(h.stats().reserved_bytes.current, static_cast<std::int64_t>(12 * MiB));
  h.free(a);
  h.free(c);
  h.allocator->empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes.current, 0);
  EXPECT_EQ(h.stats().segments.current, 0);
  EXPECT_EQ(h.fake->used(), 0u);
  EXPECT_GE(h.fake->device_synchronizations(), 1);
  // And the segments grow again from nothing.
  char* d = h.alloc(5 * MiB);
  std::memset(d, 3, 5 * MiB);
  h.free(d);
}

// A large growth is mapped in a few ranges (few driver calls), and memory goes back in whole
// ranges: a free end that begins inside a range keeps that range.
TEST(ExpandableSegments, LargeGrowthsMapInRangesAndTrimWholeRanges) {
  Harness h;
  constexpr std::size_t kRange = detail::ExpandableSegments::kMaxMapRange;
  char* a = h.alloc(2 * kRange + 22 * MiB);
  EXPECT_EQ(h.fake->maps(), 3);
  EXPECT_EQ(h.stats().device_mallocs, 1) << "one growth";
  h.free(a);
  char* b = h.alloc(10 * MiB);  // the start of the free block; the rest is the free end
  EXPECT_EQ(b, a);
  h.allocator->empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes.current, static_cast<std::int64_t>(kRange));
  EXPECT_EQ(h.fake->used(), kRange);
  EXPECT_EQ(h.fake->unmaps(), 1);
  std::memset(b, 7, 10 * MiB);
  h.free(b);
  h.allocator->empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes.current, 0);
  EXPECT_EQ(h.fake->used(), 0u);
}

// A growth whose last range does not fit gives back the ranges it had mapped.
TEST(ExpandableSegments, AGrowthThatFailsHalfWayMapsNothing) {
  constexpr std::size_t kRange = detail::ExpandableSegments::kMaxMapRange;
  Harness h(true, 2 * kRange + 12 * MiB);
  EMBER_EXPECT_THROW_WITH((void)h.alloc(2 * kRange + 22 * MiB), OutOfMemoryError, "out of memory");
  EXPECT_EQ(h.fake->used(), 0u);
  EXPECT_EQ(h.stats().reserved_bytes.current, 0);
  char* p = h.alloc(2 * kRange);  // what fits still does
  std::memset(p, 1, 4096);
  h.free(p);
}

TEST(ExpandableSegments, OutOfMemoryTrimsOtherSegmentsAndRetries) {
  Harness h(true, 10 * MiB);
  char* a = h.alloc(6 * MiB, 1);
  h.free(a);  // stream 1 keeps 6 MiB mapped
  char* b = h.alloc(6 * MiB, 2);
  ASSERT_NE(b, nullptr);
  const auto s = h.stats();
  EXPECT_EQ(s.alloc_retries, 1);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(6 * MiB));
  EXPECT_EQ(h.fake->used(), 6 * MiB);
  h.free(b);
}

TEST(ExpandableSegments, OutOfMemoryMessageNamesTheNumbers) {
  Harness h(true, 8 * MiB);
  char* a = h.alloc(3 * MiB);
  try {
    (void)h.alloc(9 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(9 * MiB)), std::string::npos) << msg;
    EXPECT_NE(msg.find("Fragmentation"), std::string::npos) << msg;
  }
  EXPECT_EQ(h.stats().ooms, 1);
  std::memset(a, 1, 3 * MiB);  // a is untouched by the failed attempt
  h.free(a);
}

TEST(ExpandableSegments, WithoutVirtualMemoryOrdinarySegmentsAreUsed) {
  Harness h(false);
  EXPECT_FALSE(h.allocator->expandable_segments());
  char* p = h.alloc(3 * MiB);
  EXPECT_EQ(h.stats().reserved_bytes.current, static_cast<std::int64_t>(20 * MiB));
  EXPECT_EQ(h.fake->segments(), 1u);
  h.free(p);
}

TEST(ExpandableSegments, RandomUseNeverOverlapsAndKeepsTheBooks) {
  auto rng = testing::make_rng();
  Harness h(true, 512 * MiB);
  struct Live {
    std::size_t n;
    unsigned char fill;
  };
  std::map<char*, Live> live;
  for (int op = 0; op < 3000; ++op) {
    if (live.empty() || rng() % 2 == 0) {
      const std::size_t n = rng() % 4 == 0 ? 1 + rng() % (12 * MiB) : 1 + rng() % (256 * KiB);
      const int stream = static_cast<int>(rng() % 2);
      char* p = h.alloc(n, stream);
      const std::size_t size = h.allocator->allocated_size(p);
      ASSERT_GE(size, n);
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_LE(p + size, next->first) << "overlaps the next block";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + h.allocator->allocated_size(prev->first), p)
            << "overlaps the previous block";
      }
      const auto fill = static_cast<unsigned char>(rng());
      std::memset(p, fill, std::min<std::size_t>(n, 4096));
      std::memset(p + n - std::min<std::size_t>(n, 4096), fill, std::min<std::size_t>(n, 4096));
      live[p] = {n, fill};
      if (rng() % 8 == 0) h.allocator->record_use(p, fake_stream(5));
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      char* p = it->first;
      const Live l = it->second;
      ASSERT_EQ(static_cast<unsigned char>(p[0]), l.fill);
      ASSERT_EQ(static_cast<unsigned char>(p[l.n - 1]), l.fill);
      live.erase(it);
      h.free(p);
    }
    if (rng() % 64 == 0) h.fake->complete_all();
    if (rng() % 500 == 0) h.allocator->empty_cache();
    const auto s = h.stats();
    ASSERT_EQ(s.reserved_bytes.current, s.active_bytes.current + s.cached_bytes);
    ASSERT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(h.fake->used()));
  }
  for (const auto& [p, l] : live)
    h.free(p);
  h.fake->complete_all();
  h.allocator->empty_cache();
  EXPECT_EQ(h.fake->used(), 0u);
  EXPECT_EQ(h.stats().reserved_bytes.current, 0);
}

TEST(ExpandableSegments, DestructionUnmapsAndReleasesEverything) {
  auto owned = std::make_unique<FakeDeviceBackend>();
  FakeDeviceBackend* fake = owned.get();
  fake->enable_virtual_memory(kGranule);
  fake->set_capacity(256 * MiB);
  {
    CachingDeviceAllocator allocator(std::move(owned), Place::cuda(0), {true});
    (void)allocator.allocate(3 * MiB, fake_stream(1));
    void* p = allocator.allocate(100, fake_stream(2));
    allocator.record_use(p, fake_stream(3));
    EXPECT_GT(fake->used(), 0u);
  }
  // The fake's destructor checks that every reservation, mapping and event came back.
}

}  // namespace
}  // namespace ember
