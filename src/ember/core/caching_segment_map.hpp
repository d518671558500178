// Which stream pool a device address belongs to, for the caching device allocator: a free (and
// record_use, record_stream, allocated_size) is handed a bare pointer and must find the pool
// that owns its block before it can take that pool's lock. Looking the pointer up here takes no
// lock and writes nothing, so a free takes exactly one lock, its pool's, and the pool then finds
// the block in a map of its own (issue 18: before, a global map of live blocks cut into buckets
// with a lock each cost every allocation and free a second lock, and the statistics' shards a
// third: six locks, twelve atomic read-modify-writes, per pair).
//
// Every segment (an ordinary segment, or the mapped part of a growing one) is registered with
// the id of its pool while it lives. Lookups go through a three-level radix tree over 2 MiB
// granules of the address: one 64-bit word per granule, read with one acquire load, says which
// pool owns each part of it. A segment is at least 2 MiB long (the smallest segment the
// allocator makes), so at most two segments start or end inside one granule; the word holds
// two pool ids and the offset where the second begins. Where more would be needed (segments
// shorter than a granule: growing segments of a device with less than 2 MiB of memory in the
// tests) the word says so and the lookup falls back to the exact map under a lock. The exact
// map (segment base -> end, pool) is kept under the same lock, and every word is computed from
// it, so a word always answers correctly for every address of every registered segment: a
// pointer that is live lies in a registered segment, and registering or removing other segments
// only changes the parts of the word that concern them.
//
// Radix nodes are never freed while the map lives (a reader may be in one); they are made on
// registration only. Addresses at or above 2^57 (none on today's systems) take the locked path.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/core/spin_mutex.hpp"

namespace ember::detail {

class SegmentMap {
 public:
  // Pool ids are 1 .. kMaxPoolId; 0 means "no pool".
  static constexpr std::uint32_t kMaxPoolId = (std::uint32_t{1} << 20) - 1;
  static constexpr int kGranuleBits = 21;  // 2 MiB
  static constexpr std::size_t kGranule = std::size_t{1} << kGranuleBits;

  SegmentMap();
  ~SegmentMap();
  SegmentMap(const SegmentMap&) = delete;
  SegmentMap& operator=(const SegmentMap&) = delete;

  // Registers [base, base + bytes) as owned by pool `id`. The range must not overlap a
  // registered one. Either registers it completely or throws (host memory) and changes nothing.
  void add(const void* base, std::size_t bytes, std::uint32_t id);
  // Removes the registration of the range that starts at `base` (as added).
  void remove(const void* base) noexcept;

  // The pool id of the registered range that contains `p`, or 0. Takes no lock unless the
  // granule is shared by more ranges than its word can describe. For a pointer not inside a
  // registered range the answer may be any id (the pool's own map then does not know it).
  std::uint32_t find(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if ((a >> kAddressBits) != 0) return find_locked(a);
    const Mid* mid = top_[a >> kTopShift].load(std::memory_order_acquire);
    if (mid == nullptr) return 0;
    const Leaf* leaf = (*mid)[(a >> kMidShift) & kMask].load(std::memory_order_acquire);
    if (leaf == nullptr) return 0;
    const std::uint64_t word = (*leaf)[(a >> kGranuleBits) & kMask].load(std::memory_order_acquire);
    if (word == kOverflow) return find_locked(a);
    const std::uint64_t offset = a & (kGranule - 1);
    return static_cast<std::uint32_t>(offset < (word & kSplitMask) ? (word >> kLowShift) & kIdMask
                                                                   : word >> kHighShift);
  }

 private:
  // A granule's word: bits 0-21 the offset at which the high id starts, bits 22-41 the low id,
  // bits 42-61 the high id; kOverflow: ask the exact map.
  static constexpr int kLowShift = 22;
  static constexpr int kHighShift = 42;
  static constexpr std::uint64_t kSplitMask = (std::uint64_t{1} << kLowShift) - 1;
  static constexpr std::uint64_t kIdMask = kMaxPoolId;
  static constexpr std::uint64_t kOverflow = ~std::uint64_t{0};
  // 2^57 bytes of address in three levels of 4096 entries.
  static constexpr int kAddressBits = 57;
  static constexpr int kLevelBits = 12;
  static constexpr std::uint64_t kMask = (std::uint64_t{1} << kLevelBits) - 1;
  static constexpr int kMidShift = kGranuleBits + kLevelBits;
  static constexpr int kTopShift = kMidShift + kLevelBits;
  using Leaf = std::array<std::atomic<std::uint64_t>, std::size_t{1} << kLevelBits>;
  using Mid = std::array<std::atomic<Leaf*>, std::size_t{1} << kLevelBits>;

  struct Range {
    std::uintptr_t end;
    std::uint32_t id;
  };

  std::uint32_t find_locked(std::uintptr_t a) const noexcept;
  // The word for granule `g` (its first address), from the exact map. Under the lock.
  std::uint64_t word_for(std::uintptr_t g) const;
  // The word slot of granule `g`, making the nodes on the way; null at or above 2^57.
  std::atomic<std::uint64_t>* slot(std::uintptr_t g, bool make);
  // Rewrites the words of every granule that [begin, end) touches, after the range was added
  // with `id` or removed (`id` 0). Under the lock; the nodes exist (made by add()).
  void rewrite(std::uintptr_t begin, std::uintptr_t end, std::uint64_t id) noexcept;

  mutable SpinMutex mutex_;                 // guards ranges_ and every write of the tree
  std::map<std::uintptr_t, Range> ranges_;  // base -> end, id: the exact map
  std::array<std::atomic<Mid*>, std::size_t{1} << (kAddressBits - kTopShift)> top_;
  std::vector<std::unique_ptr<Mid>> mids_;
  std::vector<std::unique_ptr<Leaf>> leaves_;
};

}  // namespace ember::detail
