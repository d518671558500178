// The blocks of the caching device allocator and the pool of its free ones: best fit, splitting
// and merging (docs/memory.md, "The caching device allocator"). The allocator decides when to
// call what; this file only keeps the blocks consistent. Not thread-safe: used under the lock of
// the stream pool the blocks belong to.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <utility>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/stream_use_tracker.hpp"

namespace ember::detail {

struct CachingBlock;

// Orders blocks by (size, address). A free set holds the blocks of one stream only (each stream
// has a pool of its own).
struct BlockLess {
  bool operator()(const CachingBlock* a, const CachingBlock* b) const;
};

// Gives every allocation whole cache lines of its own. Each stream's pool is written by its own
// thread: its tree nodes and tables, if they shared a line with another pool's (as small heap
// blocks made one after the other do), would move it between cores at every allocation and
// free.
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
// Free blocks in (size, address) order: lower_bound on (size, 0) is the best fit in O(log n).
using FreeSet = std::set<CachingBlock*, BlockLess, CacheLineAllocator<CachingBlock*>>;

// A segment that grows in place (expandable_segments.hpp): a reservation of address space whose
// first `mapped` bytes are backed by memory, cut into blocks like any segment.
struct GrowingSegment {
  StreamHandle stream = nullptr;
  bool small = false;
  char* base = nullptr;
  std::size_t reserved = 0;
  std::size_t mapped = 0;
  std::size_t registered = 0;  // bytes from `base` registered in the SegmentMap (>= mapped)
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
  // The tree node the block moves in and out of its free set with, kept with the block while
  // it is out of the set: every block struct has one from new_block() on, so caching a block
  // never allocates (and never fails), and a cached allocate/free pair allocates no heap memory.
  FreeSet::node_type set_node;
  CachingBlock* next_spare = nullptr;

  // The free end of a growing segment: always split off, because it merges with the next growth.
  bool at_growing_end() const { return growing != nullptr && growing->tail == this; }
};

inline bool BlockLess::operator()(const CachingBlock* a, const CachingBlock* b) const {
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

// The free blocks of the small and the large pool of one stream, and the block structs,
// recycled.
//
// Splitting and merging keep the tree still where they can. A cached allocate/free pair splits
// a block and merges it back: done as "take the block out, put the rest in; take the rest out,
// put the whole in", that is four rebalancing tree operations, about a quarter of a pair's time
// on the development machine. But the rest of a split takes the place of the block it came from,
// and a merged block the place of its free neighbour, in the tree's order as long as no other block
// lies between the old and the new key; then the free block's struct stays in its tree node and
// only its size and address change (rekey()), and the pair touches the tree not at all. Which
// struct stands for which block is the only difference: the free blocks, their sizes and
// addresses, and so every best fit, are the same as with the four operations.
class BlockPool {
 public:
  // Block sizes round up to this; a small block is split when at least this much remains.
  static constexpr std::size_t kRoundBytes = 512;
  // A large block is split only when more than this would remain.
  static constexpr std::size_t kLargeSplitRemainder = std::size_t{1} << 20;

  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A cleared block struct, with its tree node (may throw: host memory for bookkeeping);
  // recycle() takes it back. Inline, as best_fit(): every cached pair calls them.
  CachingBlock* new_block() {
    if (spare_ == nullptr || spare_->set_node.empty()) return new_block_slow();
    CachingBlock* b = spare_;
    spare_ = b->next_spare;
    b->next_spare = nullptr;
    return b;
  }
  void recycle(CachingBlock* b) noexcept {
    b->ptr = nullptr;
    b->size = b->requested = 0;
    b->stream = nullptr;
    b->prev = b->next = nullptr;
    b->allocated = b->cached = false;
    b->growing = nullptr;
    b->clear_uses();
    b->next_spare = spare_;
    spare_ = b;
  }

  // Into and out of the free set of the block's pool.
  void cache(CachingBlock* b) noexcept;
  void uncache(CachingBlock* b) noexcept;
  // The smallest cached block of the pool with at least `size` bytes (the lowest address among
  // equals), left in the pool; null when there is none.
  CachingBlock* best_fit(bool small, std::size_t size) {
    FreeSet& pool = small ? small_ : large_;
    key_.size = size;
    key_.ptr = nullptr;
    auto it = pool.lower_bound(&key_);
    return it == pool.end() ? nullptr : *it;
  }
  // Hands out the first `size` (rounded) bytes of the cached block `f`: returns the block that
  // holds them, out of the pool, and leaves the rest of `f` cached when it is worth keeping
  // (all of `f` is handed out otherwise). Throws (host memory for bookkeeping only) before
  // changing anything.
  CachingBlock* carve(CachingBlock* f, std::size_t size);

  // The size `b` has once handed out for a request of `size` (rounded) bytes: `size` when the
  // rest is worth keeping (split off by maybe_split), all of `b` otherwise.
  static std::size_t size_after_split(const CachingBlock& b, std::size_t size) {
    const std::size_t remainder = b.size - size;
    const bool worth = (b.small || b.at_growing_end()) ? remainder >= kRoundBytes
                                                       : remainder > kLargeSplitRemainder;
    return worth ? size : b.size;
  }
  // Gives the tail of `b` (out of the pool: new memory) beyond `size` back to the pool when it
  // is worth keeping. Throws (host memory for bookkeeping only) before changing anything.
  void maybe_split(CachingBlock* b, std::size_t size);
  // Caches `b` (out of the pool) merged with its free neighbours: a free neighbour grows over
  // `b`, whose struct is recycled, or else `b` goes into the pool.
  void merge_and_cache(CachingBlock* b) noexcept;

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
  // new_block() when no spare struct with a tree node is at hand.
  CachingBlock* new_block_slow();
  // Gives the cached block `b` a new size and address, in place where its neighbours in the
  // tree's order allow, else by moving it.
  void rekey(CachingBlock* b, std::size_t size, char* ptr) noexcept;

  FreeSet small_;
  FreeSet large_;
  CachingBlock key_;    // search key for best_fit
  FreeSet node_maker_;  // always empty: gives new block structs their tree nodes
  std::vector<std::unique_ptr<CachingBlock[]>> chunks_;
  CachingBlock* spare_ = nullptr;
};

}  // namespace ember::detail
