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

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ember/embedding/cache_policy.hpp"

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
  double lookup_ms = 0;   // where each of the batch's rows is
  double pin_ms = 0;      // the hits pinned and touched
  double victims_ms = 0;  // slots for the misses: free ones, then the policy's victims
  double evict_ms = 0;    // the victims' rows leave
  double place_ms = 0;    // the misses and new rows placed and admitted
  double total_ms() const { return lookup_ms + pin_ms + victims_ms + evict_ms + place_ms; }
};

class CacheDirectory {
 public:
  // Where a row is when it has no slot.
  static constexpr std::int32_t kOnHost = -1;  // made, its data in the host table
  static constexpr std::int32_t kAbsent = -2;  // not made yet (a key no training batch had)

  // `materialized`: every row starts on the host (one-hot tables, made whole); else absent.
  CacheDirectory(std::int64_t rows, std::int64_t slots, EvictionPolicy policy, bool materialized,
                 std::string where, std::string raise_hint);

  std::int64_t rows() const { return static_cast<std::int64_t>(slot_of_.size()); }
  std::int64_t slots() const { return static_cast<std::int64_t>(row_in_.size()); }
  // Slots ever handed out since the cache was last emptied: [0, high_water()) bounds every slot
  // that holds a row (what Global's pass over the cache covers).
  std::int64_t high_water() const { return high_water_; }
  // A slot, kOnHost or kAbsent.
  std::int32_t slot_of(std::int64_t row) const { return slot_of_[row]; }
  // The row in a slot, or -1.
  std::int64_t row_in(std::int32_t slot) const { return row_in_[slot]; }
  // A new row whose plan is made but which its batch has not started yet (its slot holds no
  // data): other batches treat it as absent.
  bool waiting(std::int32_t slot) const { return waiting_[slot] != 0; }
  bool pinned(std::int32_t slot) const { return pins_[slot] != 0; }
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

 private:
  std::int32_t take_free_slot();
  void place(std::int64_t row, std::int32_t slot, bool waiting);
  void pin(std::int32_t slot);
  void unpin(std::int32_t slot);

  std::vector<std::int32_t> slot_of_;  // per row: a slot, kOnHost or kAbsent
  std::vector<std::int64_t> row_in_;   // per slot: a row or -1
  std::vector<std::uint16_t> pins_;    // per slot: plans not yet released that use it
  std::vector<std::uint8_t> waiting_;  // per slot: holds a new row not started yet
  std::vector<std::int32_t> free_;     // free slots, the lowest last (taken first)
  std::unique_ptr<CachePolicy> policy_;
  EvictionPolicy policy_kind_;
  std::int64_t high_water_ = 0, materialized_ = 0;
  std::int64_t pinned_count_ = 0;  // slots with pins
  std::uint64_t next_plan_ = 1;
  PlanTimes times_;
  std::string where_, raise_hint_;
};

}  // namespace ember::embedding
