// The host's record of a host-backed table's device cache: which row each cache slot holds,
// where each row is (a slot, the host, or nowhere yet), which slots a batch still needs (pinned),
// and the plan that makes one batch's rows resident. Pure bookkeeping: host_backed_rows.hpp moves
// the rows a plan names. Rows are the table's rows (what the hash table hands out); slots are
// rows of the cache arrays.
//
// A plan is made for a batch's distinct rows before the batch runs (ahead of time for prefetched
// batches) and changes the record at once: the batch's rows are pinned, rows not cached are given
// slots (free ones first, then the policy's victims, whose rows go back to the host). Until the
// batch is released, later plans cannot take its slots. A plan that cannot be made (more rows
// than unpinned slots) throws and changes nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ember/embedding/cache_policy.hpp"
#include "ember/embedding/large_page_allocator.hpp"

namespace ember::embedding {

struct CachePlan {
  std::uint64_t id = 0;
  bool training = false;
  // Rows the host holds, fetched into slots; rows the batch makes (training), started in slots;
  // rows leaving the cache (their slots' current contents), written back to the host.
  std::vector<std::int64_t> fetch_rows, fetch_slots;
  std::vector<std::int64_t> new_rows, new_slots;
  std::vector<std::int64_t> evict_rows, evict_slots;
  std::vector<std::int32_t> pinned;  // every slot the batch uses
  std::int64_t lookups = 0;          // distinct rows of the batch that exist (hits + fetches)
  std::int64_t hits = 0;
  int staging = -1;  // the staging buffer holding its rows (host_backed_rows.hpp), -1: none
};

// Host time spent in plan(), summed over plans, by part (for measuring: bench_cache_plan).
struct PlanTimes {
  std::int64_t plans = 0;
  double lookup_ms = 0;          // where each of the batch's rows is
  double pin_ms = 0;             // the hits pinned and touched
  double victims_ms = 0;         // slots for the misses: free ones, then the policy's victims
  double evict_ms = 0;           // the victims' rows leave
  double place_ms = 0;           // the misses and new rows placed and admitted
  double queues_ms = 0;          // the policy's queues: entries appended, logs compacted
  std::int64_t compactions = 0;  // of the logs, and their time (part of queues_ms)
  double compact_ms = 0;
  double total_ms() const {
    return lookup_ms + pin_ms + victims_ms + evict_ms + place_ms + queues_ms;
  }
};

class CacheDirectory {
 public:
  // Where a row is when it has no slot.
  static constexpr std::int32_t kOnHost = -1;  // made, its data in the host table
  static constexpr std::int32_t kAbsent = -2;  // not made yet (a key no training batch had)

  // `materialized`: every row starts on the host (one-hot tables, made whole); else absent.
  CacheDirectory(std::int64_t rows, std::int64_t slots, EvictionPolicy policy, bool materialized,
                 std::string where, std::string raise_hint);

  std::int64_t rows() const { return static_cast<std::int64_t>(rows_.size()); }
  std::int64_t slots() const { return static_cast<std::int64_t>(slots_.size()); }
  // Slots ever handed out since the cache was last emptied: [0, high_water()) bounds every slot
  // that holds a row (what Global's pass over the cache covers).
  std::int64_t high_water() const { return high_water_; }
  // A slot, kOnHost or kAbsent.
  std::int32_t slot_of(std::int64_t row) const { return rows_[static_cast<std::size_t>(row)].slot; }
  // The row in a slot, or -1.
  std::int64_t row_in(std::int32_t slot) const {
    return slots_[static_cast<std::size_t>(slot)].row;
  }
  // A new row whose plan is made but which its batch has not started yet (its slot holds no
  // data): other batches treat it as absent.
  bool waiting(std::int32_t slot) const {
    return slots_[static_cast<std::size_t>(slot)].waiting != 0;
  }
  bool pinned(std::int32_t slot) const { return slots_[static_cast<std::size_t>(slot)].pins != 0; }
  // Rows made (on the host or in the cache, not waiting).
  std::int64_t materialized() const { return materialized_; }
  std::int64_t cached() const { return slots() - static_cast<std::int64_t>(free_.size()); }

