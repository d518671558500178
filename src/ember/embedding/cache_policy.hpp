// Which cached rows of a host-backed table make room when a batch needs rows that are not in the
// device cache. The policy only orders the occupied cache slots; the directory
// (cache_directory.hpp) decides what is pinned and moves the rows. Every batch needs all of its
// rows resident, so there is no admission control: a miss always enters the cache.
//
//   lru          least recently used first.
//   lfu          least frequently used first, counting the batches that used the row since it
//                entered the cache; ties (rows within a power of two of each other) least
//                recently used first (log2 frequency queues, as in Zhou et al.'s MQ cache).
//   lfu_history  as lfu, but a row's count survives its eviction, so a row that was hot comes
//                back with its history instead of starting at one.
//
// Each queue is a log of (slot, version) entries in the order the slots entered it, oldest first.
// A slot that moves to another queue (or to the tail of its own) or leaves only changes its
// version, which makes its old entry stale: skipped, and dropped when the logs are compacted. So
// a use of a cached row writes its own slot record and appends an entry, where a linked list
// would relink two neighbours (two more cache misses in a table of millions of slots), and the
// order of the live entries is exactly a linked list's. Uses are counted and marked per slot,
// which is safe on several threads for distinct slots; the entries are then appended in the
// batch's order, so the order does not depend on the thread count. victims() walks the queues
// from their oldest entries past stale entries and pinned slots. docs/embedding.md has the hit
// rates that chose the default.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ember/embedding/large_page_allocator.hpp"
#include "ember/embedding/storage_config.hpp"

namespace ember::embedding {

// One cache slot's record, shared by the directory (row, pins, waiting) and the policy (queue,
// version): four to a cache line, so the bookkeeping of a slot costs one memory access.
struct CacheSlot {
  std::int64_t row = -1;      // the row it holds, or -1
  std::uint32_t version = 0;  // changes whenever the slot enters or leaves a queue
  std::uint16_t pins = 0;     // plans not yet released that use it
  std::uint8_t waiting = 0;   // holds a new row whose batch has not started
  std::int8_t queue = -1;     // the policy queue holding it, -1: none
};
static_assert(sizeof(CacheSlot) == 16);

// A slot's place in a queue's log: live while the slot's record has this version.
struct QueueEntry {  // no initialisers: a log grows by the batch, then is written whole
  std::int32_t slot;
  std::uint32_t version;
};

class CachePolicy {
 public:
  // lfu's queue q holds the slots whose row has been used 2^q .. 2^(q+1) - 1 times.
  static constexpr int kQueues = 32;

  explicit CachePolicy(EvictionPolicy policy);

  EvictionPolicy kind() const { return kind_; }

  // A batch uses the row in `slot` (entering: the row was just admitted to it, fetched from the
  // host or made by the batch): counts the use in `count` (the row's: the directory keeps it
  // with the row's slot, one memory access for both), moves the slot to the queue it now belongs
  // to (in `rec`, its record) and returns the entry to append to that queue. Safe on several
  // threads at once for distinct slots and rows.
  QueueEntry use(CacheSlot& rec, std::int32_t slot, std::uint32_t& count, bool entering) const {
    const int q = queue_for_use(count, entering);
    ++rec.version;
    rec.queue = static_cast<std::int8_t>(q);
    return QueueEntry{slot, rec.version};
  }
  // Appends entries[i] (made by use(), in the batch's order) to queue queues[i] (on several
  // threads when there are many).
  void append(std::span<const QueueEntry> entries, std::span<const std::int8_t> queues);
  // The row leaves `rec`'s slot. Safe on several threads for distinct slots.
  static void remove(CacheSlot& rec) {
    ++rec.version;
    rec.queue = -1;
  }
  // Appends up to n occupied slots that are not pinned, least valuable first. They stay in the
  // policy until removed.
  void victims(std::int64_t n, const CacheSlot* table, std::vector<std::int32_t>& out);
  // Drops the stale entries when the logs hold too many for the `occupied` slots; true when it
  // did.
  bool compact_if_due(const CacheSlot* table, std::int64_t occupied);
  // Forgets every slot (the cache was emptied; the caller resets the records). Row histories
  // (lfu_history) stay.
  void clear();
  // Entries in the logs, stale ones included (for tests).
  std::int64_t log_entries() const { return entries_; }

 private:
  using Log = std::vector<QueueEntry, LargePageAllocator<QueueEntry>>;
  struct Queue {
    Log log;  // [head, size): oldest first, stale entries among them
    std::size_t head = 0;
  };
  // Counts the use (saturating; lfu counts from the row's entry, lfu_history over its life) and
  // returns the queue: 0 (lru), else log2 of the count.
  int queue_for_use(std::uint32_t& count, bool entering) const {
    if (kind_ == EvictionPolicy::Lru) return 0;
    if (entering && kind_ == EvictionPolicy::Lfu) count = 0;
    if (count != UINT32_MAX) ++count;
    return std::min(kQueues - 1, static_cast<int>(std::bit_width(count)) - 1);
  }
  void compact(const CacheSlot* table);

  EvictionPolicy kind_;
  std::vector<Queue> queues_;
  std::int64_t entries_ = 0;  // in the logs, from their heads
  // Scratch: append()'s places per chunk and queue; compact()'s live marks, counts per chunk
  // and new log.
  std::vector<std::int64_t> append_counts_;
  std::vector<std::uint8_t> keep_;
  std::vector<std::size_t> kept_;
  Log compacted_;
  // victims()'s finds per chunk of a stretch of a log: the slots that may go, and where the
  // first live entry is.
  struct Walk {
    std::vector<std::int32_t> found;
    std::size_t first_live = SIZE_MAX;
  };
  std::vector<Walk> walks_;
};

}  // namespace ember::embedding
