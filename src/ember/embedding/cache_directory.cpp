#include "ember/embedding/cache_directory.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

#include "ember/core/error.hpp"
#include "ember/embedding/host_chunks.hpp"

namespace ember::embedding {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since `last` to `ms` and moves `last` to now.
void lap(double& ms, Clock::time_point& last) {
  const Clock::time_point now = Clock::now();
  ms += std::chrono::duration<double, std::milli>(now - last).count();
  last = now;
}

// A batch's rows are a few in a million of the table's: every access to the per-row map or a
// slot record misses the caches. The loops below ask for the memory some iterations ahead (in
// two steps where one address depends on another) so that the misses overlap.
constexpr std::size_t kFar = 32, kNear = 16;

void prefetch(const void* p) {
  __builtin_prefetch(p, 0);
}

void prefetch_write(const void* p) {
  __builtin_prefetch(p, 1);
}

std::size_t checked_slots(std::int64_t slots, const std::string& where) {
  EMBER_CHECK(slots >= 1 && slots <= std::numeric_limits<std::int32_t>::max(), where,
              ": a device cache of ", slots, " rows (1 to 2^31 - 1 are possible)");
  return static_cast<std::size_t>(slots);
}

}  // namespace

CacheDirectory::CacheDirectory(std::int64_t rows, std::int64_t slots, EvictionPolicy policy,
                               bool materialized, std::string where, std::string raise_hint)
    : rows_(static_cast<std::size_t>(rows), RowEntry{materialized ? kOnHost : kAbsent, 0}),
      slots_(checked_slots(slots, where)),
      policy_(policy),
      materialized_(materialized ? rows : 0),
      where_(std::move(where)),
      raise_hint_(std::move(raise_hint)) {
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

void CacheDirectory::unpin(std::int32_t slot) {
  std::uint16_t& pins = slots_[static_cast<std::size_t>(slot)].pins;
  if (pins == 0) return;
  if (--pins == 0) --pinned_count_;
}

template <bool kRecords>
void CacheDirectory::look_up_chunk(std::span<const std::int64_t> rows, bool training,
                                   LookUp& out) const {
  const std::int64_t table_rows = this->rows();
  const std::size_t n = rows.size();
  auto in_table = [&](std::int64_t r) { return r >= 0 && r < table_rows; };
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kFar < n && in_table(rows[i + kFar]))
      prefetch(&rows_[static_cast<std::size_t>(rows[i + kFar])]);
    if (kRecords && i + kNear < n && in_table(rows[i + kNear])) {
      const std::int32_t s = rows_[static_cast<std::size_t>(rows[i + kNear])].slot;
      if (s >= 0) prefetch(&slots_[static_cast<std::size_t>(s)]);
    }
    const std::int64_t r = rows[i];
    if (r < 0) continue;
    if (r >= table_rows) {
      out.error = i;
      return;
    }
    const std::int32_t s = rows_[static_cast<std::size_t>(r)].slot;
    if (s >= 0) {
      bool pinned = false;
      if (kRecords) {
        const CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
        if (rec.waiting != 0) {
          // Another batch's new row, not started: absent for an evaluation batch. A training
          // batch never meets one (the batch prepared ahead is run or abandoned first).
          if (training) {
            out.error = i;
            return;
          }
          continue;
        }
        pinned = rec.pins != 0;
      }
      ++out.lookups;
      out.hits.push_back(s);
      out.hit_rows.push_back(r);
      if (!pinned) ++out.pinned_hits;
    } else if (s == kOnHost) {
      ++out.lookups;
      out.fetch_rows.push_back(r);
    } else if (training) {
      out.new_rows.push_back(r);
    }
  }
}

void CacheDirectory::cannot_plan(std::int64_t row) const {
  EMBER_CHECK(row < rows(), where_, ": row ", row, " outside the table's ", rows(), " rows");
  EMBER_THROW(where_, ": row ", row, " is a new row of another batch");
}

