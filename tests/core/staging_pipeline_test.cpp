// The host side of the staged copies, driven against a stand-in DMA engine: the thread pool, the
// chunk plan, parallel_memcpy and the slot pipeline in both directions.
#include "ember/core/staging_pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember::detail {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::uint8_t> v(n);
  for (auto& b : v)
    b = static_cast<std::uint8_t>(rng());
  return v;
}

// Names the first differing byte: a missing last byte must not read as "vectors differ".
::testing::AssertionResult same_bytes(const std::uint8_t* expected, const std::uint8_t* actual,
                                      std::size_t n) {
  const auto [e, a] = std::mismatch(expected, expected + n, actual);
  if (e == expected + n) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "first difference at byte " << (e - expected) << " of " << n << " (expected " << int{*e}
         << ", got " << int{*a} << ")";
}

// --- the thread pool ---------------------------------------------------------------------------

TEST(CopyThreadPool, RunsEveryIndexOnceAndWaits) {
  CopyThreadPool pool;
  for (int threads : {1, 2, 5, 8}) {
    std::vector<std::atomic<int>> calls(threads);
    std::set<std::thread::id> ids;
    std::mutex ids_mutex;
    const int ran = pool.run(threads, [&](int i) {
      ++calls[i];
      std::lock_guard<std::mutex> lock(ids_mutex);
      ids.insert(std::this_thread::get_id());
    });
    EXPECT_EQ(ran, threads);
    for (int i = 0; i < threads; ++i)
      EXPECT_EQ(calls[i].load(), 1) << i << " of " << threads;
    EXPECT_EQ(ids.size(), static_cast<std::size_t>(threads));
    EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u) << "index 0 runs on the caller";
  }
  EXPECT_EQ(pool.workers(), 7);  // started once, reused
}

TEST(CopyThreadPool, ABusyPoolRunsTheCallerAlone) {
  CopyThreadPool pool;
  std::atomic<int> inner_ran{0};
  pool.run(3, [&](int i) {
    if (i == 0) inner_ran = pool.run(4, [](int) {});  // nested: the pool is busy
  });
  EXPECT_EQ(inner_ran.load(), 1);
}

TEST(CopyThreadPool, RethrowsABodysException) {
  CopyThreadPool pool;
  EXPECT_THROW(pool.run(4,
                        [](int i) {
                          if (i == 2) throw std::runtime_error("worker failed");
                        }),
               std::runtime_error);
  EXPECT_THROW(pool.run(4,
                        [](int i) {
                          if (i == 0) throw std::runtime_error("caller failed");
                        }),
               std::runtime_error);
  // Still usable afterwards.
  std::atomic<int> n{0};
  EXPECT_EQ(pool.run(4, [&](int) { ++n; }), 4);
  EXPECT_EQ(n.load(), 4);
}

// --- parallel_memcpy ---------------------------------------------------------------------------

// The 12 MiB + 1 failure of the first device run: the old split gave each of 8 threads
// floor(bytes / 8) rounded up to a page, which for 4 MiB + 1 bytes (the last 8 MiB chunk's
// rest) is exactly 512 KiB, so 8 pieces covered 4 MiB and the last byte was never copied.
TEST(ParallelMemcpy, CopiesEveryByteForAnySizeAndThreadCount) {
  auto rng = testing::make_rng();
  CopyThreadPool pool;
  const auto random = random_bytes(5 * MiB + 11, rng);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, 1 * MiB - 1, 1 * MiB + 1,
                        4 * MiB + 1, 5 * MiB + 11}) {
    const std::vector<std::uint8_t> src(random.begin(), random.begin() + n);
    for (int threads : {1, 3, 8, 16}) {
      std::vector<std::uint8_t> dst(n + 64, 0xa5);
      parallel_memcpy(dst.data(), src.data(), n, threads, pool);
      EXPECT_TRUE(same_bytes(src.data(), dst.data(), n))
          << n << " bytes, " << threads << " threads";
      for (std::size_t i = n; i < n + 64; ++i) {
        ASSERT_EQ(dst[i], 0xa5) << "wrote past the end: " << n << " bytes, " << threads
                                << " threads";
      }
    }
  }
}

// --- the chunk plan ----------------------------------------------------------------------------

