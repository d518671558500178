#include "ember/core/caching_segment_map.hpp"

#include <algorithm>

#include "ember/core/error.hpp"

namespace ember::detail {

SegmentMap::SegmentMap() {
  for (auto& m : top_)
    m.store(nullptr, std::memory_order_relaxed);
}

SegmentMap::~SegmentMap() = default;

std::uint32_t SegmentMap::find_locked(std::uintptr_t a) const noexcept {
  std::lock_guard<SpinMutex> lock(mutex_);
  auto it = ranges_.upper_bound(a);
  if (it == ranges_.begin()) return 0;
  --it;
  return a < it->second.end ? it->second.id : 0;
}

std::uint64_t SegmentMap::word_for(std::uintptr_t g) const {
  // The ranges that touch [g, g + kGranule), in address order, as runs of one pool.
  std::uint32_t ids[2] = {0, 0};
  std::uintptr_t second_from = 0;
  int runs = 0;
  auto it = ranges_.upper_bound(g);
  if (it != ranges_.begin() && std::prev(it)->second.end > g) --it;
  for (; it != ranges_.end() && it->first < g + kGranule; ++it) {
    if (runs > 0 && ids[runs - 1] == it->second.id) continue;
    if (runs == 2) return kOverflow;
    ids[runs] = it->second.id;
    if (runs == 1) second_from = std::max(it->first, g) - g;
    ++runs;
  }
  if (runs == 0) return 0;
  if (runs == 1) return std::uint64_t{ids[0]} << kLowShift | std::uint64_t{ids[0]} << kHighShift;
  return second_from | std::uint64_t{ids[0]} << kLowShift | std::uint64_t{ids[1]} << kHighShift;
}

std::atomic<std::uint64_t>* SegmentMap::slot(std::uintptr_t g, bool make) {
  if ((g >> kAddressBits) != 0) return nullptr;
  std::atomic<Mid*>& mid_slot = top_[g >> kTopShift];
  Mid* mid = mid_slot.load(std::memory_order_relaxed);
  if (mid == nullptr) {
    if (!make) return nullptr;
    mids_.reserve(mids_.size() + 1);
    auto fresh = std::make_unique<Mid>();
    for (auto& l : *fresh)
      l.store(nullptr, std::memory_order_relaxed);
    mid = fresh.get();
    mids_.push_back(std::move(fresh));
    mid_slot.store(mid, std::memory_order_release);
  }
  std::atomic<Leaf*>& leaf_slot = (*mid)[(g >> kMidShift) & kMask];
  Leaf* leaf = leaf_slot.load(std::memory_order_relaxed);
  if (leaf == nullptr) {
    if (!make) return nullptr;
    leaves_.reserve(leaves_.size() + 1);
    auto fresh = std::make_unique<Leaf>();
    for (auto& w : *fresh)
      w.store(0, std::memory_order_relaxed);
    leaf = fresh.get();
    leaves_.push_back(std::move(fresh));
    leaf_slot.store(leaf, std::memory_order_release);
  }
  return &(*leaf)[(g >> kGranuleBits) & kMask];
}

void SegmentMap::rewrite(std::uintptr_t begin, std::uintptr_t end, std::uint64_t id) noexcept {
  const std::uint64_t whole_word = id << kLowShift | id << kHighShift;
  const std::uintptr_t first = begin & ~(kGranule - 1);
  for (std::uintptr_t g = first; g < end && g >= first; g += kGranule) {
    std::atomic<std::uint64_t>* w = slot(g, false);
    if (w == nullptr) continue;  // at or above 2^57: the exact map answers there
    // Only the granules at either end can hold another range; the rest are this range's.
    const bool whole = g >= begin && end - g >= kGranule;
    w->store(whole ? whole_word : word_for(g), std::memory_order_release);
  }
}

void SegmentMap::add(const void* base, std::size_t bytes, std::uint32_t id) {
  EMBER_CHECK(id >= 1 && id <= kMaxPoolId, "SegmentMap: pool id ", id, " out of range");
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t end = begin + bytes;
  EMBER_CHECK(bytes > 0 && end > begin, "SegmentMap: empty or wrapping range at ", base);
  std::lock_guard<SpinMutex> lock(mutex_);
  // Everything that can fail first: the exact map's entry, then the tree's nodes.
  auto [it, inserted] = ranges_.emplace(begin, Range{end, id});
  EMBER_CHECK(inserted, "SegmentMap: a range at ", base, " is registered already");
  try {
    const std::uintptr_t first = begin & ~(kGranule - 1);
    for (std::uintptr_t g = first; g < end && g >= first; g += kGranule) {
      if (slot(g, true) == nullptr) break;
    }
  } catch (...) {
    ranges_.erase(it);
    throw;
  }
  rewrite(begin, end, id);
}

void SegmentMap::remove(const void* base) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  std::lock_guard<SpinMutex> lock(mutex_);
  auto it = ranges_.find(begin);
  if (it == ranges_.end()) return;
  const std::uintptr_t end = it->second.end;
  ranges_.erase(it);
  rewrite(begin, end, 0);
}

}  // namespace ember::detail