std::int64_t CacheDirectory::look_up(std::span<const std::int64_t> rows, CachePlan& p) {
  const std::size_t n = rows.size(), chunks = chunk_count(n);
  if (look_ups_.size() < chunks) look_ups_.resize(chunks);
  for (std::size_t c = 0; c < chunks; ++c) {
    LookUp& l = look_ups_[c];
    const std::size_t size = chunk_begin(n, chunks, c + 1) - chunk_begin(n, chunks, c);
    for (auto* v : {&l.hit_rows, &l.fetch_rows, &l.new_rows}) {
      v->clear();
      v->reserve(size);  // no allocation (which could throw) on the threads
    }
    l.hits.clear();
    l.hits.reserve(size);
    l.lookups = l.pinned_hits = 0;
    l.error = SIZE_MAX;
  }
  // Slots are pinned or wait for their batch only while a batch prepared ahead is held (an
  // evaluation batch planned in between): else the rows' map alone says where they are, and the
  // slot records (a second cache miss per hit) are left for pin_hits().
  const bool records = pinned_count_ > 0 || waiting_count_ > 0;
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
    const auto chunk = rows.subspan(begin, end - begin);
    if (records) {
      look_up_chunk<true>(chunk, p.training, look_ups_[c]);
    } else {
      look_up_chunk<false>(chunk, p.training, look_ups_[c]);
    }
  });
  // The chunks' lists joined in order, each chunk copying its own.
  std::int64_t pinned_hits = 0;
  std::size_t hits = 0, fetches = 0, news = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    LookUp& l = look_ups_[c];
    if (l.error != SIZE_MAX) cannot_plan(rows[chunk_begin(n, chunks, c) + l.error]);
    p.lookups += l.lookups;
    pinned_hits += l.pinned_hits;
    l.at = {hits, fetches, news};
    hits += l.hits.size();
    fetches += l.fetch_rows.size();
    news += l.new_rows.size();
  }
  p.hits = static_cast<std::int64_t>(hits);
  p.pinned.resize(hits);
  hit_rows_.resize(hits);
  p.fetch_rows.resize(fetches);
  p.new_rows.resize(news);
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t, std::size_t) {
    const LookUp& l = look_ups_[c];
    std::copy(l.hits.begin(), l.hits.end(),
              p.pinned.begin() + static_cast<std::ptrdiff_t>(l.at[0]));
    std::copy(l.hit_rows.begin(), l.hit_rows.end(),
              hit_rows_.begin() + static_cast<std::ptrdiff_t>(l.at[0]));
    std::copy(l.fetch_rows.begin(), l.fetch_rows.end(),
              p.fetch_rows.begin() + static_cast<std::ptrdiff_t>(l.at[1]));
    std::copy(l.new_rows.begin(), l.new_rows.end(),
              p.new_rows.begin() + static_cast<std::ptrdiff_t>(l.at[2]));
  });
  return pinned_hits;
}

void CacheDirectory::append_entries() {
  policy_.append(entries_, entry_queues_);
  const Clock::time_point t = Clock::now();
  if (policy_.compact_if_due(slots_.data(), cached())) {
    ++times_.compactions;
    times_.compact_ms += std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  }
}

void CacheDirectory::pin_hits(CachePlan& p) {
  const std::size_t n = p.pinned.size(), chunks = chunk_count(n);
  entries_.resize(n);
  entry_queues_.resize(n);
  std::vector<std::int64_t> pinned(chunks, 0);
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      if (i + kNear < end) {
        prefetch_write(&slots_[static_cast<std::size_t>(p.pinned[i + kNear])]);
        prefetch_write(&rows_[static_cast<std::size_t>(hit_rows_[i + kNear])]);
      }
      const std::int32_t s = p.pinned[i];
      CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
      if (rec.pins++ == 0) ++pinned[c];
      entries_[i] = policy_.use(rec, s, rows_[static_cast<std::size_t>(hit_rows_[i])].count, false);
      entry_queues_[i] = rec.queue;
    }
  });
  for (const std::int64_t k : pinned)
    pinned_count_ += k;
}

void CacheDirectory::take_slots(std::int64_t need) {
  taken_.clear();
  victims_.clear();
  while (static_cast<std::int64_t>(taken_.size()) < need && !free_.empty())
    taken_.push_back(take_free_slot());
  const std::int64_t wanted = need - static_cast<std::int64_t>(taken_.size());
  if (wanted == 0) return;
  policy_.victims(wanted, slots_.data(), victims_);
  EMBER_CHECK(static_cast<std::int64_t>(victims_.size()) == wanted, where_,
              ": the eviction policy found ", victims_.size(), " of ", wanted, " victims (",
              eviction_policy_name(policy_.kind()), ")");
}

void CacheDirectory::evict_victims(CachePlan& p) {
  const std::size_t n = victims_.size(), chunks = chunk_count(n), base = taken_.size();
  p.evict_rows.resize(n);
  p.evict_slots.resize(n);
  taken_.resize(base + n);
  for_each_chunk(n, chunks, [&](std::size_t, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      if (i + kNear < end) {
        const std::int64_t v = slots_[static_cast<std::size_t>(victims_[i + kNear])].row;
        prefetch_write(&rows_[static_cast<std::size_t>(v)]);
      }
      const std::int32_t s = victims_[i];
      CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
      const std::int64_t v = rec.row;
      p.evict_rows[i] = v;
      p.evict_slots[i] = s;
      rows_[static_cast<std::size_t>(v)].slot = kOnHost;
      rec.row = -1;
      CachePolicy::remove(rec);
      taken_[base + i] = s;
    }
  });
}

