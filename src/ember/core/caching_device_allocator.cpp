#include "ember/core/caching_device_allocator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "ember/core/caching_blocks.hpp"
#include "ember/core/caching_counters.hpp"
#include "ember/core/caching_segment_map.hpp"
#include "ember/core/caching_stream_pools.hpp"
#include "ember/core/error.hpp"
#include "ember/core/spin_mutex.hpp"
#include "ember/core/stream_use_tracker.hpp"

namespace ember {

namespace {

using detail::BlockPool;
using detail::CachingBlock;
using detail::StreamPool;
using detail::StreamPools;

constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// Requests beyond this cannot be rounded without overflow; no device has that much anyway.
constexpr std::size_t kMaxRequest = (std::size_t{1} << 62);

static_assert(CachingDeviceAllocator::kRoundBytes == detail::BlockPool::kRoundBytes);
static_assert(CachingDeviceAllocator::kLargeSplitRemainder ==
              detail::BlockPool::kLargeSplitRemainder);

}  // namespace

struct CachingDeviceAllocator::Impl {
  Impl(std::unique_ptr<DeviceBackend> b, Place p, bool expandable)
      : backend(std::move(b)),
        place(p),
        owner(cat("the caching allocator of ", p.to_string())),
        granularity(expandable ? backend->map_granularity() : 0),
        pools([this](StreamHandle stream, std::uint32_t id) {
          return std::make_unique<StreamPool>(stream, id, *backend, owner, granularity, counters,
                                              segment_map);
        }) {}

  ~Impl() {
    for (const auto& p : pools.unlocked_pools())
      p->live.for_each([&](CachingBlock* b) { p->uses.forget(*b); });
  }

  // The pool whose segments hold `ptr`; null when none does. Takes no lock.
  StreamPool* pool_at(const void* ptr) const noexcept { return pools.by_id(segment_map.find(ptr)); }

  // Hands out `b` for a request of `bytes`, rounded to `size`, and counts it: `b` is a cached
  // block of `pool` (a best fit), whose front is handed out, or new memory out of the pools, split
  // when too large. The pool's lock is held. When the allocation would pass the pool's statistics
  // budget and `all` is null, returns null instead, with `b` cached: nothing has changed, and the
  // caller tries again with every pool locked (`all`), which counts beyond the budget.
  CachingBlock* hand_out(StreamPool& pool, CachingBlock* b, std::size_t size, std::size_t bytes,
                         const StreamPools::LockAll* all) {
    const bool fits = pool.shard.fits_allocation(BlockPool::size_after_split(*b, size), bytes);
    if (!fits && all == nullptr) {
      if (!b->cached) pool.blocks.merge_and_cache(b);
      return nullptr;
    }
    try {
      pool.live.reserve_one();
      if (b->cached) {
        b = pool.blocks.carve(b, size);
      } else {
        pool.blocks.maybe_split(b, size);
      }
    } catch (...) {
      // Only host memory for bookkeeping can fail here: new memory goes back to its pool.
      if (!b->cached) pool.blocks.merge_and_cache(b);
      throw;
    }
    pool.live.insert(b);
    b->allocated = true;
    b->requested = bytes;
    ++pool.allocs;
    if (fits) {
      pool.shard.allocated(b->size, bytes);
    } else {
      counters.allocated_beyond_budget(pool.shard, b->size, bytes);
    }
    return b;
  }

  // Frees what every pool caches (under LockAll): ordinary segments that are entirely free, and
  // the free ends of growing segments after one wait for the device.
  void release_cached(const StreamPools::LockAll& all) {
    bool trim = false;
    for (const auto& p : all.pools())
      trim = trim || p->has_free_growing_end();
    if (trim) backend->synchronize_device();
    for (const auto& p : all.pools())
      p->release_cached(trim);
  }

  // allocate() with every pool locked: after the device ran out of memory (`out_of_memory`), or
  // when the allocation passed its pool's statistics budget (then the block allocate() found
  // is back in the pool, and is found again here unless another thread took it meanwhile).
  void* allocate_with_every_pool_locked(StreamPool& pool, bool small, std::size_t size,
                                        std::size_t bytes, bool out_of_memory) {
    StreamPools::LockAll all(pools);
    CachingBlock* b = nullptr;
    if (!out_of_memory) {
      if (pool.uses.has_pending_events()) pool.poll();
      b = pool.blocks.best_fit(small, size);
      if (b == nullptr) b = pool.obtain(small, size, segment_size(size));
    }
    if (b == nullptr) b = obtain_after_flush(all, pool, small, size, bytes);
    return hand_out(pool, b, size, bytes, &all)->ptr;
  }

