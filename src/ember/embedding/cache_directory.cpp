#include "ember/embedding/cache_directory.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

#include "ember/core/error.hpp"

namespace ember::embedding {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since `last` to `ms` and moves `last` to now.
void lap(double& ms, Clock::time_point& last) {
  const Clock::time_point now = Clock::now();
  ms += std::chrono::duration<double, std::milli>(now - last).count();
  last = now;
}

}  // namespace

CacheDirectory::CacheDirectory(std::int64_t rows, std::int64_t slots, EvictionPolicy policy,
                               bool materialized, std::string where, std::string raise_hint)
    : slot_of_(static_cast<std::size_t>(rows), materialized ? kOnHost : kAbsent),
      row_in_(static_cast<std::size_t>(slots), -1),
      pins_(static_cast<std::size_t>(slots), 0),
      waiting_(static_cast<std::size_t>(slots), 0),
      policy_(make_cache_policy(policy, slots, rows)),
      policy_kind_(policy),
      materialized_(materialized ? rows : 0),
      where_(std::move(where)),
      raise_hint_(std::move(raise_hint)) {
  EMBER_CHECK(slots >= 1 && slots <= std::numeric_limits<std::int32_t>::max(), where_,
              ": a device cache of ", slots, " rows (1 to 2^31 - 1 are possible)");
  free_.resize(static_cast<std::size_t>(slots));
  for (std::int64_t i = 0; i < slots; ++i)
    free_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(slots - 1 - i);
}

std::int32_t CacheDirectory::take_free_slot() {
  const std::int32_t s = free_.back();
  free_.pop_back();
  high_water_ = std::max<std::int64_t>(high_water_, s + 1);
  return s;
}

void CacheDirectory::place(std::int64_t row, std::int32_t slot, bool waiting) {
  slot_of_[row] = slot;
  row_in_[slot] = row;
  waiting_[slot] = waiting ? 1 : 0;
  pin(slot);
  policy_->admit(slot, row);
}

void CacheDirectory::pin(std::int32_t slot) {
  if (pins_[slot]++ == 0) ++pinned_count_;
}

void CacheDirectory::unpin(std::int32_t slot) {
  if (pins_[slot] == 0) return;
  if (--pins_[slot] == 0) --pinned_count_;
}

CachePlan CacheDirectory::plan(std::span<const std::int64_t> rows, bool training) {
  Clock::time_point t = Clock::now();
  CachePlan p;
  p.id = next_plan_++;
  p.training = training;
  std::int64_t pinned_hits = 0;
  for (const std::int64_t r : rows) {
    if (r < 0) continue;
    EMBER_CHECK(r < this->rows(), where_, ": row ", r, " outside the table's ", this->rows(),
                " rows");
    const std::int32_t s = slot_of_[r];
    if (s >= 0) {
      if (waiting_[s] != 0) {
        // Another batch's new row, not started: absent for an evaluation batch. A training batch
        // never meets one (the batch prepared ahead is run or abandoned first).
        EMBER_CHECK(!training, where_, ": row ", r, " is a new row of another batch");
        continue;
      }
      ++p.lookups;
      ++p.hits;
      p.pinned.push_back(s);
      if (pins_[s] == 0) ++pinned_hits;
    } else if (s == kOnHost) {
      ++p.lookups;
      p.fetch_rows.push_back(r);
    } else if (training) {
      p.new_rows.push_back(r);
    }
  }
  lap(times_.lookup_ms, t);
  const auto need = static_cast<std::int64_t>(p.fetch_rows.size() + p.new_rows.size());
  const std::int64_t pinned_now = pinned_count_;
  const auto free_slots = static_cast<std::int64_t>(free_.size());
  const std::int64_t evictable = cached() - pinned_now - pinned_hits;
  if (need > free_slots + evictable) {
    const std::int64_t batch_rows = need + p.hits;
    EMBER_THROW(where_, ": one batch needs ", batch_rows, " distinct rows in the device cache (",
                p.hits, " cached, ", p.fetch_rows.size(), " from the host, ", p.new_rows.size(),
                " new) but the cache holds ", slots(), " rows",
                pinned_now > 0 ? cat(", ", pinned_now, " of them held for a batch prepared ahead")
                               : std::string(),
                "; ", raise_hint_);
  }
  for (const std::int32_t s : p.pinned) {
    pin(s);
    policy_->touch(s, row_in_[s]);
  }
  lap(times_.pin_ms, t);
  // Slots for the misses and the new rows: free ones first, then victims.
  std::vector<std::int32_t> slots;
  slots.reserve(static_cast<std::size_t>(need));
  while (static_cast<std::int64_t>(slots.size()) < need && !free_.empty())
    slots.push_back(take_free_slot());
  if (static_cast<std::int64_t>(slots.size()) < need) {
    std::vector<std::int32_t> victims;
    policy_->victims(
        need - static_cast<std::int64_t>(slots.size()),
        [this](std::int32_t s) { return pins_[s] != 0; }, victims);
    EMBER_CHECK(static_cast<std::int64_t>(victims.size() + slots.size()) == need, where_,
                ": the eviction policy found ", victims.size(), " of ", need - slots.size(),
                " victims (", eviction_policy_name(policy_kind_), ")");
    lap(times_.victims_ms, t);
    for (const std::int32_t s : victims) {
      const std::int64_t v = row_in_[s];
      p.evict_rows.push_back(v);
      p.evict_slots.push_back(s);
      slot_of_[v] = kOnHost;
      row_in_[s] = -1;
      policy_->remove(s, v);
      slots.push_back(s);
    }
    lap(times_.evict_ms, t);
  } else {
    lap(times_.victims_ms, t);
  }
  std::size_t next = 0;
  for (const std::int64_t r : p.fetch_rows) {
    const std::int32_t s = slots[next++];
    p.fetch_slots.push_back(s);
    p.pinned.push_back(s);
    place(r, s, false);
  }
  for (const std::int64_t r : p.new_rows) {
    const std::int32_t s = slots[next++];
    p.new_slots.push_back(s);
    p.pinned.push_back(s);
    place(r, s, true);
  }
  lap(times_.place_ms, t);
  ++times_.plans;
  return p;
}

