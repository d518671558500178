// The statistics of a caching device allocator, kept as the allocator changes them: every
// change goes through one of these calls, so the figures (and their peaks) are exact.
//
// Sharded, so that threads on different streams never write a shared cache line (issue 18: one
// lock around shared figures cost eight threads 2-3 us a pair on the H100 host, the line moving
// between cores twice per pair). What every allocation and free changes (allocated, requested
// and active bytes, live blocks) is kept per stream pool, in a Shard on a cache line of its own,
// guarded by the pool's lock; stats() sums the shards. The rarely changed figures (reserved bytes,
// segments, device calls) sit behind one global lock: only device mallocs and frees and the
// out-of-memory path change them.
//
// Peaks stay exact through budgets. The global part keeps each figure's peak P; each shard has
// a budget, and the shards' figures plus their budgets never sum to more than P. A shard that
// grows within its budget cannot make the total pass P, so it changes only its own line; a
// free adds what it frees to the shard's budget (so an alloc+free pair on a stream stays within
// it). Only an allocation that would pass its shard's budget takes the slow path: the allocator
// leaves the pool's lock, takes every pool's lock (in their order) and calls
// change_beyond_budget(), which sums the exact total, raises P when the total passes it (all
// budgets are then zero: the total is at its peak), or else takes the budget it needs from the
// other shards. The allocation is counted there, before allocate() returns (nobody can free the
// block before), so the peak is the largest total in the order of the pools' locks, as with one
// lock, and the slow path runs only where the total comes near its peak. Frees only shrink the
// figures: they always fit.
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
  // the pool's lock (the allocator changes it only under that lock), so the fast path takes no
  // lock of its own: a lock costs two atomic instructions, and a pair took six locks before.
  class alignas(64) Shard {
   public:
    Shard() = default;
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;

    // What handing out a block of `size` bytes for a request of `requested` bytes changes.
    static Deltas allocation(std::size_t size, std::size_t requested) {
      return {signed_(size), signed_(requested), signed_(size), 1};
    }
    // Counts an allocation when it fits the shard's budget; false (nothing counted) when it
    // does not: then the caller, holding every pool's lock, calls change_beyond_budget().
    [[nodiscard]] bool try_allocated(std::size_t size, std::size_t requested) {
      const std::int64_t n = signed_(size), r = signed_(requested);
      if (n > budget_[kAllocated] || r > budget_[kRequested] || n > budget_[kActive] ||
          budget_[kBlocks] < 1) {
        return false;
      }
      apply(n, r, n, 1);
      return true;
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
    // Within the budget: the shard's figure plus its budget stays the same. Four scalar adds,
    // not a loop over an array of deltas: the compiler built that array on the stack and read
    // it back in 16-byte loads, which cannot be forwarded from the 8-byte stores that wrote
    // it (a stall of a dozen cycles, twice, on every allocation and free).
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

  // The following three read or change every shard: the caller holds every pool's lock.
  // The figures kept here (the shards summed); the counts of calls and the snapshot fields
  // (cached, largest free, pending) are the caller's.
  CachingAllocatorStats figures() const;
  void reset_peaks();
  // Counts `d` on `shard` when it passes the shard's budget (see the top of the file).
  void change_beyond_budget(Shard& shard, const Deltas& d);

 private:
  static std::int64_t signed_(std::size_t n) { return static_cast<std::int64_t>(n); }
  static void add(TrackedStat& t, std::int64_t delta) {
    t.current += delta;
    t.peak = std::max(t.peak, t.current);
  }
  mutable SpinMutex mutex_;  // guards everything below (and the shards' list)
  std::vector<std::unique_ptr<Shard>> shards_;
  Deltas peaks_{};
  TrackedStat reserved_, segments_;
  std::int64_t device_mallocs_ = 0, device_frees_ = 0, alloc_retries_ = 0, ooms_ = 0;
  std::int64_t event_synchronizations_ = 0;
};

}  // namespace ember::detail