  // The out-of-memory path: wait for the other streams, try the cache again, free every cached
  // segment, retry, and only then throw. Returns a cached block or new memory, as hand_out()
  // takes them.
  CachingBlock* obtain_after_flush(const StreamPools::LockAll& all, StreamPool& pool, bool small,
                                   std::size_t size, std::size_t bytes) {
    counters.retried();
    for (const auto& p : all.pools())
      p->wait_for_events();
    // Blocks that came back from other streams may fit now.
    CachingBlock* b = pool.blocks.best_fit(small, size);
    if (b != nullptr) return b;
    release_cached(all);
    std::size_t segment = segment_size(size);
    b = pool.obtain(small, size, segment);
    const bool grows = pool.grows(small);
    if (grows) segment = round_up(size, granularity);
    // A large request padded to a 20 MiB segment may still fit on its own.
    const std::size_t tight = round_up(size, kLargeRounding);
    if (b == nullptr && !grows && !small && tight < segment) {
      segment = tight;
      b = pool.obtain(small, size, segment);
    }
    if (b == nullptr) throw_oom(all, bytes, segment);
    return b;
  }

  // Calls `f(pool, block)` with the live block at `ptr` and its pool (both null when no block is
  // live there), under the pool's lock: the block stays live meanwhile, unless `f` frees it.
  template <typename F>
  decltype(auto) with_live(const void* ptr, F&& f) const {
    StreamPool* pool = pool_at(ptr);
    if (pool == nullptr) return f(static_cast<StreamPool*>(nullptr), nullptr);
    std::lock_guard<SpinMutex> lock(pool->mutex);
    CachingBlock* b = pool->live.find(ptr);
    return f(b == nullptr ? nullptr : pool, b);
  }

  // Calls `record(pool, block)` for the live block at `ptr` when `stream` is not its own (stream
  // order already protects it there), under its pool's lock. `call` names the caller in the
  // error for a pointer this allocator did not hand out.
  template <typename Record>
  void use_elsewhere(void* ptr, StreamHandle stream, const char* call, Record&& record) {
    if (ptr == nullptr) return;
    with_live(ptr, [&](StreamPool* pool, CachingBlock* b) {
      EMBER_CHECK(b != nullptr, call, " on ", place,
                  ": the pointer was not allocated by this caching allocator (or was freed)");
      if (stream != b->stream) record(*pool, b);
    });
  }

  // Under LockAll.
  [[noreturn]] void throw_oom(const StreamPools::LockAll& all, std::size_t bytes,
                              std::size_t segment) {
    counters.out_of_memory();
    std::string device_line;
    try {
      const DeviceMemoryInfo info = backend->memory_info();
      device_line = cat(format_bytes(info.free_bytes), " free of ", format_bytes(info.total_bytes),
                        " on the device");
    } catch (const std::exception& e) {
      device_line = cat("free memory unknown (", e.what(), ")");
    }
    const CachingAllocatorStats s = counters.figures();
    const std::int64_t allocated = s.allocated_bytes.current;
    const std::int64_t reserved = s.reserved_bytes.current;
    std::size_t largest = 0;
    for (const auto& p : all.pools())
      largest = std::max(largest, p->blocks.largest_free());
    EMBER_THROW_AS(OutOfMemoryError, "out of memory on ", backend->describe(),
                   ": could not allocate ", format_bytes(bytes), " (a new segment of ",
                   format_bytes(segment), "), even after freeing the cached segments. ",
                   "Allocated: ", format_bytes(allocated), "; reserved: ", format_bytes(reserved),
                   "; ", device_line, ". Fragmentation: ", format_bytes(reserved - allocated),
                   " reserved but not allocated, largest free cached block ", format_bytes(largest),
                   ".");
  }

  std::unique_ptr<DeviceBackend> backend;
  Place place;
  std::string owner;        // for warnings
  std::size_t granularity;  // > 0: expandable segments, grown in these steps
  detail::CachingCounters counters;
  detail::SegmentMap segment_map;  // before the pools: they register their segments in it
  StreamPools pools;
};

// ---------------------------------------------------------------------------------------------

CachingDeviceAllocator::CachingDeviceAllocator(std::unique_ptr<DeviceBackend> backend, Place place)
    : CachingDeviceAllocator(std::move(backend), place, Options{}) {}

CachingDeviceAllocator::CachingDeviceAllocator(std::unique_ptr<DeviceBackend> backend, Place place,
                                               Options options)
    : place_(place) {
  EMBER_CHECK(backend != nullptr, "CachingDeviceAllocator for ", place, " needs a backend");
  impl_ = std::make_unique<Impl>(std::move(backend), place, options.expandable_segments);
}

bool CachingDeviceAllocator::expandable_segments() const {
  return impl_->granularity > 0;
}

CachingDeviceAllocator::~CachingDeviceAllocator() = default;

std::size_t CachingDeviceAllocator::segment_size(std::size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kLargeSegmentLimit) return kLargeSegment;
  return round_up(rounded, kLargeRounding);
}

DeviceBackend& CachingDeviceAllocator::backend() {
  return *impl_->backend;
}

void* CachingDeviceAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  return allocate(bytes, impl_->backend->current_stream());
}

