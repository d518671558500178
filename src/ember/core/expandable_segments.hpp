// Expandable segments for the caching device allocator: one segment per stream and pool that
// grows in place, instead of new fixed-size segments (docs/memory.md, "Expandable segments").
//
// A segment is a reservation of address space as large as the device's memory; its start is
// backed by memory, granule by granule (DeviceBackend::map). When no cached block fits, the
// segment grows: its free end block grows into the new memory, or a new block is added after
// the last one. Out of memory and empty_cache() unmap the free end again (after waiting for the
// device: unmapping, unlike cudaFree, does not). Not thread-safe: used under the lock of the
// blocks it shares with the allocator.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ember/core/caching_blocks.hpp"
#include "ember/core/caching_counters.hpp"
#include "ember/core/device_backend.hpp"

namespace ember::detail {

class ExpandableSegments {
 public:
  // A growth is mapped in ranges of at most this size: few driver calls for a large growth,
  // while a free end that begins inside a range keeps at most this much mapped after a trim.
  static constexpr std::size_t kMaxMapRange = std::size_t{64} << 20;
  // A growth maps at least this much (rounded up to the granularity). Each growth is three
  // driver calls (cuMemCreate, cuMemMap, cuMemSetAccess) where a fixed segment is one
  // cudaMalloc; growing by the request alone took 81 growths on bench_memory's trace (e) where
  // fixed segments took 36 cudaMallocs, and (e) was the trace where the expandable default cost
  // time (1.25x on the H100). Swept over 2-20 MiB in the quick run: 6 MiB is the largest step
  // that keeps (c) and (d) at 1.095 and 1.085 (8 MiB: 1.104 on (d)), and every trace takes about
  // as many growths as fixed segments take cudaMallocs, or fewer ((b) 21 and 53 against 63 and
  // 160, (e) 39 against 35).
  static constexpr std::size_t kMinGrowth = std::size_t{6} << 20;

  // `granularity` (> 0): the backend's map_granularity().
  ExpandableSegments(DeviceBackend& backend, std::size_t granularity, BlockPool& blocks,
                     CachingCounters& counters);
  // Unmaps and releases every segment, after waiting for the device (memory the device may
  // still use is left mapped when that wait fails).
  ~ExpandableSegments();
  ExpandableSegments(const ExpandableSegments&) = delete;
  ExpandableSegments& operator=(const ExpandableSegments&) = delete;

  std::size_t granularity() const { return granularity_; }

  // The growing segment of (stream, pool), reserved on first use; null when no address space
  // could be reserved (the caller then uses ordinary segments).
  GrowingSegment* segment_for(StreamHandle stream, bool small);
  // How many bytes grow() maps for a request of `size` bytes.
  std::size_t growth_for(const GrowingSegment& segment, std::size_t size) const;
  // A block of at least `size` bytes at the end of `segment`, out of the pools: the free end
  // block grown, or a new block. Null when the device is out of memory.
  CachingBlock* grow(GrowingSegment& segment, std::size_t size);

  // True when some segment ends in free memory that trim() would unmap.
  bool has_free_end() const;
  // Unmaps the mapped ranges that lie wholly in every segment's free end block. The caller has
  // waited for the device (DeviceBackend::synchronize_device) first.
  void trim();

 private:
  // Maps `bytes` more at the end of `segment`, in ranges of at most kMaxMapRange; false (with
  // nothing mapped) when the device is out of memory.
  bool map_more(GrowingSegment& segment, std::size_t bytes);
  // How many of the segment's mapped ranges stay after a trim (the rest lie in its free end).
  std::size_t ranges_kept_after_trim(const GrowingSegment& segment) const;

  DeviceBackend& backend_;
  std::size_t granularity_;
  BlockPool& blocks_;
  CachingCounters& counters_;
  std::vector<std::unique_ptr<GrowingSegment>> segments_;
};

}  // namespace ember::detail
