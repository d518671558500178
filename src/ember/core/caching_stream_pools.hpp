// What the caching device allocator keeps for each stream, and the index of those pools.
//
// Every block belongs to one stream for good: it is carved from a segment that stream obtained
// and is reused only by that stream's allocations. So each stream's blocks, segments, waiting
// frees, live blocks and share of the statistics form a pool with a lock of its own, and
// threads allocating on different streams never wait for each other (issue 18: eight threads on
// one allocator took 10 us a pair behind one lock). A cached allocation or a free takes that
// one lock and no other: a free finds the pool of its pointer through the SegmentMap, which
// takes no lock.
// Locks, in the order they may be taken:
//   1. the index's registry mutex (creating a pool; taking every pool's lock);
//   2. a pool's lock (every pool's, in creation order, on the out-of-memory path, for stats and
//      where an allocation passes its statistics' budget);
//   3. the counters' global lock (caching_counters.hpp) or the SegmentMap's, held for a few
//      instructions, and only where device memory is obtained or given back (or the budget is
//      passed).
// Finding a stream's pool takes no lock: the index is a hash table whose slots are published
// with release stores and read with acquire loads; a table that fills up is replaced by a larger
// one, and replaced tables are kept (readers may still be in them) until the allocator goes.
// Pools are also found by their id (the SegmentMap's answer) without a lock, through a table of
// chunks that are made once and never move.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ember/core/caching_blocks.hpp"
#include "ember/core/caching_counters.hpp"
#include "ember/core/caching_live_blocks.hpp"
#include "ember/core/caching_segment_map.hpp"
#include "ember/core/device_backend.hpp"
#include "ember/core/expandable_segments.hpp"
#include "ember/core/spin_mutex.hpp"
#include "ember/core/stream_use_tracker.hpp"

namespace ember::detail {

// One stream's part of a caching device allocator. Everything in it is guarded by `mutex`.
struct alignas(64) StreamPool {
  // `id`: the pool's id in `segments_map`. `granularity` > 0: expandable segments in steps of
  // it.
  StreamPool(StreamHandle stream, std::uint32_t id, DeviceBackend& backend,
             const std::string& owner, std::size_t granularity, CachingCounters& counters,
             SegmentMap& segment_map);
  // Gives the segments back (memory still handed out becomes invalid).
  ~StreamPool();
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  // A freed block no stream uses any more goes back to its pool, merged with free neighbours.
  // `counted`: the counters already know it is no longer active.
  void release_block(CachingBlock* b, bool counted) {
    if (!counted) shard.released(b->size);
    blocks.merge_and_cache(b);
  }
  // Returns the waiting blocks whose events have completed.
  void poll();
  // Waits for every pending event and returns the blocks (out-of-memory path only).
  void wait_for_events();

  // New memory for a request of `size` (rounded) bytes that no cached block fits: the growing
  // segment of the pool grown, or else an ordinary segment of `segment` bytes, registered in
  // the SegmentMap. The block is out of the pools; null when the device is out of memory.
  // Never flushes anything.
  CachingBlock* obtain(bool small, std::size_t size, std::size_t segment);
  // True when requests of this pool come from a growing segment.
  bool grows(bool small);

  // Frees every ordinary segment that is entirely cached; with `trim`, also unmaps the free ends
  // of the growing segments (the caller has waited for the device).
  void release_cached(bool trim);
  bool has_free_growing_end() const { return growing && growing->has_free_end(); }

  SpinMutex mutex;
  const StreamHandle stream;
  const std::uint32_t id;
  DeviceBackend& backend;
  CachingCounters& counters;      // the device figures (reserved, segments)
  CachingCounters::Shard& shard;  // this pool's part of the allocation figures
  SegmentMap& segment_map;        // shared; its own lock
  BlockPool blocks;
  LiveBlocks live;  // the blocks handed out and not yet freed
  StreamUseTracker uses;
  std::optional<ExpandableSegments> growing;
  std::unordered_set<void*> segments;  // every ordinary segment's base
  std::int64_t allocs = 0;             // allocate() calls served, deallocate() calls
  std::int64_t frees = 0;
};

// The pools of one allocator, by stream.
class StreamPools {
 public:
  // Makes the pool of a stream, with the id it is to have.
  using Factory = std::function<std::unique_ptr<StreamPool>(StreamHandle, std::uint32_t)>;
  explicit StreamPools(Factory make);
  ~StreamPools();
  StreamPools(const StreamPools&) = delete;
  StreamPools& operator=(const StreamPools&) = delete;

  // The pool of `stream`; null when it has none yet. Takes no lock.
  StreamPool* find(StreamHandle stream) const noexcept {
    const Table* t = table_.load(std::memory_order_acquire);
    for (std::size_t i = home_slot(stream, t->mask);; i = (i + 1) & t->mask) {
      StreamPool* p = t->slots[i].load(std::memory_order_acquire);
      if (p == nullptr || p->stream == stream) return p;
    }
  }
  // The pool with `id` (a SegmentMap answer); null for 0 or an id no pool has. Takes no lock.
  StreamPool* by_id(std::uint32_t id) const noexcept {
    const auto* chunk = by_id_[id / kChunk].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : chunk[id % kChunk].load(std::memory_order_acquire);
  }
  // The pool of `stream`, created on first use.
  StreamPool& get(StreamHandle stream) {
    if (StreamPool* p = find(stream); p != nullptr) return *p;
    return create(stream);
  }

  // Holds the registry and every pool's lock (in creation order) for a scope.
  class LockAll {
   public:
    explicit LockAll(StreamPools& pools);
    ~LockAll();
    LockAll(const LockAll&) = delete;
    LockAll& operator=(const LockAll&) = delete;
    const std::vector<std::unique_ptr<StreamPool>>& pools() const { return pools_.pools_; }

   private:
    StreamPools& pools_;
    std::unique_lock<std::mutex> registry_;
  };

  // Every pool; only while no other thread uses the allocator, or under LockAll.
  const std::vector<std::unique_ptr<StreamPool>>& unlocked_pools() const { return pools_; }

 private:
  struct Table {
    explicit Table(std::size_t capacity);
    std::size_t mask;
    std::unique_ptr<std::atomic<StreamPool*>[]> slots;
  };
  static std::size_t home_slot(StreamHandle stream, std::size_t mask) {
    const auto a = reinterpret_cast<std::uintptr_t>(stream) >> 4;
    return static_cast<std::size_t>((a * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  }
  static constexpr std::uint32_t kChunk = 1024;
  static constexpr std::uint32_t kChunks = (SegmentMap::kMaxPoolId + 1) / kChunk;
  // The pool of `stream` made (unless another thread just made it) and published.
  StreamPool& create(StreamHandle stream);
  // Puts `pool` into the table in use (under the registry mutex), growing it first when full.
  void index(StreamPool* pool);

  Factory make_;
  std::mutex registry_;
  std::vector<std::unique_ptr<StreamPool>> pools_;  // creation order
  std::vector<std::unique_ptr<Table>> tables_;      // every table made; the last is in use
  std::atomic<Table*> table_{nullptr};
  // Pools by id, in chunks of kChunk made on first use.
  std::array<std::atomic<std::atomic<StreamPool*>*>, kChunks> by_id_{};
  std::vector<std::unique_ptr<std::atomic<StreamPool*>[]>> chunks_;
};

}  // namespace ember::detail
