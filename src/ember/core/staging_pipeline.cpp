#include "ember/core/staging_pipeline.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "ember/core/error.hpp"

namespace ember::detail {

namespace {

constexpr std::size_t kChunkAlignment = std::size_t{64} << 10;

constexpr std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

// Which chunk may use each slot next, for one copy. Slot k serves chunks k, k + slots, ...;
// whoever finishes with a chunk hands the slot to the chunk `slots` later.
class SlotTurns {
 public:
  explicit SlotTurns(std::size_t slots)
      : slots_(slots), turns_(std::make_unique<std::atomic<std::size_t>[]>(slots)) {
    for (std::size_t k = 0; k < slots; ++k)
      turns_[k].store(k);
  }

  // Blocks until chunk `j` may use its slot; false when the copy has failed meanwhile.
  bool await(std::size_t j) {
    std::atomic<std::size_t>& turn = turns_[j % slots_];
    for (;;) {
      if (failed_.load(std::memory_order_acquire)) return false;
      const std::size_t now = turn.load(std::memory_order_acquire);
      if (now == j) return true;
      turn.wait(now, std::memory_order_acquire);
    }
  }

  void pass_on(std::size_t j) {
    std::atomic<std::size_t>& turn = turns_[j % slots_];
    turn.store(j + slots_, std::memory_order_release);
    turn.notify_all();
  }

  // Wakes every waiter for good: the copy is abandoned.
  void fail() {
    failed_.store(true, std::memory_order_release);
    for (std::size_t k = 0; k < slots_; ++k) {
      turns_[k].store(std::numeric_limits<std::size_t>::max(), std::memory_order_release);
      turns_[k].notify_all();
    }
  }

  bool failed() const { return failed_.load(std::memory_order_acquire); }