void* CachingDeviceAllocator::allocate(std::size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  Impl& m = *impl_;
  if (bytes > kMaxRequest) {
    StreamPools::LockAll all(m.pools);
    m.throw_oom(all, bytes, bytes);
  }
  const std::size_t size = round_size(bytes);
  const bool small = size <= kSmallRequest;
  StreamPool& pool = m.pools.get(stream);
  bool out_of_memory;
  {
    std::lock_guard<SpinMutex> lock(pool.mutex);
    if (pool.uses.has_pending_events()) pool.poll();
    CachingBlock* b = pool.blocks.best_fit(small, size);
    if (b == nullptr) b = pool.obtain(small, size, segment_size(size));
    if (b == nullptr) {
      out_of_memory = true;
    } else if (CachingBlock* out = m.hand_out(pool, b, size, bytes, nullptr); out != nullptr) {
      return out->ptr;
    } else {
      out_of_memory = false;
    }
  }
  return m.allocate_with_every_pool_locked(pool, small, size, bytes, out_of_memory);
}

void CachingDeviceAllocator::deallocate(void* ptr, std::size_t) noexcept {
  if (ptr == nullptr) return;
  Impl& m = *impl_;
  if (StreamPool* pool = m.pool_at(ptr); pool != nullptr) {
    std::lock_guard<SpinMutex> lock(pool->mutex);
    if (CachingBlock* b = pool->live.extract(ptr); b != nullptr) {
      b->allocated = false;
      ++pool->frees;
      const bool waits = pool->uses.defer_free(*b, b->size);
      pool->shard.freed(b->size, b->requested, !waits);
      b->requested = 0;
      if (!waits) pool->release_block(b, /*counted=*/true);
      return;
    }
  }
  std::fprintf(stderr,
               "ember: fatal: the caching allocator of %s was asked to free %p, which it did "
               "not allocate (or which was freed already)\n",
               place_.to_string().c_str(), ptr);
  std::abort();
}

void CachingDeviceAllocator::record_stream(void* ptr, StreamHandle stream) {
  impl_->use_elsewhere(ptr, stream, "record_stream", [&](StreamPool&, CachingBlock* b) {
    detail::StreamUseTracker::record_stream(*b, stream);
  });
}

void CachingDeviceAllocator::record_use(void* ptr, StreamHandle stream) {
  impl_->use_elsewhere(ptr, stream, "record_use", [&](StreamPool& pool, CachingBlock* b) {
    pool.uses.record_use(*b, stream, b->size);
  });
}

std::size_t CachingDeviceAllocator::allocated_size(const void* ptr) const {
  return impl_->with_live(ptr, [](StreamPool*, const CachingBlock* b) -> std::size_t {
    return b == nullptr ? 0 : b->size;
  });
}

void CachingDeviceAllocator::empty_cache() {
  Impl& m = *impl_;
  StreamPools::LockAll all(m.pools);
  for (const auto& p : all.pools()) {
    if (p->uses.has_pending_events()) p->poll();
  }
  m.release_cached(all);
}

CachingAllocatorStats CachingDeviceAllocator::stats() const {
  Impl& m = *impl_;
  StreamPools::LockAll all(m.pools);
  std::int64_t cached = 0, largest = 0, waiting = 0, allocs = 0, frees = 0;
  for (const auto& p : all.pools()) {
    allocs += p->allocs;
    frees += p->frees;
    // Blocks whose streams are done count as returned, whichever stream allocates next.
    if (p->uses.has_pending_events()) p->poll();
    cached += static_cast<std::int64_t>(p->blocks.cached_total());
    largest = std::max(largest, static_cast<std::int64_t>(p->blocks.largest_free()));
    waiting += p->uses.waiting();
  }
  CachingAllocatorStats s = m.counters.figures();
  s.num_allocs = allocs;
  s.num_frees = frees;
  s.cached_bytes = cached;
  s.largest_free_block = largest;
  s.pending_blocks = waiting;
  return s;
}

void CachingDeviceAllocator::reset_peak_stats() {
  StreamPools::LockAll all(impl_->pools);
  impl_->counters.reset_peaks();
}

std::string to_string(const CachingAllocatorStats& s) {
  auto line = [](const char* name, const TrackedStat& t) {
    return cat("  ", name, ": ", format_bytes(static_cast<std::uint64_t>(t.current)), ", peak ",
               format_bytes(static_cast<std::uint64_t>(t.peak)), "\n");
  };
  return cat(line("allocated", s.allocated_bytes), line("requested", s.requested_bytes),
             line("active", s.active_bytes), line("reserved", s.reserved_bytes),
             "  segments: ", s.segments.current, ", peak ", s.segments.peak, "\n",
             "  live blocks: ", s.allocations.current, ", peak ", s.allocations.peak, "\n",
             "  cached free: ", format_bytes(static_cast<std::uint64_t>(s.cached_bytes)),
             ", largest free block ",
             format_bytes(static_cast<std::uint64_t>(s.largest_free_block)), "\n",
             "  blocks waiting for other streams: ", s.pending_blocks, "\n",
             "  allocations: ", s.num_allocs, ", frees: ", s.num_frees,
             ", device mallocs: ", s.device_mallocs, ", device frees: ", s.device_frees, "\n",
             "  retries after flushing the cache: ", s.alloc_retries, ", out of memory: ", s.ooms,
             ", blocking event waits: ", s.event_synchronizations, "\n");
}

}  // namespace ember
