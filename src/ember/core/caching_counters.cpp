#include "ember/core/caching_counters.hpp"

namespace ember::detail {

CachingCounters::Shard& CachingCounters::add_shard() {
  auto shard = std::make_unique<Shard>();
  std::lock_guard<SpinMutex> lock(mutex_);
  shards_.push_back(std::move(shard));
  return *shards_.back();
}

void CachingCounters::allocated_beyond_budget(Shard& shard, std::size_t size,
                                              std::size_t requested) {
  std::lock_guard<SpinMutex> lock(mutex_);
  const Deltas d = {signed_(size), signed_(requested), signed_(size), 1};
  for (int k = 0; k < kFigures; ++k) {
    // What the shard had covers part of the growth; the change itself is made in any case.
    shard.current_[k] += d[k];
    shard.budget_[k] = std::max<std::int64_t>(0, shard.budget_[k] - d[k]);
    std::int64_t total = 0, promised = 0;  // figures, and figures plus budgets
    for (const auto& s : shards_) {
      total += s->current_[k];
      promised += s->current_[k] + s->budget_[k];
    }
    if (total >= peaks_[k]) {
      // A new peak: no room is left for anyone.
      peaks_[k] = total;
      for (const auto& s : shards_)
        s->budget_[k] = 0;
      continue;
    }
    // Below the peak, but more is promised than it allows: take the excess back from the other
    // shards' budgets (they are below their promises: total < peak leaves enough).
    for (auto it = shards_.begin(); it != shards_.end() && promised > peaks_[k]; ++it) {
      Shard& other = **it;
      if (&other == &shard) continue;
      const std::int64_t take = std::min(other.budget_[k], promised - peaks_[k]);
      other.budget_[k] -= take;
      promised -= take;
    }
    // What nobody was promised goes to the shard that asked: its next growths need no lock.
    shard.budget_[k] += peaks_[k] - promised;
  }
}

CachingAllocatorStats CachingCounters::figures() const {
  std::lock_guard<SpinMutex> lock(mutex_);
  Deltas total{};
  for (const auto& s : shards_) {
    for (int k = 0; k < kFigures; ++k)
      total[k] += s->current_[k];
  }
  CachingAllocatorStats s;
  s.allocated_bytes = {total[kAllocated], peaks_[kAllocated]};
  s.requested_bytes = {total[kRequested], peaks_[kRequested]};
  s.active_bytes = {total[kActive], peaks_[kActive]};
  s.allocations = {total[kBlocks], peaks_[kBlocks]};
  s.reserved_bytes = reserved_;
  s.segments = segments_;
  s.device_mallocs = device_mallocs_;
  s.device_frees = device_frees_;
  s.alloc_retries = alloc_retries_;
  s.ooms = ooms_;
  s.event_synchronizations = event_synchronizations_;
  return s;
}

void CachingCounters::reset_peaks() {
  std::lock_guard<SpinMutex> lock(mutex_);
  peaks_ = {};
  for (const auto& s : shards_) {
    for (int k = 0; k < kFigures; ++k) {
      peaks_[k] += s->current_[k];
      s->budget_[k] = 0;
    }
  }
  for (TrackedStat* t : {&reserved_, &segments_})
    t->peak = t->current;
}

}  // namespace ember::detail