 private:
  std::size_t slots_;
  std::unique_ptr<std::atomic<std::size_t>[]> turns_;
  std::atomic<bool> failed_{false};
};

void check_slots(const std::vector<void*>& slots, std::size_t slot_bytes) {
  EMBER_CHECK(!slots.empty() && slot_bytes > 0, "a staged copy needs staging slots, got ",
              slots.size(), " of ", slot_bytes, " bytes");
}

// Runs `one_chunk(j, slot)` for every chunk on up to plan.threads threads, slots handed on in
// chunk order.
template <typename OneChunk>
int run_pipeline(const StagingPlan& plan, const std::vector<void*>& slots, CopyThreadPool& pool,
                 OneChunk one_chunk) {
  SlotTurns turns(slots.size());
  std::atomic<std::size_t> next{0};
  return pool.run(plan.threads, [&](int) {
    for (;;) {
      if (turns.failed()) return;
      const std::size_t j = next.fetch_add(1, std::memory_order_relaxed);
      if (j >= plan.chunks) return;
      if (!turns.await(j)) return;
      try {
        one_chunk(j, static_cast<int>(j % slots.size()));
      } catch (...) {
        turns.fail();
        throw;
      }
      turns.pass_on(j);
    }
  });
}

}  // namespace

StagingPlan plan_staging(std::size_t bytes, std::size_t slot_bytes, int threads) {
  StagingPlan plan;
  if (bytes == 0) return plan;
  threads = std::max(threads, 1);
  const std::size_t per_thread = ceil_div(bytes, 2 * static_cast<std::size_t>(threads));
  const std::size_t aligned = ceil_div(per_thread, kChunkAlignment) * kChunkAlignment;
  plan.chunk = std::min(std::max(aligned, kMinStagingChunk), slot_bytes);
  plan.chunks = ceil_div(bytes, plan.chunk);
  plan.threads = static_cast<int>(std::min<std::size_t>(plan.chunks, threads));
  return plan;
}

int pipeline_to_device(StagingTransport& transport, const std::vector<void*>& slots,
                       std::size_t slot_bytes, void* dst, const void* src, std::size_t bytes,
                       int threads, CopyThreadPool& pool) {
  if (bytes == 0) return 0;
  check_slots(slots, slot_bytes);
  const StagingPlan plan = plan_staging(bytes, slot_bytes, threads);
  auto* d = static_cast<char*>(dst);
  const auto* h = static_cast<const char*>(src);
  return run_pipeline(plan, slots, pool, [&](std::size_t j, int k) {
    const std::size_t at = j * plan.chunk;
    const std::size_t n = std::min(plan.chunk, bytes - at);
    transport.wait(k);  // the slot's previous transfer (of this copy or an earlier one) is done
    std::memcpy(slots[k], h + at, n);
    transport.upload(k, d + at, slots[k], n);
  });
}

int pipeline_to_host(StagingTransport& transport, const std::vector<void*>& slots,
                     std::size_t slot_bytes, void* dst, const void* src, std::size_t bytes,
                     int threads, CopyThreadPool& pool) {
  if (bytes == 0) return 0;
  check_slots(slots, slot_bytes);
  const StagingPlan plan = plan_staging(bytes, slot_bytes, threads);
  auto* h = static_cast<char*>(dst);
  const auto* d = static_cast<const char*>(src);
  return run_pipeline(plan, slots, pool, [&](std::size_t j, int k) {
    const std::size_t at = j * plan.chunk;
    const std::size_t n = std::min(plan.chunk, bytes - at);
    // An upload of an earlier copy, maybe on another stream, may still read the slot.
    transport.wait(k);
    transport.download(k, slots[k], d + at, n);
    transport.wait(k);
    std::memcpy(h + at, slots[k], n);
  });
}

int choose_staging_threads(double link_gbs, const std::function<double(int)>& staged_gbs,
                           int max_threads) {
  max_threads = std::max(max_threads, 1);
  int best_threads = 1;
  double best = staged_gbs(1);
  int fruitless = 0;  // steps in a row that gained too little
  for (int k : {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
    if (best >= kStagingLinkShare * link_gbs || k > max_threads) break;
    const double rate = staged_gbs(k);
    if (rate > (1 + kStagingGain) * best) {
      best = rate;
      best_threads = k;
      fruitless = 0;
    } else if (++fruitless == 2) {
      break;
    }
  }
  return best_threads;
}

std::size_t choose_staging_slot_bytes(double link_gbs) {
  constexpr std::size_t kMin = std::size_t{1} << 20, kMax = std::size_t{8} << 20;
  const double wanted = std::max(link_gbs, 0.0) * 1e9 * kStagingSlotSeconds;
  std::size_t slot = kMin;
  while (slot < kMax && static_cast<double>(2 * slot) <= wanted)
    slot *= 2;
  return slot;
}

int parallel_memcpy(void* dst, const void* src, std::size_t bytes, int threads,
                    CopyThreadPool& pool) {
  // Below this a thread hand-off costs more than it saves.
  constexpr std::size_t kParallelMin = std::size_t{1} << 20;
  constexpr std::size_t kMinPiece = std::size_t{256} << 10;
  if (bytes == 0) return 1;  // the pointers may be null then
  if (threads <= 1 || bytes < kParallelMin) {
    std::memcpy(dst, src, bytes);
    return 1;
  }
  // A few pieces per thread, so a thread that starts late still finds work.
  const std::size_t wanted = ceil_div(bytes, 4 * static_cast<std::size_t>(threads));
  const std::size_t piece =
      std::max(kMinPiece, ceil_div(wanted, kChunkAlignment) * kChunkAlignment);
  const std::size_t pieces = ceil_div(bytes, piece);
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  std::atomic<std::size_t> next{0};
  return pool.run(static_cast<int>(std::min<std::size_t>(pieces, threads)), [&](int) {
    for (std::size_t i = next.fetch_add(1); i < pieces; i = next.fetch_add(1)) {
      const std::size_t at = i * piece;
      std::memcpy(d + at, s + at, std::min(piece, bytes - at));
    }
  });
}

}  // namespace ember::detail
