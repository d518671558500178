// The statistics of a caching device allocator, kept as the allocator changes them: every
// change goes through one of these calls, so the figures (and their peaks) are exact.
//
// Sharded, so that threads on different streams never write a shared cache line (issue 18: one
// lock around shared figures cost eight threads 2-3 us a pair on the H100 host, the line moving
// between cores twice per pair). What every allocation and free changes (allocated, requested
// and active bytes, live blocks) is kept per stream pool, in a Shard on a cache line of its own,
// guarded by the pool's lock: the allocator changes a shard only under its pool's lock, so the
// fast path takes no lock of its own for the statistics (a lock is two atomic
// read-modify-writes, and a cached pair took six locks before). stats() holds every pool's lock
// and sums the shards, so it sees figures that agree with the blocks. The rarely changed figures
// (reserved bytes, segments, device calls) sit behind one global lock: only device mallocs and
// frees and the out-of-memory path change them.
//
// Peaks stay exact through budgets. The global part keeps each figure's peak P; each shard has
// a budget, and the shards' figures plus their budgets never sum to more than P. A shard that
// grows within its budget cannot make the total pass P, so it changes only its own line; a
// free adds what it frees to the shard's budget (so an alloc+free pair on a stream stays within
// it). Only an allocation that would pass its shard's budget takes the slow path: the allocator
// first puts the block back (nothing has changed then), takes every pool's lock (in their
// order), allocates again and calls allocated_beyond_budget(), which sums the exact total,
// raises P when the total passes it (all budgets are then zero: the total is at its peak), or
// else takes the budget it needs from the other shards. So a block is never out of its pool
// without being counted, not even for a moment (the first version of this scheme handed the
// block out under its pool's lock, let go of it and counted it under every pool's lock: a
// snapshot in between saw reserved != active + cached), the peak is the largest total in the
// order of the pools' locks, as with one lock, and the slow path runs only where the total comes
// near its peak. Frees only shrink the figures: they always fit.
//
// Lock order: the pools' locks, then the global lock (held for a few instructions).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/spin_mutex.hpp"

namespace ember::detail {

class CachingCounters {
 public:
  // The figures every allocation and free changes.
  enum Figure { kAllocated, kRequested, kActive, kBlocks, kFigures };
  using Deltas = std::array<std::int64_t, kFigures>;

  // One stream pool's part of the figures that every allocation and free changes. Guarded by
  // the pool's lock.
  class alignas(64) Shard {
   public:
    Shard() = default;
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;

    // Counts a block of `size` bytes handed out for a request of `requested` bytes when that
    // fits the shard's budget; false (nothing counted) when it does not: then the caller, holding
    // every pool's lock, calls allocated_beyond_budget().
    [[nodiscard]] bool fits_allocation(std::size_t size, std::size_t requested) const {
      const std::int64_t n = signed_(size);
      return n <= budget_[kAllocated] && signed_(requested) <= budget_[kRequested] &&
             n <= budget_[kActive] && budget_[kBlocks] >= 1;
    }
    // Counts an allocation that fits_allocation() accepted.
    void allocated(std::size_t size, std::size_t requested) {
      apply(signed_(size), signed_(requested), signed_(size), 1);
    }
    // A block freed by its user. Unless `reusable` (no other stream uses it), it stays active
    // until released(). Figures only shrink, which always fits.
    void freed(std::size_t size, std::size_t requested, bool reusable) {
      apply(-signed_(size), -signed_(requested), reusable ? -signed_(size) : 0, -1);
    }
    // A freed block no stream uses any more is back in its pool.
    void released(std::size_t size) { apply(0, 0, -signed_(size), 0); }

   private:
    friend class CachingCounters;
    // Within the budget: the shard's figure plus its budget stays the same. Four scalars, not
    // an array of deltas: the compiler built such an array on the stack and read it back in
    // 16-byte loads, which cannot be forwarded from the 8-byte stores that wrote it (a stall of
    // a dozen cycles or more at every allocation and free: a sixth of a cached pair's time in
    // perf on the development machine).
    void apply(std::int64_t allocated, std::int64_t requested, std::int64_t active,
               std::int64_t blocks) {
      current_[kAllocated] += allocated;
      budget_[kAllocated] -= allocated;
      current_[kRequested] += requested;
      budget_[kRequested] -= requested;
      current_[kActive] += active;
      budget_[kActive] -= active;
      current_[kBlocks] += blocks;
      budget_[kBlocks] -= blocks;
    }

    Deltas current_{};
    Deltas budget_{};  // how much each figure may grow without the slow path; never < 0
  };

  CachingCounters() = default;
  CachingCounters(const CachingCounters&) = delete;
  CachingCounters& operator=(const CachingCounters&) = delete;

  // A new shard (for a new stream pool); it lives as long as the counters.
  Shard& add_shard();

  // The rarely changed figures below take the global lock (under a pool's lock or not).
  // Device memory obtained (a segment, or a growth of an expandable one) and given back.
  void device_malloc(std::size_t bytes, int new_segments) {
    std::lock_guard<SpinMutex> lock(mutex_);
    add(reserved_, signed_(bytes));
    add(segments_, new_segments);
    ++device_mallocs_;
  }
  void device_free(std::size_t bytes, int gone_segments) {
    std::lock_guard<SpinMutex> lock(mutex_);
    add(reserved_, -signed_(bytes));
    add(segments_, -gone_segments);
    ++device_frees_;
  }
  void retried() {
    std::lock_guard<SpinMutex> lock(mutex_);
    ++alloc_retries_;
  }
  void out_of_memory() {
    std::lock_guard<SpinMutex> lock(mutex_);
    ++ooms_;
  }
  void waited(std::int64_t synchronizations) {
    std::lock_guard<SpinMutex> lock(mutex_);
    event_synchronizations_ += synchronizations;
  }

  // The following read or change every shard: the caller holds every pool's lock.
  // Counts an allocation that did not fit its shard's budget (see the top of the file).
  void allocated_beyond_budget(Shard& shard, std::size_t size, std::size_t requested);
  // The figures kept here (the shards summed); the counts of calls and the snapshot fields
  // (cached, largest free, pending) are the caller's.
  CachingAllocatorStats figures() const;
  void reset_peaks();

 private:
  static std::int64_t signed_(std::size_t n) { return static_cast<std::int64_t>(n); }
  static void add(TrackedStat& t, std::int64_t delta) {
    t.current += delta;
    t.peak = std::max(t.peak, t.current);
  }
  mutable SpinMutex mutex_;  // guards everything below (with every pool's lock: the budgets)
  std::vector<std::unique_ptr<Shard>> shards_;
  Deltas peaks_{};
  TrackedStat reserved_, segments_;
  std::int64_t device_mallocs_ = 0, device_frees_ = 0, alloc_retries_ = 0, ooms_ = 0;
  std::int64_t event_synchronizations_ = 0;
};

}  // namespace ember::detail