TEST(StagingPlan, ChunksCoverTheCopyWithinTheSlot) {
  for (std::size_t slot : {1 * MiB, 4 * MiB, 8 * MiB}) {
    for (int threads : {1, 2, 8, 16}) {
      for (std::size_t n : {std::size_t{1}, 1 * MiB + 1, 4 * MiB, 12 * MiB + 1, 256 * MiB}) {
        const StagingPlan p = plan_staging(n, slot, threads);
        SCOPED_TRACE(::testing::Message()
                     << n << " bytes, slot " << slot << ", " << threads << " threads");
        EXPECT_LE(p.chunk, slot);
        EXPECT_GE(p.chunk, std::min(slot, kMinStagingChunk));
        EXPECT_GE(p.chunks * p.chunk, n);
        EXPECT_LT((p.chunks - 1) * p.chunk, n);
        EXPECT_GE(p.threads, 1);
        EXPECT_LE(p.threads, threads);
        EXPECT_LE(static_cast<std::size_t>(p.threads), p.chunks);
      }
    }
  }
  EXPECT_EQ(plan_staging(0, 4 * MiB, 8).chunks, 0u);
  // A large copy uses whole slots and every thread.
  EXPECT_EQ(plan_staging(256 * MiB, 4 * MiB, 8).chunk, 4 * MiB);
  EXPECT_EQ(plan_staging(256 * MiB, 4 * MiB, 8).threads, 8);
  // A copy at the staging threshold is still spread over several threads.
  EXPECT_GE(plan_staging(4 * MiB, 4 * MiB, 8).threads, 4);
}

// --- the pipeline against a stand-in DMA engine --------------------------------------------------

// Executes queued transfers in order on a thread of its own, slowly and irregularly, like a
// stream. An upload checks that its slot still holds what it held when the upload was queued:
// a slot refilled before its transfer ran would be caught there.
class FakeDma final : public StagingTransport {
 public:
  FakeDma(int slots, std::uint64_t seed, int fail_at = -1)
      : done_(slots, 0), queued_(slots, 0), fail_at_(fail_at), rng_(seed) {
    thread_ = std::thread([this] { run(); });
  }
  ~FakeDma() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  void upload(int slot, void* dst, const void* staging, std::size_t bytes) override {
    queue(slot, {true, slot, static_cast<char*>(dst), static_cast<const char*>(staging), bytes,
                 checksum(staging, bytes)});
  }
  void download(int slot, void* staging, const void* src, std::size_t bytes) override {
    queue(slot,
          {false, slot, static_cast<char*>(staging), static_cast<const char*>(src), bytes, 0});
  }
  void wait(int slot) override {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return done_[slot] == queued_[slot]; });
  }

  int corrupted() const { return corrupted_.load(); }
  int transfers() const { return transfers_.load(); }

 private:
  struct Transfer {
    bool upload;
    int slot;
    char* dst;
    const char* src;
    std::size_t bytes;
    std::uint64_t sum;
  };

  // Every byte counts (a refill changes the sum), eight at a time.
  static std::uint64_t checksum(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    std::uint64_t h = 1469598103934665603ull;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, b + i, 8);
      h = (h ^ w) * 1099511628211ull;
    }
    for (; i < n; ++i)
      h = (h ^ b[i]) * 1099511628211ull;
    return h;
  }

  void queue(int slot, const Transfer& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fail_at_ >= 0 && issued_++ == fail_at_) throw std::runtime_error("fake DMA failure");
    // A slot's earlier transfers must be done before it is used again: the pipeline waits.
    if (done_[slot] != queued_[slot]) ++corrupted_;
    ++queued_[slot];
    queue_.push_back(t);
    wake_.notify_all();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Transfer t = queue_.front();
      queue_.pop_front();
      const bool slow = rng_() % 4 == 0;  // now and then the engine lags behind the host
      lock.unlock();
      if (slow) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (t.upload && checksum(t.src, t.bytes) != t.sum) ++corrupted_;
      std::memcpy(t.dst, t.src, t.bytes);
      ++transfers_;
      lock.lock();
      ++done_[t.slot];
      finished_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::deque<Transfer> queue_;
  std::vector<std::int64_t> done_, queued_;
  int fail_at_;
  int issued_ = 0;
  bool stop_ = false;
  std::mt19937_64 rng_;
  std::atomic<int> corrupted_{0};
  std::atomic<int> transfers_{0};
  std::thread thread_;
};

struct Slots {
  Slots(int count, std::size_t bytes) : storage(count, std::vector<std::uint8_t>(bytes)) {
    for (auto& s : storage)
      pointers.push_back(s.data());
  }
  std::vector<std::vector<std::uint8_t>> storage;
  std::vector<void*> pointers;
};

