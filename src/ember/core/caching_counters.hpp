// The statistics of a caching device allocator, kept as the allocator changes them: every
// change goes through one of these calls, so the figures (and their peaks) are exact.
//
// Sharded, so that threads on different streams never write a shared cache line (issue 18: one
// lock around shared figures cost eight threads 2-3 us a pair on the H100 host, the line moving
// between cores twice per pair). What every allocation and free changes (allocated, requested
// and active bytes, live blocks) is kept per stream pool, in a Shard on a cache line of its own
// with its own lock; stats() sums the shards. The rarely changed figures (reserved bytes,
// segments, device calls) sit behind one global lock: only device mallocs and frees and the
// out-of-memory path change them.
//
// Peaks stay exact through budgets. The global part keeps each figure's peak P; each shard has
// a budget, and the shards' figures plus their budgets never sum to more than P. A shard that
// grows within its budget cannot make the total pass P, so it changes only its own line; a
// free adds what it frees to the shard's budget (so an alloc+free pair on a stream stays within
// it). Only a shard that would pass its budget takes the global lock and every shard's lock,
// sums the exact total, raises P when the total passes it (all budgets are then zero: the total
// is at its peak), or else takes the budget it needs from the other shards. So the peak is the
// largest total in the order of the shards' locks, as with one lock, and the slow path runs
// only where the total comes near its peak.
//
// Lock order: the global lock, then the shards' locks in creation order. A shard's own
// operations take only its lock (and leave it before the slow path takes the global one). The
// allocator calls these under a stream pool's lock, which comes before both.
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

  // One stream pool's part of the figures that every allocation and free changes.
  class alignas(64) Shard {
   public:
    explicit Shard(CachingCounters& owner) : owner_(owner) {}
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;

    // A block of `size` bytes handed out for a request of `requested` bytes.
    void allocated(std::size_t size, std::size_t requested) {
      change({signed_(size), signed_(requested), signed_(size), 1});
    }
    // A block freed by its user. Unless `reusable` (no other stream uses it), it stays active
    // until released().
    void freed(std::size_t size, std::size_t requested, bool reusable) {
      change({-signed_(size), -signed_(requested), reusable ? -signed_(size) : 0, -1});
    }
    // A freed block no stream uses any more is back in its pool.
    void released(std::size_t size) { change({0, 0, -signed_(size), 0}); }

   private:
    friend class CachingCounters;
    void change(const Deltas& d) {
      {
        std::lock_guard<SpinMutex> lock(mutex_);
        if (fits(d)) {
          apply(d);
          return;
        }
      }
      owner_.change_beyond_budget(*this, d);
    }
    bool fits(const Deltas& d) const {
      for (int k = 0; k < kFigures; ++k) {
        if (d[k] > budget_[k]) return false;
      }
      return true;
    }
    // Within the budget: the shard's figure plus its budget stays the same.
    void apply(const Deltas& d) {
      for (int k = 0; k < kFigures; ++k) {
        current_[k] += d[k];
        budget_[k] -= d[k];
      }
    }

    CachingCounters& owner_;
    SpinMutex mutex_;
    Deltas current_{};
    Deltas budget_{};  // how much each figure may grow without the global lock; never < 0
  };

  CachingCounters() = default;
  CachingCounters(const CachingCounters&) = delete;
  CachingCounters& operator=(const CachingCounters&) = delete;

  // A new shard (for a new stream pool); it lives as long as the counters.
  Shard& add_shard();

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
  // The slow path of Shard::change (see the top of the file).
  void change_beyond_budget(Shard& shard, const Deltas& d);
  // Holds the global lock and every shard's lock for a scope.
  class LockAll;

  mutable SpinMutex mutex_;  // guards everything below, and (with the shards' locks) budgets
  std::vector<std::unique_ptr<Shard>> shards_;
  Deltas peaks_{};
  TrackedStat reserved_, segments_;
  std::int64_t device_mallocs_ = 0, device_frees_ = 0, alloc_retries_ = 0, ooms_ = 0;
  std::int64_t event_synchronizations_ = 0;
};

}  // namespace ember::detail
