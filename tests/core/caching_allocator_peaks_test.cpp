// The caching device allocator's statistics are kept per stream (caching_counters.hpp: shards
// with budgets, so that threads on different streams share no cache line); these tests check
// that the figures and above all the peaks stay exact: against a plain running total on one
// thread over many streams, and with eight threads whose combined peak is known by construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "core/fake_device_backend.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using testing::fake_stream;
using testing::FakeDeviceBackend;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

std::int64_t signed_(std::size_t n) {
  return static_cast<std::int64_t>(n);
}

// The figures a plain running total gives, with their maxima.
struct Reference {
  std::int64_t allocated = 0, requested = 0, blocks = 0;
  std::int64_t allocated_peak = 0, requested_peak = 0, blocks_peak = 0;
  void add(std::int64_t size, std::int64_t bytes, std::int64_t n) {
    allocated += size;
    requested += bytes;
    blocks += n;
    allocated_peak = std::max(allocated_peak, allocated);
    requested_peak = std::max(requested_peak, requested);
    blocks_peak = std::max(blocks_peak, blocks);
  }
  void reset_peaks() {
    allocated_peak = allocated;
    requested_peak = requested;
    blocks_peak = blocks;
  }
};

void expect_matches(const CachingAllocatorStats& s, const Reference& r, int step) {
  ASSERT_EQ(s.allocated_bytes.current, r.allocated) << "step " << step;
  ASSERT_EQ(s.allocated_bytes.peak, r.allocated_peak) << "step " << step;
  ASSERT_EQ(s.requested_bytes.current, r.requested) << "step " << step;
  ASSERT_EQ(s.requested_bytes.peak, r.requested_peak) << "step " << step;
  ASSERT_EQ(s.active_bytes.current, r.allocated) << "step " << step;  // no other streams
  ASSERT_EQ(s.active_bytes.peak, r.allocated_peak) << "step " << step;
  ASSERT_EQ(s.allocations.current, r.blocks) << "step " << step;
  ASSERT_EQ(s.allocations.peak, r.blocks_peak) << "step " << step;
}

// One thread, many streams, random sizes and order: every peak equals the running maximum of
// the total, whichever streams the growth came from, also across reset_peak_stats().
TEST(CachingAllocatorPeaks, EqualTheRunningMaximumAcrossStreams) {
  for (bool expandable : {false, true}) {
    auto owned = std::make_unique<FakeDeviceBackend>();
    if (expandable) owned->enable_virtual_memory(2 * MiB);
    CachingDeviceAllocator a(std::move(owned), Place::cuda(0),
                             CachingDeviceAllocator::Options{expandable});
    auto rng = testing::make_rng();
    struct Live {
      void* p;
      std::size_t size, bytes;
    };
    std::vector<Live> live;
    Reference ref;
    for (int step = 0; step < 20000; ++step) {
      const auto dice = rng() % 100;
      if (dice < 2) {
        a.reset_peak_stats();
        ref.reset_peaks();
      } else if (live.empty() || dice < 52) {
        // Phases where the live set grows and shrinks, so that peaks are passed again and again.
        const std::size_t bytes = 1 + (rng() % 9 == 0 ? rng() % (3 * MiB) : rng() % (70 * KiB));
        void* p = a.allocate(bytes, fake_stream(static_cast<int>(rng() % 5)));
        const std::size_t size = a.allocated_size(p);
        live.push_back({p, size, bytes});
        ref.add(signed_(size), signed_(bytes), 1);
      } else {
        const std::size_t i = rng() % live.size();
        a.deallocate(live[i].p, live[i].bytes);
        ref.add(-signed_(live[i].size), -signed_(live[i].bytes), -1);
        live[i] = live.back();
        live.pop_back();
      }
      if (step % 97 == 0 || dice < 3) expect_matches(a.stats(), ref, step);
    }
    for (const Live& l : live) {
      a.deallocate(l.p, l.bytes);
      ref.add(-signed_(l.size), -signed_(l.bytes), -1);
    }
    expect_matches(a.stats(), ref, -1);
    EXPECT_EQ(a.stats().num_allocs, a.stats().num_frees);
  }
}