TEST(StagingPipeline, RoundTripsOfOddSizesWithAnySetup) {
  auto rng = testing::make_rng();
  CopyThreadPool pool;
  const auto random = random_bytes(9 * MiB + 7, rng);
  // One thread, and more threads than slots; sizes below, at and across chunk boundaries.
  for (std::size_t slot_bytes : {1 * MiB, 4 * MiB}) {
    for (int slots : {1, 3}) {
      for (int threads : {1, 4}) {
        for (std::size_t n : {std::size_t{1}, 1 * MiB - 1, 4 * MiB + 1, 9 * MiB + 7}) {
          SCOPED_TRACE(::testing::Message() << n << " bytes, " << slots << " slots of "
                                            << slot_bytes << ", " << threads << " threads");
          Slots s(slots, slot_bytes);
          FakeDma dma(slots, rng());
          const std::uint8_t* src = random.data() + (random.size() - n);
          std::vector<std::uint8_t> device(n + 16, 0x5a), back(n + 16, 0xc3);
          pipeline_to_device(dma, s.pointers, slot_bytes, device.data(), src, n, threads, pool);
          for (int k = 0; k < slots; ++k)
            dma.wait(k);  // as a stream synchronisation would
          ASSERT_TRUE(same_bytes(src, device.data(), n));
          EXPECT_EQ(device[n], 0x5a) << "wrote past the end on the device";
          pipeline_to_host(dma, s.pointers, slot_bytes, back.data(), device.data(), n, threads,
                           pool);
          ASSERT_TRUE(same_bytes(src, back.data(), n));
          EXPECT_EQ(back[n], 0xc3) << "wrote past the end on the host";
          EXPECT_EQ(dma.corrupted(), 0) << "a slot was reused before its transfer finished";
          EXPECT_EQ(static_cast<std::size_t>(dma.transfers()),
                    2 * plan_staging(n, slot_bytes, threads).chunks);
        }
      }
    }
  }
}

// The host-to-device call returns once the source has been read: the caller may overwrite it
// while uploads are still queued.
TEST(StagingPipeline, SourceMayBeReusedAtOnce) {
  auto rng = testing::make_rng();
  CopyThreadPool pool;
  Slots s(4, 1 * MiB);
  FakeDma dma(4, rng());
  auto src = random_bytes(5 * MiB + 5, rng);
  const auto expected = src;
  std::vector<std::uint8_t> device(src.size());
  pipeline_to_device(dma, s.pointers, 1 * MiB, device.data(), src.data(), src.size(), 3, pool);
  std::fill(src.begin(), src.end(), 0);
  for (int k = 0; k < 4; ++k)
    dma.wait(k);
  EXPECT_TRUE(same_bytes(expected.data(), device.data(), expected.size()));
  EXPECT_EQ(dma.corrupted(), 0);
}

TEST(StagingPipeline, AFailingTransferStopsEveryThreadAndIsRethrown) {
  auto rng = testing::make_rng();
  CopyThreadPool pool;
  for (int threads : {1, 4}) {
    Slots s(3, 1 * MiB);
    FakeDma dma(3, rng(), /*fail_at=*/5);
    const auto src = random_bytes(6 * MiB, rng);
    std::vector<std::uint8_t> device(src.size());
    EXPECT_THROW(pipeline_to_device(dma, s.pointers, 1 * MiB, device.data(), src.data(), src.size(),
                                    threads, pool),
                 std::runtime_error);
    // The pool is free again and the transport still works.
    for (int k = 0; k < 3; ++k)
      dma.wait(k);
  }
}

TEST(StagingPipeline, NoSlotsIsAClearError) {
  CopyThreadPool pool;
  FakeDma dma(1, 1);
  std::vector<std::uint8_t> a(10), b(10);
  EXPECT_THROW(pipeline_to_device(dma, {}, 1 * MiB, a.data(), b.data(), 10, 2, pool), Error);
  // Nothing to copy: nothing is checked or done.
  pipeline_to_host(dma, {}, 1 * MiB, a.data(), b.data(), 0, 2, pool);
}

}  // namespace
}  // namespace ember::detail

