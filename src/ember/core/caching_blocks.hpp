// The blocks of the caching device allocator and the pool of its free ones: best fit, splitting
// and merging (docs/memory.md, "The caching device allocator"). The allocator decides when to
// call what; this file only keeps the blocks consistent. Not thread-safe: used under the
// allocator's lock.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/stream_use_tracker.hpp"

namespace ember::detail {

struct CachingBlock;

// Orders blocks by (stream, size, address).
struct BlockLess {
  bool operator()(const CachingBlock* a, const CachingBlock* b) const;
};

// Gives every allocation whole cache lines of its own. The live-block map's buckets are written
// by threads on different streams at once: their hash nodes and bucket arrays, if they shared a
// line with another bucket's (as small heap blocks made one after the other do), would move it
// between cores at every allocation and free. The same goes for the tree nodes of two streams'
// free sets (a node is made by whichever thread first frees a block).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kLine = 64;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (padded(n), std::align_val_t{kLine}));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete (p, padded(n), std::align_val_t{kLine});
  }
  static std::size_t padded(std::size_t n) { return (n * sizeof(T) + kLine - 1) / kLine * kLine; }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};
// Free blocks in (stream, size, address) order: lower_bound on (stream, size, 0) is the best fit
// on that stream in O(log n).
using FreeSet = std::set<CachingBlock*, BlockLess, CacheLineAllocator<CachingBlock*>>;
using LiveMap = std::unordered_map<void*, CachingBlock*, std::hash<void*>, std::equal_to<void*>,
                                   CacheLineAllocator<std::pair<void* const, CachingBlock*>>>;

// A segment that grows in place (expandable_segments.hpp): a reservation of address space whose
// first `mapped` bytes are backed by memory, cut into blocks like any segment.
struct GrowingSegment {
  StreamHandle stream = nullptr;
  bool small = false;
  char* base = nullptr;
  std::size_t reserved = 0;
  std::size_t mapped = 0;
  // Where each DeviceBackend::map() range ends, in order (the last is `mapped`): memory goes
  // back in whole ranges only.
  std::vector<std::size_t> range_ends;
  CachingBlock* tail = nullptr;  // the block ending at base + mapped; null while nothing is mapped
};

// On cache lines of its own: block structs come in chunks per stream pool, and a chunk's last
// block must not share a line with another pool's chunk.
struct alignas(64) CachingBlock : StreamUses {
  char* ptr = nullptr;
  std::size_t size = 0;
  std::size_t requested = 0;
  StreamHandle stream = nullptr;
  // Neighbours within the same segment (address order); both null: the block is a segment.
  CachingBlock* prev = nullptr;
  CachingBlock* next = nullptr;
  bool small = false;
  bool allocated = false;
  bool cached = false;                // in its pool's free set
  GrowingSegment* growing = nullptr;  // the growing segment the block is part of, if any
  FreeSet::iterator position;
  // The tree and hash nodes a block moves in and out of the containers with, kept with the
  // block so that a cached allocate/free pair allocates no heap memory.
  FreeSet::node_type set_node;
  LiveMap::node_type map_node;
  CachingBlock* next_spare = nullptr;

  // The free end of a growing segment: always split off, because it merges with the next growth.
  bool at_growing_end() const { return growing != nullptr && growing->tail == this; }
};

inline bool BlockLess::operator()(const CachingBlock* a, const CachingBlock* b) const {
  if (a->stream != b->stream) return std::less<StreamHandle>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

// The free blocks of the small and the large pool, and the block structs, recycled.
class BlockPool {
 public:
  // Block sizes round up to this; a small block is split when at least this much remains.
  static constexpr std::size_t kRoundBytes = 512;
  // A large block is split only when more than this would remain.
  static constexpr std::size_t kLargeSplitRemainder = std::size_t{1} << 20;

  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A cleared block struct (may throw: host memory for bookkeeping); recycle() takes it back.
  CachingBlock* new_block();
  void recycle(CachingBlock* b) noexcept;

  // Into and out of the free set of the block's pool.
  void cache(CachingBlock* b);
  void uncache(CachingBlock* b) noexcept;
  // The smallest cached block of the pool and stream with at least `size` bytes, taken out of
  // the pool; null when there is none.
  CachingBlock* take_best_fit(bool small, StreamHandle stream, std::size_t size);

  // Gives the tail of `b` (out of the pool) beyond `size` back to the pool when it is worth
  // keeping. Throws (host memory for bookkeeping only) before changing anything.
  void maybe_split(CachingBlock* b, std::size_t size);
  // Caches `b` merged with its free neighbours.
  void merge_and_cache(CachingBlock* b);

  // Takes every cached block that is a whole ordinary segment out of the pools and hands it to
  // `release(CachingBlock*)`, which gives the memory back and recycles the struct.
  template <typename Release>
  void release_whole_segments(Release&& release) {
    for (FreeSet* pool : {&small_, &large_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        CachingBlock* b = *it;
        if (b->prev != nullptr || b->next != nullptr || b->growing != nullptr) {
          ++it;
          continue;
        }
        b->set_node = pool->extract(it++);
        b->cached = false;
        release(b);
      }
    }
  }

  std::size_t largest_free() const;
  std::size_t cached_total() const;

 private:
  FreeSet& pool_of(const CachingBlock* b) { return b->small ? small_ : large_; }

  FreeSet small_;
  FreeSet large_;
  CachingBlock key_;  // search key for take_best_fit
  std::vector<std::unique_ptr<CachingBlock[]>> chunks_;
  CachingBlock* spare_ = nullptr;
};

}  // namespace ember::detail