// Eight threads on eight streams. Each first churns alloc+free pairs of at most 64 KiB (one
// block live at a time), then, after a barrier, allocates a set of larger blocks and holds it
// until every thread holds its set. Nobody ever holds more than in its set, so the true peak is
// the sum of the sets, exactly; a watcher reads the statistics all the while. Twice, with
// reset_peak_stats() between the rounds.
TEST(CachingAllocatorPeaks, ExactWithEightThreadsOnEightStreams) {
  constexpr int kThreads = 8;
  for (bool expandable : {false, true}) {
    auto owned = std::make_unique<FakeDeviceBackend>();
    FakeDeviceBackend* fake = owned.get();
    if (expandable) owned->enable_virtual_memory(2 * MiB);
    CachingDeviceAllocator a(std::move(owned), Place::cuda(0),
                             CachingDeviceAllocator::Options{expandable});
    const std::uint64_t seed = testing::make_rng()();
    std::int64_t allocs_so_far = 0;
    for (int round = 0; round < 2; ++round) {
      std::barrier sync(kThreads);
      std::vector<std::int64_t> held(kThreads), requested(kThreads), blocks(kThreads);
      std::atomic<bool> done{false};
      std::atomic<int> bad_snapshots{0};
      std::thread watcher([&] {
        while (!done) {
          const auto s = a.stats();
          if (s.allocated_bytes.current > s.allocated_bytes.peak ||
              s.requested_bytes.current > s.allocated_bytes.current ||
              s.allocations.current > s.allocations.peak || s.allocated_bytes.current < 0) {
            ++bad_snapshots;
          }
          std::this_thread::yield();
        }
      });
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          std::mt19937_64 rng(seed + static_cast<std::uint64_t>(100 * round + t));
          const StreamHandle stream = fake_stream(t + 1);
          for (int i = 0; i < 4000; ++i) {
            const std::size_t n = 1 + rng() % (64 * KiB);
            a.deallocate(a.allocate(n, stream), n);
          }
          sync.arrive_and_wait();
          std::vector<std::pair<void*, std::size_t>> set;
          const int count = 2 + static_cast<int>(rng() % 6);
          for (int k = 0; k < count; ++k) {
            const std::size_t n = 64 * KiB + 1 + rng() % (rng() % 3 == 0 ? 4 * MiB : 256 * KiB);
            void* p = a.allocate(n, stream);
            set.emplace_back(p, n);
            held[t] += signed_(a.allocated_size(p));
            requested[t] += signed_(n);
          }
          blocks[t] = count;
          sync.arrive_and_wait();  // every set is held now
          for (const auto& [p, n] : set)
            a.deallocate(p, n);
        });
      }
      for (auto& th : threads)
        th.join();
      done = true;
      watcher.join();
      std::int64_t sum_held = 0, sum_requested = 0, sum_blocks = 0;
      for (int t = 0; t < kThreads; ++t) {
        sum_held += held[t];
        sum_requested += requested[t];
        sum_blocks += blocks[t];
      }
      fake->complete_all();
      const auto s = a.stats();
      EXPECT_EQ(bad_snapshots.load(), 0);
      EXPECT_EQ(s.allocated_bytes.peak, sum_held) << "round " << round;
      EXPECT_EQ(s.active_bytes.peak, sum_held) << "round " << round;
      EXPECT_EQ(s.requested_bytes.peak, sum_requested) << "round " << round;
      EXPECT_EQ(s.allocations.peak, sum_blocks) << "round " << round;
      EXPECT_EQ(s.allocated_bytes.current, 0);
      EXPECT_EQ(s.requested_bytes.current, 0);
      EXPECT_EQ(s.active_bytes.current, 0);
      EXPECT_EQ(s.allocations.current, 0);
      allocs_so_far += kThreads * 4000 + sum_blocks;
      EXPECT_EQ(s.num_allocs, allocs_so_far) << "round " << round;
      EXPECT_EQ(s.num_frees, allocs_so_far) << "round " << round;
      a.reset_peak_stats();
      const auto r = a.stats();
      EXPECT_EQ(r.allocated_bytes.peak, 0);
      EXPECT_EQ(r.allocations.peak, 0);
    }
  }
}

}  // namespace
}  // namespace ember
