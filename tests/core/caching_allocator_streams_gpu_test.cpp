// The caching device allocator with many threads on their own CUDA streams (each stream's pool
// has its own lock): blocks written and read back by the device through each thread's stream,
// cross-stream uses recorded, and exact statistics afterwards. The CPU tests
// (caching_allocator_streams_test.cpp) drive the same policy against the host stand-in.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/stream.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;
constexpr std::size_t kEdge = 4096;  // bytes written and checked at each end of a block

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return v;
}

struct Block {
  char* p;
  std::size_t n;
  std::uint32_t seed;
  StreamHandle stream;
};

// The two ends of a block that fill() writes and intact() checks: disjoint, so a block shorter
// than two edges is checked once, not overwritten by its own tail.
struct Ends {
  std::size_t head, tail;
};
Ends ends_of(const Block& b) {
  const std::size_t head = std::min(b.n, kEdge);
  return {head, std::min(b.n - head, kEdge)};
}

// Writes each end of the block through `stream`.
void fill(const Block& b) {
  const Ends e = ends_of(b);
  const auto head = pattern(e.head, b.seed);
  const auto tail = pattern(e.tail, b.seed + 1);
  copy_bytes(b.p, Place::cuda(0), head.data(), Place::host(), e.head, b.stream);
  if (e.tail > 0) {
    copy_bytes(b.p + b.n - e.tail, Place::cuda(0), tail.data(), Place::host(), e.tail, b.stream);
  }
}

// Reads each end back through `stream`; false when another owner wrote over it.
bool intact(const Block& b) {
  const Ends e = ends_of(b);
  std::vector<std::uint8_t> head(e.head), tail(e.tail);
  copy_bytes(head.data(), Place::host(), b.p, Place::cuda(0), e.head, b.stream);
  if (e.tail > 0) {
    copy_bytes(tail.data(), Place::host(), b.p + b.n - e.tail, Place::cuda(0), e.tail, b.stream);
  }
  return head == pattern(e.head, b.seed) && tail == pattern(e.tail, b.seed + 1);
}

void run_threads(bool expandable) {
  CachingDeviceAllocator::Options options;
  options.expandable_segments = expandable;
  CachingDeviceAllocator a(make_cuda_device_backend(0), Place::cuda(0), options);
  if (expandable && !a.expandable_segments()) {
    GTEST_SKIP() << "no virtual memory management on device 0";
  }
  constexpr int kThreads = 8;
  constexpr int kOps = 400;
  Stream shared = Stream::create(0);
  std::vector<Stream> own, readers;
  for (int t = 0; t < kThreads; ++t) {
    own.push_back(Stream::create(0));
    readers.push_back(Stream::create(0));
  }
  std::atomic<int> broken{0};
  std::atomic<std::int64_t> allocations{0};
  const std::uint64_t seed = testing::make_rng()();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
      std::vector<Block> mine;
      char* scratch = static_cast<char*>(a.allocate(kEdge, readers[t].handle()));
      auto release = [&](const Block& b) {
        if (!intact(b)) ++broken;
        a.deallocate(b.p, b.n);
      };
      for (int op = 0; op < kOps; ++op) {
        if (mine.empty() || rng() % 2 == 0) {
          const std::size_t n = 1 + (rng() % 8 == 0 ? rng() % (24 * MiB) : rng() % (512 * KiB));
          const StreamHandle s = rng() % 4 == 0 ? shared.handle() : own[t].handle();
          Block b{static_cast<char*>(a.allocate(n, s)), n,
                  static_cast<std::uint32_t>(t * 100000 + op), s};
          ++allocations;
          fill(b);
          if (rng() % 6 == 0) {
            // Another stream reads the block; it must not be reused before that is done.
            a.record_stream(b.p, readers[t].handle());
            copy_bytes(scratch, Place::cuda(0), b.p, Place::cuda(0), std::min(n, kEdge),
                       readers[t].handle());
          }
          mine.push_back(b);
        } else {
          const std::size_t i = rng() % mine.size();
          release(mine[i]);
          mine[i] = mine.back();
          mine.pop_back();
        }
      }
      for (const Block& b : mine)
        release(b);
      a.deallocate(scratch, kEdge);
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(broken.load(), 0) << "blocks were written by another owner";
  synchronize_device(0);
  const auto s = a.stats();
  EXPECT_EQ(s.num_allocs, allocations.load() + kThreads);
  EXPECT_EQ(s.num_frees, s.num_allocs);
  EXPECT_EQ(s.allocations.current, 0);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.requested_bytes.current, 0);
  EXPECT_EQ(s.active_bytes.current, 0);
  EXPECT_EQ(s.pending_blocks, 0);
  EXPECT_EQ(s.reserved_bytes.current, s.cached_bytes);
  EXPECT_EQ(s.event_synchronizations, 0);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes.current, 0);
}

