// The caching device allocator: keeps freed device memory and hands it out again, because
// cudaMalloc and cudaFree are slow and synchronise the device (after PyTorch's CUDA caching
// allocator). docs/memory.md describes the policy; in short:
//   - sizes round up to 512 bytes; requests of at most 1 MiB come from 2 MiB segments (small
//     pool), larger ones from 20 MiB segments (requests under 10 MiB) or from a segment of the
//     request rounded up to 2 MiB;
//   - best fit among the cached blocks of the same pool and stream; a block is split when the
//     remainder is worth keeping (>= 512 B small, > 1 MiB large); freed blocks merge with free
//     neighbours of the same segment;
//   - a block also used on other streams returns to the pool only once events recorded on those
//     streams have completed (at free time for record_stream, at once for record_use); they are
//     polled, never waited for;
//   - when the device is out of memory: free every cached unused segment, retry, and only then
//     throw OutOfMemoryError with the numbers.
// With expandable segments (an option of this class; the process-wide default allocator turns
// it on, EMBER_ALLOCATOR=caching off) each stream has one segment per pool that grows in place
// (the driver's virtual memory API maps more memory at its end, at least 6 MiB at a time)
// instead of new segments being added; see docs/memory.md.
// Threads on different streams share no lock and write no shared cache line on the fast path:
// each stream has its own pool, its own live blocks and its own share of the statistics
// (caching_counters.hpp). A cached allocation or a free takes one lock, its pool's: a free finds
// the pool of its pointer through a lock-free map of the segments (caching_segment_map.hpp).
// The policy talks to the device only through a DeviceBackend, so it runs without a GPU too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ember/core/allocator.hpp"
#include "ember/core/device_backend.hpp"

namespace ember {

// A quantity with its high-water mark since construction or the last reset_peak_stats().
struct TrackedStat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
};

struct CachingAllocatorStats {
  // Bytes of the blocks handed out (sizes as rounded up by the allocator).
  TrackedStat allocated_bytes;
  // Bytes the callers asked for (not rounded): the "live" bytes.
  TrackedStat requested_bytes;
  // allocated_bytes plus freed blocks still waiting for other streams' events.
  TrackedStat active_bytes;
  // Device memory held: the sum of all segments.
  TrackedStat reserved_bytes;
  TrackedStat segments;
  // Blocks handed out and not yet freed.
  TrackedStat allocations;

  std::int64_t num_allocs = 0;              // successful allocate() calls (non-zero sizes)
  std::int64_t num_frees = 0;               // deallocate() calls (non-null pointers)
  std::int64_t device_mallocs = 0;          // segments obtained from the backend
  std::int64_t device_frees = 0;            // segments given back to the backend
  std::int64_t alloc_retries = 0;           // device mallocs that failed and led to a cache flush
  std::int64_t ooms = 0;                    // OutOfMemoryError thrown
  std::int64_t event_synchronizations = 0;  // blocking waits (only on the out-of-memory path)

  // Snapshots taken when stats() is called.
  std::int64_t cached_bytes = 0;        // bytes in free blocks ready for reuse
  std::int64_t largest_free_block = 0;  // the largest of those blocks
  std::int64_t pending_blocks = 0;      // freed blocks waiting for other streams

  // Memory held but not handed out: what fragmentation (and caching) costs right now.
  std::int64_t unallocated_reserved_bytes() const {
    return reserved_bytes.current - allocated_bytes.current;
  }
};

// Human-readable multi-line summary of the statistics.
std::string to_string(const CachingAllocatorStats& stats);

class CachingDeviceAllocator final : public Allocator {
 public:
  static constexpr std::size_t kRoundBytes = 512;
  static constexpr std::size_t kSmallRequest = std::size_t{1} << 20;        // small pool: <= 1 MiB
  static constexpr std::size_t kSmallSegment = std::size_t{2} << 20;        // 2 MiB
  static constexpr std::size_t kLargeSegment = std::size_t{20} << 20;       // 20 MiB
  static constexpr std::size_t kLargeSegmentLimit = std::size_t{10} << 20;  // requests < 10 MiB
  static constexpr std::size_t kLargeRounding = std::size_t{2} << 20;
  // A large block is split only when more than this would remain.
  static constexpr std::size_t kLargeSplitRemainder = std::size_t{1} << 20;

  struct Options {
    // One segment per stream and pool that grows in place, where the backend can map memory
    // (DeviceBackend::map_granularity() > 0); ordinary segments otherwise.
    bool expandable_segments = false;
  };

  // `place` is what the allocator reports (and names in messages); the backend does the work.
  CachingDeviceAllocator(std::unique_ptr<DeviceBackend> backend, Place place);
  CachingDeviceAllocator(std::unique_ptr<DeviceBackend> backend, Place place, Options options);
  // Gives every segment back to the backend. Memory still allocated becomes invalid.
  ~CachingDeviceAllocator() override;
  CachingDeviceAllocator(const CachingDeviceAllocator&) = delete;
  CachingDeviceAllocator& operator=(const CachingDeviceAllocator&) = delete;

  Place place() const override { return place_; }
  std::string name() const override { return "cuda_caching"; }

  // For use on the device's current stream.
  void* allocate(std::size_t bytes) override;
  // For use on `stream`: the block is reused only by later allocations on the same stream
  // (stream order makes that safe), unless record_stream() names other streams.
  void* allocate(std::size_t bytes, StreamHandle stream) override;
  // Aborts the process on a pointer this allocator did not hand out: continuing would corrupt
  // the pools.
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
  // `ptr` (a pointer allocate() returned) is also used on `stream` until it is freed: at free
  // time an event is recorded on `stream` and the block is reused once it has completed.
  // `stream` must still exist when the block is freed.
  void record_stream(void* ptr, StreamHandle stream) override;
  // The work queued on `stream` so far uses `ptr`: an event is recorded on `stream` now and the
  // block, once freed, is reused only after it has completed. `stream` may be destroyed at any
  // time after the call.
  void record_use(void* ptr, StreamHandle stream) override;

  // The bytes the block at `ptr` (from allocate()) occupies: the request rounded up, or more
  // when the rest of a large block was too small to split off. 0 for a pointer not handed out.
  std::size_t allocated_size(const void* ptr) const;

  // Gives every cached segment that is entirely free back to the device; with expandable
  // segments, the free memory at the end of each segment (after waiting for the device).
  void empty_cache();
  // True when segments grow in place (the option was asked for and the backend can map).
  bool expandable_segments() const;
  CachingAllocatorStats stats() const;
  void reset_peak_stats();

  // The size a request is rounded to, and the segment a request of that rounded size gets.
  static std::size_t round_size(std::size_t bytes) {
    return bytes < kRoundBytes ? kRoundBytes
                               : (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
  }
  static std::size_t segment_size(std::size_t rounded);

  DeviceBackend& backend();

 private:
  struct Impl;
  Place place_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember
