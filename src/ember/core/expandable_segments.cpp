#include "ember/core/expandable_segments.hpp"

#include <algorithm>

namespace ember::detail {

namespace {
constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}
}  // namespace

ExpandableSegments::ExpandableSegments(DeviceBackend& backend, std::size_t granularity,
                                       BlockPool& blocks, CachingCounters& counters)
    : backend_(backend), granularity_(granularity), blocks_(blocks), counters_(counters) {}

ExpandableSegments::~ExpandableSegments() {
  bool mapped = false;
  for (const auto& s : segments_)
    mapped = mapped || s->mapped > 0;
  if (mapped) {
    try {
      backend_.synchronize_device();
    } catch (...) {
      // Unmapping memory the device may still use is worse than keeping it: leave it mapped.
      return;
    }
  }
  for (const auto& s : segments_) {
    if (s->mapped > 0) backend_.unmap(s->base, s->mapped);
    backend_.release_address(s->base, s->reserved);
  }
}

GrowingSegment* ExpandableSegments::segment_for(StreamHandle stream, bool small) {
  for (const auto& s : segments_) {
    if (s->stream == stream && s->small == small) return s.get();
  }
  // Room for all of the device's memory: the segment can never run out of addresses first.
  const std::size_t total = round_up(
      std::max<std::size_t>(backend_.memory_info().total_bytes, granularity_), granularity_);
  auto s = std::make_unique<GrowingSegment>();
  s->stream = stream;
  s->small = small;
  s->reserved = total;
  segments_.reserve(segments_.size() + 1);
  s->base = static_cast<char*>(backend_.reserve_address(total));
  if (s->base == nullptr) return nullptr;
  segments_.push_back(std::move(s));
  return segments_.back().get();
}

bool ExpandableSegments::map_more(GrowingSegment& s, std::size_t bytes) {
  if (bytes > s.reserved - s.mapped) return false;
  const std::size_t ranges = (bytes + kMaxMapRange - 1) / kMaxMapRange;
  s.range_ends.reserve(s.range_ends.size() + ranges);  // nothing fails once memory is mapped
  const std::size_t ranges_before = s.range_ends.size();
  std::size_t done = 0;
  while (done < bytes) {
    const std::size_t n = std::min(kMaxMapRange, bytes - done);
    if (!backend_.map(s.base + s.mapped + done, n)) {
      if (done > 0) backend_.unmap(s.base + s.mapped, done);  // whole ranges of this growth
      s.range_ends.resize(ranges_before);
      return false;
    }
    done += n;
    s.range_ends.push_back(s.mapped + done);
  }
  counters_.device_malloc(bytes, s.mapped == 0 ? 1 : 0);
  s.mapped += bytes;
  return true;
}

std::size_t ExpandableSegments::growth_for(const GrowingSegment& s, std::size_t size) const {
  const CachingBlock* t = s.tail;
  // With a free end block, size > t->size (or the best fit would have found it).
  const std::size_t needed = t != nullptr && t->cached ? size - t->size : size;
  return round_up(std::max(needed, kMinGrowth), granularity_);
}

CachingBlock* ExpandableSegments::grow(GrowingSegment& s, std::size_t size) {
  CachingBlock* t = s.tail;
  const std::size_t more = growth_for(s, size);
  if (t != nullptr && t->cached) {
    if (!map_more(s, more)) return nullptr;
    blocks_.uncache(t);
    t->size += more;
    return t;
  }
  CachingBlock* b = blocks_.new_block();
  if (!map_more(s, more)) {
    blocks_.recycle(b);
    return nullptr;
  }
  b->ptr = s.base + s.mapped - more;
  b->size = more;
  b->stream = s.stream;
  b->small = s.small;
  b->growing = &s;
  b->prev = t;
  if (t != nullptr) t->next = b;
  s.tail = b;
  return b;
}

std::size_t ExpandableSegments::ranges_kept_after_trim(const GrowingSegment& s) const {
  const CachingBlock* t = s.tail;
  if (t == nullptr || !t->cached) return s.range_ends.size();
  // A range that starts before the free end block holds memory in use: it stays.
  const auto free_from = static_cast<std::size_t>(t->ptr - s.base);
  std::size_t kept = 0;
  while (kept < s.range_ends.size() && (kept == 0 ? 0 : s.range_ends[kept - 1]) < free_from) {
    ++kept;
  }
  return kept;
}

bool ExpandableSegments::has_free_end() const {
  for (const auto& s : segments_) {
    if (ranges_kept_after_trim(*s) < s->range_ends.size()) return true;
  }
  return false;
}

void ExpandableSegments::trim() {
  for (const auto& owned : segments_) {
    GrowingSegment& s = *owned;
    const std::size_t kept = ranges_kept_after_trim(s);
    if (kept == s.range_ends.size()) continue;
    const std::size_t keep = kept == 0 ? 0 : s.range_ends[kept - 1];
    const std::size_t cut = s.mapped - keep;
    backend_.unmap(s.base + keep, cut);
    s.range_ends.resize(kept);
    s.mapped = keep;
    counters_.device_free(cut, s.mapped == 0 ? 1 : 0);
    CachingBlock* t = s.tail;
    blocks_.uncache(t);
    t->size -= cut;
    if (t->size > 0) {
      blocks_.cache(t);
    } else {
      s.tail = t->prev;
      if (t->prev != nullptr) t->prev->next = nullptr;
      blocks_.recycle(t);
    }
  }
}

}  // namespace ember::detail
