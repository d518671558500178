// The caching device allocator under many threads on many streams: each stream's pool has its
// own lock, so these tests drive the pools, the shared live-block map, the shared counters and
// the out-of-memory path (which takes every pool's lock) all at once, against the host stand-in.
// No block may be handed to two owners or lost, and the statistics must come out exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/fake_device_backend.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using testing::fake_stream;
using testing::FakeDeviceBackend;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

struct StressSetup {
  bool expandable = false;
  std::size_t capacity = SIZE_MAX;  // the stand-in device's memory
  int threads = 8;
  int ops = 3000;
};

// Every live block of every thread, to catch a block handed to two owners.
class Owners {
 public:
  bool claim(char* p, std::size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto next = blocks_.lower_bound(p);
    if (next != blocks_.end() && p + size > next->first) return false;
    if (next != blocks_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second > p) return false;
    }
    blocks_[p] = size;
    return true;
  }
  void release(char* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.erase(p);
  }

 private:
  std::mutex mutex_;
  std::map<char*, std::size_t> blocks_;
};

struct ThreadTally {
  std::int64_t allocs = 0;
  std::int64_t ooms = 0;
  std::int64_t max_live_bytes = 0;  // rounded sizes
  bool failed = false;
};

// A pattern only this allocation writes: thread, sequence number and offset mixed.
unsigned char pattern(int thread, std::uint32_t seq, std::size_t offset) {
  return static_cast<unsigned char>((thread * 131 + seq * 31 + offset) & 0xff);
}

void stress_thread(CachingDeviceAllocator& a, Owners& owners, const StressSetup& setup, int t,
                   std::uint64_t seed, ThreadTally& tally) {
  std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
  struct Mine {
    char* p;
    std::size_t n;
    std::size_t size;
    std::uint32_t seq;
  };
  std::vector<Mine> mine;
  std::int64_t live = 0;
  constexpr std::size_t kEdge = 128;  // bytes written and checked at each end of a block
  auto check_and_free = [&](const Mine& b) {
    const std::size_t edge = std::min(b.n, kEdge);
    for (std::size_t k = 0; k < edge; ++k) {
      if (static_cast<unsigned char>(b.p[k]) != pattern(t, b.seq, k)) tally.failed = true;
      const std::size_t back = b.n - 1 - k;
      if (static_cast<unsigned char>(b.p[back]) != pattern(t, b.seq, back)) tally.failed = true;
    }
    owners.release(b.p);
    a.deallocate(b.p, b.n);
    live -= static_cast<std::int64_t>(b.size);
  };
  for (int op = 0; op < setup.ops && !tally.failed; ++op) {
    if (mine.empty() || rng() % 2 == 0) {
      const std::size_t n = 1 + (rng() % 5 == 0 ? rng() % (12 * MiB) : rng() % (256 * KiB));
      // Mostly the thread's own stream; sometimes one that all threads share.
      const int stream = rng() % 4 == 0 ? 100 : t;
      char* p = nullptr;
      try {
        p = static_cast<char*>(a.allocate(n, fake_stream(stream)));
      } catch (const OutOfMemoryError&) {
        ++tally.ooms;
        if (!mine.empty()) {
          check_and_free(mine.back());
          mine.pop_back();
        }
        continue;
      }
      ++tally.allocs;
      const std::size_t size = a.allocated_size(p);
      if (size < n || !owners.claim(p, size)) tally.failed = true;
      const auto seq = static_cast<std::uint32_t>(op);
      const std::size_t edge = std::min(n, kEdge);
      for (std::size_t k = 0; k < edge; ++k) {
        p[k] = static_cast<char>(pattern(t, seq, k));
        p[n - 1 - k] = static_cast<char>(pattern(t, seq, n - 1 - k));
      }
      if (rng() % 8 == 0) a.record_stream(p, fake_stream(200 + t));
      if (rng() % 8 == 0) a.record_use(p, fake_stream(300 + t));
      mine.push_back({p, n, size, seq});
      live += static_cast<std::int64_t>(size);
      tally.max_live_bytes = std::max(tally.max_live_bytes, live);
    } else {
      const std::size_t i = rng() % mine.size();
      const Mine b = mine[i];
      mine[i] = mine.back();
      mine.pop_back();
      check_and_free(b);
    }
  }
  for (const Mine& b : mine)
    check_and_free(b);
}