void CacheDirectory::started(const CachePlan& plan) {
  for (const std::int64_t s : plan.new_slots) {
    if (waiting_[s] != 0) {
      waiting_[s] = 0;
      ++materialized_;
    }
  }
}

void CacheDirectory::release(const CachePlan& plan) {
  for (const std::int32_t s : plan.pinned)
    unpin(s);
}

void CacheDirectory::abandon(const CachePlan& plan) {
  for (std::size_t i = 0; i < plan.new_slots.size(); ++i) {
    const auto s = static_cast<std::int32_t>(plan.new_slots[i]);
    const std::int64_t r = plan.new_rows[i];
    if (waiting_[s] == 0 || row_in_[s] != r) continue;
    policy_->remove(s, r);
    waiting_[s] = 0;
    row_in_[s] = -1;
    slot_of_[r] = kAbsent;
    unpin(s);  // its one pin: this plan's
    free_.push_back(s);
  }
  for (const std::int32_t s : plan.pinned) {
    if (row_in_[s] >= 0) unpin(s);
  }
}

void CacheDirectory::loaded(std::span<const std::int64_t> rows) {
  for (const std::int64_t r : rows) {
    EMBER_CHECK(slot_of_[r] < 0, where_, ": loading row ", r, " while it is cached");
    if (slot_of_[r] == kAbsent) {
      slot_of_[r] = kOnHost;
      ++materialized_;
    }
  }
}

void CacheDirectory::clear(std::vector<std::int64_t>& rows, std::vector<std::int64_t>& slots) {
  for (std::int64_t s = 0; s < this->slots(); ++s) {
    const std::int64_t r = row_in_[s];
    if (r < 0) continue;
    policy_->remove(static_cast<std::int32_t>(s), r);
    if (waiting_[s] != 0) {
      slot_of_[r] = kAbsent;
    } else {
      slot_of_[r] = kOnHost;
      rows.push_back(r);
      slots.push_back(s);
    }
    row_in_[s] = -1;
    waiting_[s] = 0;
  }
  std::fill(pins_.begin(), pins_.end(), 0);
  pinned_count_ = 0;
  free_.clear();
  for (std::int64_t i = 0; i < this->slots(); ++i)
    free_.push_back(static_cast<std::int32_t>(this->slots() - 1 - i));
  high_water_ = 0;
}

}  // namespace ember::embedding