  // The plan for a batch whose distinct rows are `rows` (-1 entries ignored). Training: absent
  // rows become new rows; evaluation: absent and waiting rows are left out (they read zeros).
  // Throws ember::Error, changing nothing, when the batch needs more slots than are not pinned.
  CachePlan plan(std::span<const std::int64_t> rows, bool training);
  // The plan's new rows now hold data (their batch has started them).
  void started(const CachePlan& plan);
  // The plan's batch is on its way (its work queued in order): its slots may be taken by later
  // plans.
  void release(const CachePlan& plan);
  // Forgets a plan whose batch never ran: its new rows are absent again and their slots free
  // (fetched rows stay cached), and its pins go.
  void abandon(const CachePlan& plan);
  // Rows read from a saved model into the host table: made, on the host (none may be cached).
  void loaded(std::span<const std::int64_t> rows);
  // Empties the cache: appends every cached (row, slot) that holds data (for writing back),
  // forgets waiting new rows and pins, and makes every slot free.
  void clear(std::vector<std::int64_t>& rows, std::vector<std::int64_t>& slots);
  const PlanTimes& times() const { return times_; }
  // The policy's log entries, stale ones included (what its queues take: 8 bytes each).
  std::int64_t log_entries() const { return policy_.log_entries(); }

 private:
  // A table row's record: 8 bytes, so the policy's count comes with the slot in one access.
  struct RowEntry {
    std::int32_t slot;    // a slot, kOnHost or kAbsent
    std::uint32_t count;  // the policy's use count (lfu, lfu_history)
  };
  // Where the rows of one chunk of a batch are.
  struct LookUp {
    std::vector<std::int32_t> hits;
    std::vector<std::int64_t> hit_rows, fetch_rows, new_rows;
    std::int64_t lookups = 0, pinned_hits = 0;
    std::size_t error = SIZE_MAX;     // the first row that cannot be planned
    std::array<std::size_t, 3> at{};  // where its hits, fetches and new rows go in the plan
  };

  std::int32_t take_free_slot();
  // Where each of the batch's rows is: p's hits (pinned), fetch_rows and new_rows; the hits'
  // rows in hit_rows_. Changes nothing (throws for a row that cannot be planned); returns how
  // many hits are not pinned yet.
  std::int64_t look_up(std::span<const std::int64_t> rows, CachePlan& p);
  // The hits pinned and touched (their queue entries in entries_).
  void pin_hits(CachePlan& p);
  // Slots for `need` misses: free ones into taken_, then the policy's victims into victims_.
  void take_slots(std::int64_t need);
  // The victims' rows leave (into p's eviction lists); their slots join taken_.
  void evict_victims(CachePlan& p);
  // The misses and new rows placed in taken_'s slots, pinned and admitted (their queue entries
  // in entries_).
  void place_misses(CachePlan& p);
  // kRecords: reads the hits' slot records (pinned, waiting); without it every hit counts as not
  // pinned and not waiting.
  template <bool kRecords>
  void look_up_chunk(std::span<const std::int64_t> rows, bool training, LookUp& out) const;
  [[noreturn]] void cannot_plan(std::int64_t row) const;
  // Appends entries_ to the policy's queues and compacts them when due.
  void append_entries();
  void unpin(std::int32_t slot);

  std::vector<RowEntry, LargePageAllocator<RowEntry>> rows_;     // per table row
  std::vector<CacheSlot, LargePageAllocator<CacheSlot>> slots_;  // per cache slot
  std::vector<std::int32_t> free_;  // free slots, the lowest last (taken first)
  CachePolicy policy_;
  // plan()'s scratch: one LookUp per chunk of the batch's rows; the hits' rows; the slots taken
  // for the misses; the victims; the entries the policy appends.
  std::vector<LookUp> look_ups_;
  std::vector<std::int64_t> hit_rows_;
  std::vector<std::int32_t> taken_, victims_;
  std::vector<QueueEntry> entries_;
  std::vector<std::int8_t> entry_queues_;
  std::int64_t high_water_ = 0, materialized_ = 0;
  std::int64_t pinned_count_ = 0;   // slots with pins
  std::int64_t waiting_count_ = 0;  // slots holding a new row not started
  std::uint64_t next_plan_ = 1;
  PlanTimes times_;
  std::string where_, raise_hint_;
};

}  // namespace ember::embedding