// Runs the stress and checks the allocator's books afterwards.
void run_stress(const StressSetup& setup) {
  auto owned = std::make_unique<FakeDeviceBackend>();
  FakeDeviceBackend* fake = owned.get();
  fake->set_capacity(setup.capacity);
  if (setup.expandable) fake->enable_virtual_memory(2 * MiB);
  CachingDeviceAllocator::Options options;
  options.expandable_segments = setup.expandable;
  CachingDeviceAllocator a(std::move(owned), Place::cuda(0), options);
  ASSERT_EQ(a.expandable_segments(), setup.expandable);

  Owners owners;
  std::vector<ThreadTally> tallies(static_cast<std::size_t>(setup.threads));
  std::atomic<bool> done{false};
  const std::uint64_t seed = testing::make_rng()();
  // Other streams finish their work now and then; statistics and cache flushes come from a
  // thread of their own, taking every pool's lock while the others allocate.
  std::atomic<int> inconsistent{0};
  std::thread watcher([&] {
    int round = 0;
    while (!done) {
      fake->complete_all();
      const auto s = a.stats();
      if (s.reserved_bytes.current != s.active_bytes.current + s.cached_bytes) ++inconsistent;
      if (s.allocated_bytes.current > s.active_bytes.current) ++inconsistent;
      if (++round % 16 == 0) a.empty_cache();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < setup.threads; ++t) {
    threads.emplace_back(
        [&, t] { stress_thread(a, owners, setup, t, seed, tallies[static_cast<std::size_t>(t)]); });
  }
  for (auto& th : threads)
    th.join();
  done = true;
  watcher.join();

  std::int64_t allocs = 0, ooms = 0, largest_thread_peak = 0, sum_of_peaks = 0;
  for (const ThreadTally& tally : tallies) {
    EXPECT_FALSE(tally.failed) << "a block was overwritten, handed out twice or too small";
    allocs += tally.allocs;
    ooms += tally.ooms;
    largest_thread_peak = std::max(largest_thread_peak, tally.max_live_bytes);
    sum_of_peaks += tally.max_live_bytes;
  }
  EXPECT_EQ(inconsistent.load(), 0) << "a snapshot where reserved != active + cached";

  fake->complete_all();
  const auto s = a.stats();
  EXPECT_EQ(s.num_allocs, allocs);
  EXPECT_EQ(s.num_frees, allocs);
  EXPECT_EQ(s.ooms, ooms);
  // A device too small for all threads runs out (hundreds of times; none means the out-of-memory
  // path was not tested).
  if (setup.capacity < 1024 * MiB) EXPECT_GT(ooms, 0);
  if (setup.capacity >= 1024 * MiB) EXPECT_EQ(ooms, 0);
  std::printf("[ stress   ] %lld allocations, %lld out of memory, %lld retries\n",
              static_cast<long long>(allocs), static_cast<long long>(ooms),
              static_cast<long long>(s.alloc_retries));
  EXPECT_EQ(s.allocations.current, 0);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.requested_bytes.current, 0);
  EXPECT_EQ(s.active_bytes.current, 0);
  EXPECT_EQ(s.pending_blocks, 0);
  EXPECT_EQ(s.reserved_bytes.current, s.cached_bytes);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(fake->used()));
  // Growths (one map each: no request here needs more than one range) and ordinary segments
  // (where no address space could be reserved, the fallback).
  EXPECT_EQ(s.device_mallocs, fake->maps() + fake->mallocs());
  EXPECT_EQ(s.device_frees, fake->unmaps() + fake->frees());
  if (!setup.expandable) {
    EXPECT_EQ(s.segments.current, static_cast<std::int64_t>(fake->segments()));
    EXPECT_EQ(fake->maps(), 0);
  }
  // The peak lies between the most one thread held and what all held at their own peaks.
  EXPECT_GE(s.allocated_bytes.peak, largest_thread_peak);
  EXPECT_LE(s.allocated_bytes.peak, sum_of_peaks);
  EXPECT_LE(s.reserved_bytes.peak,
            static_cast<std::int64_t>(std::min<std::size_t>(setup.capacity, std::size_t{1} << 40)));
  a.empty_cache();
  EXPECT_EQ(fake->used(), 0u) << "memory was lost";
  EXPECT_EQ(a.stats().reserved_bytes.current, 0);
  EXPECT_EQ(fake->events_acquired(), 0u);
}

TEST(CachingDeviceAllocatorStreams, ThreadsOnManyStreamsKeepExactBooks) {
  run_stress({});
}

TEST(CachingDeviceAllocatorStreams, ThreadsOnManyStreamsWithExpandableSegments) {
  StressSetup setup;
  setup.expandable = true;
  setup.capacity = std::size_t{16} << 30;  // each segment reserves this much address space
  run_stress(setup);
}

// A device too small for all threads at once: the out-of-memory path (every pool locked, other
// streams waited for, caches flushed) runs while the other threads allocate and free.
TEST(CachingDeviceAllocatorStreams, OutOfMemoryWhileOtherStreamsAllocate) {
  StressSetup setup;
  setup.capacity = 96 * MiB;
  run_stress(setup);
}

TEST(CachingDeviceAllocatorStreams, OutOfMemoryWithExpandableSegments) {
  StressSetup setup;
  setup.expandable = true;
  setup.capacity = 96 * MiB;
  run_stress(setup);
}