void CacheDirectory::place_misses(CachePlan& p) {
  const std::size_t m = p.fetch_rows.size(), k = p.new_rows.size(), n = m + k;
  const std::size_t chunks = chunk_count(n), base = p.pinned.size();
  p.fetch_slots.resize(m);
  p.new_slots.resize(k);
  p.pinned.resize(base + n);
  entries_.resize(n);
  entry_queues_.resize(n);
  // taken_[i] is the slot of fetch_rows[i], then of new_rows[i - m].
  auto row_at = [&](std::size_t i) { return i < m ? p.fetch_rows[i] : p.new_rows[i - m]; };
  std::vector<std::int64_t> pinned(chunks, 0);
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      if (i + kNear < end) {
        const std::int64_t r = row_at(i + kNear);
        const std::int32_t s = taken_[i + kNear];
        prefetch_write(&rows_[static_cast<std::size_t>(r)]);
        prefetch_write(&slots_[static_cast<std::size_t>(s)]);
      }
      const std::int64_t r = row_at(i);
      const std::int32_t s = taken_[i];
      CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
      RowEntry& row = rows_[static_cast<std::size_t>(r)];
      row.slot = s;
      rec.row = r;
      rec.waiting = i >= m ? 1 : 0;
      if (rec.pins++ == 0) ++pinned[c];
      entries_[i] = policy_.use(rec, s, row.count, true);
      entry_queues_[i] = rec.queue;
      if (i < m) {
        p.fetch_slots[i] = s;
      } else {
        p.new_slots[i - m] = s;
      }
      p.pinned[base + i] = s;
    }
  });
  for (const std::int64_t c : pinned)
    pinned_count_ += c;
  waiting_count_ += static_cast<std::int64_t>(k);
}

CachePlan CacheDirectory::plan(std::span<const std::int64_t> rows, bool training) {
  Clock::time_point t = Clock::now();
  CachePlan p;
  p.id = next_plan_++;
  p.training = training;
  p.pinned.reserve(rows.size());
  hit_rows_.clear();
  hit_rows_.reserve(rows.size());
  const std::int64_t pinned_hits = look_up(rows, p);
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
  pin_hits(p);
  lap(times_.pin_ms, t);
  append_entries();
  lap(times_.queues_ms, t);
  take_slots(need);
  lap(times_.victims_ms, t);
  evict_victims(p);
  lap(times_.evict_ms, t);
  place_misses(p);
  lap(times_.place_ms, t);
  append_entries();
  lap(times_.queues_ms, t);
  ++times_.plans;
  return p;
}

void CacheDirectory::started(const CachePlan& plan) {
  for (const std::int64_t s : plan.new_slots) {
    CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
    if (rec.waiting != 0) {
      rec.waiting = 0;
      --waiting_count_;
      ++materialized_;
    }
  }
}

void CacheDirectory::release(const CachePlan& plan) {
  const std::size_t n = plan.pinned.size(), chunks = chunk_count(n);
  std::vector<std::int64_t> unpinned(chunks, 0);
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      if (i + kNear < end)
        prefetch_write(&slots_[static_cast<std::size_t>(plan.pinned[i + kNear])]);
      std::uint16_t& pins = slots_[static_cast<std::size_t>(plan.pinned[i])].pins;
      if (pins != 0 && --pins == 0) ++unpinned[c];
    }
  });
  for (const std::int64_t k : unpinned)
    pinned_count_ -= k;
}

void CacheDirectory::abandon(const CachePlan& plan) {
  for (std::size_t i = 0; i < plan.new_slots.size(); ++i) {
    const auto s = static_cast<std::int32_t>(plan.new_slots[i]);
    const std::int64_t r = plan.new_rows[i];
    CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
    if (rec.waiting == 0 || rec.row != r) continue;
    CachePolicy::remove(rec);
    rec.waiting = 0;
    --waiting_count_;
    rec.row = -1;
    rows_[static_cast<std::size_t>(r)].slot = kAbsent;
    unpin(s);  // its one pin: this plan's
    free_.push_back(s);
  }
  for (const std::int32_t s : plan.pinned) {
    if (slots_[static_cast<std::size_t>(s)].row >= 0) unpin(s);
  }
}

void CacheDirectory::loaded(std::span<const std::int64_t> rows) {
  for (const std::int64_t r : rows) {
    EMBER_CHECK(rows_[static_cast<std::size_t>(r)].slot < 0, where_, ": loading row ", r,
                " while it is cached");
    if (rows_[static_cast<std::size_t>(r)].slot == kAbsent) {
      rows_[static_cast<std::size_t>(r)].slot = kOnHost;
      ++materialized_;
    }
  }
}

void CacheDirectory::clear(std::vector<std::int64_t>& rows, std::vector<std::int64_t>& slots) {
  for (std::int64_t s = 0; s < this->slots(); ++s) {
    CacheSlot& rec = slots_[static_cast<std::size_t>(s)];
    const std::int64_t r = rec.row;
    if (r >= 0) {
      if (rec.waiting != 0) {
        rows_[static_cast<std::size_t>(r)].slot = kAbsent;
      } else {
        rows_[static_cast<std::size_t>(r)].slot = kOnHost;
        rows.push_back(r);
        slots.push_back(s);
      }
    }
    rec = CacheSlot{};
  }
  policy_.clear();
  pinned_count_ = waiting_count_ = 0;
  free_.clear();
  for (std::int64_t i = 0; i < this->slots(); ++i)
    free_.push_back(static_cast<std::int32_t>(this->slots() - 1 - i));
  high_water_ = 0;
}

}  // namespace ember::embedding
