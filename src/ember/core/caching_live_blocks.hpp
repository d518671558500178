// The blocks one stream pool has handed out, by address: an open-addressing hash table (linear
// probing, power-of-two capacity, at most half full, deletion by shifting back) guarded by the
// pool's lock. A free finds its pool through the SegmentMap (caching_segment_map.hpp) and then
// its block here, under the one lock it takes anyway.
//
// Not std::unordered_map: its bucket index is a division by a prime (some 20-40 cycles, twice
// a pair), and its nodes are heap objects; here a lookup is a multiplication and, mostly, one
// cache line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ember/core/caching_blocks.hpp"

namespace ember::detail {

class LiveBlocks {
 public:
  LiveBlocks() = default;
  LiveBlocks(const LiveBlocks&) = delete;
  LiveBlocks& operator=(const LiveBlocks&) = delete;

  // Makes room for one more block, so that the next insert() cannot fail. Throws (host memory
  // only) before changing anything.
  void reserve_one() {
    if (2 * (count_ + 1) > capacity()) rehash(capacity() == 0 ? kFirstCapacity : 2 * capacity());
  }
  // Adds `b` under b->ptr; reserve_one() came first.
  void insert(CachingBlock* b) noexcept {
    const auto key = reinterpret_cast<std::uintptr_t>(b->ptr);
    std::size_t i = home(key);
    while (slots_[i].block != nullptr)
      i = (i + 1) & mask_;
    slots_[i] = {key, b};
    ++count_;
  }
  // The block at `p`; null when none is live there.
  CachingBlock* find(const void* p) const noexcept {
    if (count_ == 0) return nullptr;
    const auto key = reinterpret_cast<std::uintptr_t>(p);
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.block == nullptr) return nullptr;
      if (s.key == key) return s.block;
    }
  }
  // Takes the block at `p` out; null when none is live there.
  CachingBlock* extract(const void* p) noexcept {
    if (count_ == 0) return nullptr;
    const auto key = reinterpret_cast<std::uintptr_t>(p);
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].block == nullptr) return nullptr;
      if (slots_[i].key == key) break;
    }
    CachingBlock* b = slots_[i].block;
    // Shift back the entries after the hole that would no longer be found past it.
    for (std::size_t j = (i + 1) & mask_; slots_[j].block != nullptr; j = (j + 1) & mask_) {
      // Entry j may fill hole i unless its home lies cyclically in (i, j].
      if (((j - home(slots_[j].key)) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --count_;
    return b;
  }

  // Every live block.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.block != nullptr) f(s.block);
    }
  }
  std::size_t size() const { return count_; }

 private:
  struct Slot {
    std::uintptr_t key = 0;
    CachingBlock* block = nullptr;  // null: empty
  };
  static constexpr std::size_t kFirstCapacity = 16;

  std::size_t capacity() const { return slots_.size(); }
  std::size_t home(std::uintptr_t key) const {
    // Blocks start on 512-byte boundaries; Fibonacci hashing spreads the rest.
    return static_cast<std::size_t>(((key >> 9) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void rehash(std::size_t capacity) {
    // On cache lines of its own: two pools' tables must not share one (each is written by its
    // own stream's thread).
    std::vector<Slot, CacheLineAllocator<Slot>> old(capacity);
    old.swap(slots_);
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1)
      --shift_;
    count_ = 0;
    for (const Slot& s : old) {
      if (s.block != nullptr) insert(s.block);
    }
  }

  std::vector<Slot, CacheLineAllocator<Slot>> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t count_ = 0;
};

}  // namespace ember::detail