namespace ember {
namespace {

// A host's staged copies by thread count (the figures of bench_memory's sweeps), -1 for counts
// it has no figure for; every count asked for is noted in `tried`.
std::function<double(int)> host(std::map<int, double> staged, std::vector<int>* tried) {
  return [=](int threads) {
    tried->push_back(threads);
    const auto it = staged.find(threads);
    return it == staged.end() ? -1.0 : it->second;
  };
}

TEST(StagingChoice, TheFastestStagedCopyIsChosenWhereMoreThreadsStopPaying) {
  std::vector<int> tried;
  // The H200 host (2 MiB slots): 8 threads at 45.6 GB/s, 12 and 16 slower; the search stops
  // after those two fruitless steps.
  const std::map<int, double> h200 = {{1, 6.0},  {2, 12.1}, {3, 17.5},  {4, 28.9},
                                      {6, 37.0}, {8, 45.6}, {12, 42.4}, {16, 43.0}};
  EXPECT_EQ(detail::choose_staging_threads(54.7, host(h200, &tried), 48), 8);
  EXPECT_EQ(tried, (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16}));
  tried.clear();
  // The 4 x H100 host, where a rule on the memcpy rate took 6 threads: 12 are fastest.
  const std::map<int, double> h100x4 = {{1, 5.5},  {2, 10.8}, {3, 16.0},  {4, 21.0},
                                        {6, 34.3}, {8, 37.9}, {12, 40.6}, {16, 39.0}};
  EXPECT_EQ(detail::choose_staging_threads(54.9, host(h100x4, &tried), 48), 12);
}

TEST(StagingChoice, FewerThreadsWinUnlessMoreGainEnough) {
  std::vector<int> tried;
  // 12 threads 2 % faster than 8 are not worth their cores.
  const std::map<int, double> flat = {{1, 8.0},  {2, 16.0}, {3, 24.0},  {4, 30.0},
                                      {6, 38.0}, {8, 42.0}, {12, 42.8}, {16, 42.9}};
  EXPECT_EQ(detail::choose_staging_threads(55, host(flat, &tried), 48), 8);
  tried.clear();
  // A fruitless step does not end the search: the next may still gain.
  const std::map<int, double> late = {{1, 8.0},  {2, 16.0}, {3, 24.0},  {4, 30.0},
                                      {6, 30.2}, {8, 40.0}, {12, 40.1}, {16, 40.2}};
  EXPECT_EQ(detail::choose_staging_threads(55, host(late, &tried), 48), 8);
  EXPECT_EQ(tried.back(), 16);
}

TEST(StagingChoice, TheSearchStopsNearTheLinkAndAtTheCoresAllowed) {
  std::vector<int> tried;
  // 4 threads already reach 95 % of a 25 GB/s link: nothing is left to gain.
  const std::map<int, double> fast = {{1, 9.0}, {2, 17.0}, {3, 22.0}, {4, 24.0}, {6, 24.5}};
  EXPECT_EQ(detail::choose_staging_threads(25, host(fast, &tried), 48), 4);
  EXPECT_EQ(tried, (std::vector<int>{1, 2, 3, 4}));
  tried.clear();
  // No more threads than allowed, and at least one.
  const std::map<int, double> steady = {{1, 5.0}, {2, 10.0}, {3, 15.0}, {4, 20.0}, {6, 30.0}};
  EXPECT_EQ(detail::choose_staging_threads(55, host(steady, &tried), 5), 4);
  EXPECT_EQ(tried.back(), 4);
  EXPECT_EQ(detail::choose_staging_threads(55, host(steady, &tried), 0), 1);
}

TEST(StagingChoice, AThreadCountThatCouldNotBeMeasuredIsNotChosen) {
  auto rate = [](int threads) { return threads == 4 ? -1.0 : 5.0 * threads; };
  const int chosen = detail::choose_staging_threads(55, rate, 16);
  EXPECT_NE(chosen, 4);
  EXPECT_EQ(chosen, 12);  // 60 GB/s: past 95 % of the link, where the search stops
}

TEST(StagingChoice, SlotsTakeAtMost64MicrosecondsOfTheLink) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  EXPECT_EQ(detail::choose_staging_slot_bytes(55), 2 * MiB);   // PCIe 5: 3.5 MB in 64 us
  EXPECT_EQ(detail::choose_staging_slot_bytes(25), 1 * MiB);   // PCIe 4: 1.6 MB
  EXPECT_EQ(detail::choose_staging_slot_bytes(66), 4 * MiB);   // 4.2 MB: a 4 MiB slot fits
  EXPECT_EQ(detail::choose_staging_slot_bytes(65), 2 * MiB);   // 4.16 MB: short of 4 MiB
  EXPECT_EQ(detail::choose_staging_slot_bytes(5), 1 * MiB);    // at least 1 MiB
  EXPECT_EQ(detail::choose_staging_slot_bytes(400), 8 * MiB);  // at most 8 MiB
  EXPECT_EQ(detail::choose_staging_slot_bytes(0), 1 * MiB);
}

}  // namespace
}  // namespace ember