TEST(CachingDeviceAllocatorStreamsGpu, ThreadsOnTheirOwnStreams) {
  EMBER_REQUIRE_GPU();
  run_threads(false);
}

TEST(CachingDeviceAllocatorStreamsGpu, ThreadsOnTheirOwnStreamsWithExpandableSegments) {
  EMBER_REQUIRE_GPU();
  run_threads(true);
}

// The statistics are sharded per stream (caching_counters.hpp); the peaks must stay exact. Eight
// threads on their own CUDA streams churn alloc+free pairs of at most 64 KiB, then each holds a
// set of larger blocks until all do: the true peak is the sum of the sets, by construction.
void run_exact_peaks(bool expandable) {
  CachingDeviceAllocator::Options options;
  options.expandable_segments = expandable;
  CachingDeviceAllocator a(make_cuda_device_backend(0), Place::cuda(0), options);
  if (expandable && !a.expandable_segments()) {
    GTEST_SKIP() << "no virtual memory management on device 0";
  }
  constexpr int kThreads = 8;
  std::vector<Stream> own;
  for (int t = 0; t < kThreads; ++t)
    own.push_back(Stream::create(0));
  std::barrier sync(kThreads);
  std::vector<std::int64_t> held(kThreads), requested(kThreads), blocks(kThreads);
  const std::uint64_t seed = testing::make_rng()();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
      const StreamHandle s = own[t].handle();
      for (int i = 0; i < 5000; ++i) {
        const std::size_t n = 1 + rng() % (64 * KiB);
        a.deallocate(a.allocate(n, s), n);
      }
      sync.arrive_and_wait();
      std::vector<std::pair<void*, std::size_t>> set;
      const int count = 2 + static_cast<int>(rng() % 6);
      for (int k = 0; k < count; ++k) {
        const std::size_t n = 64 * KiB + 1 + rng() % (rng() % 3 == 0 ? 4 * MiB : 256 * KiB);
        void* p = a.allocate(n, s);
        set.emplace_back(p, n);
        held[t] += static_cast<std::int64_t>(a.allocated_size(p));
        requested[t] += static_cast<std::int64_t>(n);
      }
      blocks[t] = count;
      sync.arrive_and_wait();
      for (const auto& [p, n] : set)
        a.deallocate(p, n);
    });
  }
  for (auto& th : threads)
    th.join();
  std::int64_t sum_held = 0, sum_requested = 0, sum_blocks = 0;
  for (int t = 0; t < kThreads; ++t) {
    sum_held += held[t];
    sum_requested += requested[t];
    sum_blocks += blocks[t];
  }
  const auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes.peak, sum_held);
  EXPECT_EQ(s.active_bytes.peak, sum_held);
  EXPECT_EQ(s.requested_bytes.peak, sum_requested);
  EXPECT_EQ(s.allocations.peak, sum_blocks);
  EXPECT_EQ(s.num_allocs, kThreads * 5000 + sum_blocks);
  EXPECT_EQ(s.num_frees, s.num_allocs);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.active_bytes.current, 0);
  EXPECT_EQ(s.allocations.current, 0);
  EXPECT_EQ(s.reserved_bytes.current, s.cached_bytes);
}

TEST(CachingDeviceAllocatorStreamsGpu, PeaksStayExactWithEightThreadsOnEightStreams) {
  EMBER_REQUIRE_GPU();
  run_exact_peaks(false);
}

TEST(CachingDeviceAllocatorStreamsGpu, PeaksStayExactWithExpandableSegments) {
  EMBER_REQUIRE_GPU();
  run_exact_peaks(true);
}

}  // namespace
}  // namespace ember