// One stream's pool: blocks freed on stream A are never handed to stream B, even when B's pool
// is empty and A's has exactly the right block cached.
TEST(CachingDeviceAllocatorStreams, PoolsNeverLendBlocksToOtherStreams) {
  auto owned = std::make_unique<FakeDeviceBackend>();
  FakeDeviceBackend* fake = owned.get();
  CachingDeviceAllocator a(std::move(owned), Place::cuda(0));
  std::vector<void*> first;
  for (int s = 0; s < 40; ++s)
    first.push_back(a.allocate(64 * KiB, fake_stream(s)));
  for (int s = 0; s < 40; ++s)
    a.deallocate(first[static_cast<std::size_t>(s)], 0);
  EXPECT_EQ(fake->mallocs(), 40);  // a segment of its own per stream
  for (int s = 0; s < 40; ++s) {
    void* p = a.allocate(64 * KiB, fake_stream(s));
    EXPECT_EQ(p, first[static_cast<std::size_t>(s)]) << "stream " << s << " reuses its own block";
    a.deallocate(p, 0);
  }
  EXPECT_EQ(fake->mallocs(), 40);
  const auto s = a.stats();
  EXPECT_EQ(s.segments.current, 40);
  EXPECT_EQ(s.num_allocs, 80);
  EXPECT_EQ(s.allocations.peak, 40);
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<std::int64_t>(40 * 64 * KiB));
}

// A free finds the pool of its pointer by address (caching_segment_map.hpp), whichever thread
// frees it and whatever stream that thread last used: blocks of many streams, freed crosswise by
// other threads, go back to their own stream's pool, and each stream then reuses exactly its own
// blocks. Segments of different streams lie side by side, so many share a 2 MiB granule.
TEST(CachingDeviceAllocatorStreams, FreesFromOtherThreadsGoBackToTheBlocksOwnPool) {
  auto owned = std::make_unique<FakeDeviceBackend>();
  FakeDeviceBackend* fake = owned.get();
  CachingDeviceAllocator a(std::move(owned), Place::cuda(0));
  constexpr int kStreams = 16;
  constexpr int kBlocks = 24;  // per stream, of mixed sizes (small and large pools)
  auto size_of = [](int s, int i) { return (i % 3 == 2 ? 3 * MiB : 8 * KiB) + 512 * (s + i); };
  std::vector<std::vector<void*>> blocks(kStreams);
  for (int s = 0; s < kStreams; ++s) {
    for (int i = 0; i < kBlocks; ++i)
      blocks[static_cast<std::size_t>(s)].push_back(a.allocate(size_of(s, i), fake_stream(s)));
  }
  const std::int64_t mallocs = fake->mallocs();
  // Thread t frees the blocks of stream (t + 1) mod kStreams, after allocating on its own stream.
  std::vector<std::thread> threads;
  for (int t = 0; t < kStreams; ++t) {
    threads.emplace_back([&, t] {
      a.deallocate(a.allocate(512, fake_stream(t)), 0);
      for (void* p : blocks[static_cast<std::size_t>((t + 1) % kStreams)])
        a.deallocate(p, 0);
    });
  }
  for (auto& th : threads)
    th.join();
  auto s = a.stats();
  EXPECT_EQ(s.allocations.current, 0);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.reserved_bytes.current, s.cached_bytes);
  // The same requests again, stream by stream in reverse order: nothing new is needed, and no
  // block overlaps where another stream's blocks were. (Not necessarily where its own were: two
  // free segments of a stream may be taken in another order than they were made.)
  std::map<char*, std::pair<std::size_t, int>> before;  // address -> size, stream
  for (int s2 = 0; s2 < kStreams; ++s2) {
    for (int i = 0; i < kBlocks; ++i) {
      before[static_cast<char*>(
          blocks[static_cast<std::size_t>(s2)][static_cast<std::size_t>(i)])] = {size_of(s2, i),
                                                                                 s2};
    }
  }
  std::vector<void*> again;
  for (int s2 = kStreams - 1; s2 >= 0; --s2) {
    for (int i = 0; i < kBlocks; ++i) {
      char* p = static_cast<char*>(a.allocate(size_of(s2, i), fake_stream(s2)));
      again.push_back(p);
      auto it = before.upper_bound(p);
      if (it != before.begin()) --it;
      int others = 0;
      for (; it != before.end() && it->first < p + size_of(s2, i); ++it) {
        if (it->first + it->second.first > p && it->second.second != s2) ++others;
      }
      EXPECT_EQ(others, 0) << "stream " << s2 << ", block " << i;
    }
  }
  EXPECT_EQ(fake->mallocs(), mallocs);
  for (void* p : again)
    a.deallocate(p, 0);
  s = a.stats();
  EXPECT_EQ(s.num_allocs, s.num_frees);
  EXPECT_EQ(s.allocated_bytes.current, 0);
}

}  // namespace
}  // namespace ember
