// The caching pinned-host allocator. Pinned (page-locked) memory is what makes host-to-device
// copies fast and asynchronous, and cudaHostAlloc is expensive (it maps the pages for every
// device), so freed blocks are kept in power-of-two size classes and handed out again.
//
// A block used by asynchronous copies is reused only after those copies are done: each stream
// the block was used on (record_stream / record_use, which copy_bytes calls for pinned memory
// it queues on a stream) gets an event at free time, and the block returns to its size class
// once all those events have completed. Events are polled on allocation, never waited for,
// except on the out-of-memory path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ember/core/allocator.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/device_backend.hpp"

namespace ember {

struct PinnedAllocatorStats {
  TrackedStat allocated_bytes;  // size-class bytes handed out
  TrackedStat requested_bytes;  // bytes asked for
  TrackedStat reserved_bytes;   // pinned memory held, handed out or cached
  TrackedStat allocations;      // blocks handed out
  std::int64_t num_allocs = 0;
  std::int64_t num_frees = 0;
  std::int64_t host_allocs = 0;  // cudaHostAlloc calls (backend mallocs)
  std::int64_t host_frees = 0;
  std::int64_t alloc_retries = 0;
  std::int64_t ooms = 0;
  std::int64_t event_synchronizations = 0;  // blocking waits (out-of-memory path only)
  std::int64_t cached_bytes = 0;            // snapshot: bytes ready for reuse
  std::int64_t pending_blocks = 0;          // snapshot: freed blocks waiting for copies
};

class CachingPinnedAllocator final : public Allocator {
 public:
  // The smallest size class: one page, the granularity at which memory is pinned anyway.
  static constexpr std::size_t kMinBlock = 4096;

  explicit CachingPinnedAllocator(std::unique_ptr<DeviceBackend> backend);
  // Gives every block back. Memory still allocated becomes invalid.
  ~CachingPinnedAllocator() override;
  CachingPinnedAllocator(const CachingPinnedAllocator&) = delete;
  CachingPinnedAllocator& operator=(const CachingPinnedAllocator&) = delete;

  Place place() const override { return Place::pinned(); }
  std::string name() const override { return "pinned_caching"; }

  void* allocate(std::size_t bytes) override;
  // As allocate(bytes), and the block counts as used on `stream` (see record_stream).
  void* allocate(std::size_t bytes, StreamHandle stream) override;
  // Aborts on a pointer this allocator did not hand out.
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
  // Work queued on `stream` so far uses the block: it is not reused before that work is done.
  void record_stream(void* ptr, StreamHandle stream) override;
  // As record_stream, for any pointer into a live block; returns false (and does nothing) when
  // `ptr` is not inside memory this allocator handed out.
  bool record_use(const void* ptr, StreamHandle stream);

  // Frees every cached block (blocks still waiting for copies stay).
  void empty_cache();
  PinnedAllocatorStats stats() const;
  void reset_peak_stats();

  // The size class of a request: the next power of two, at least kMinBlock.
  static std::size_t size_class(std::size_t bytes);

  DeviceBackend& backend();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember
