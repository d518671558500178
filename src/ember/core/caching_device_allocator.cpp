#include "ember/core/caching_device_allocator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ember/core/error.hpp"

namespace ember {

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Requests beyond this cannot be rounded without overflow; no device has that much anyway.
constexpr std::size_t kMaxRequest = (std::size_t{1} << 62);

void add(TrackedStat& s, std::int64_t delta) {
  s.current += delta;
  s.peak = std::max(s.peak, s.current);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Blocks and pools

struct CachingDeviceAllocator::Impl {
  struct Block;

  // Free blocks in (stream, size, address) order: lower_bound on (stream, size, 0) is the best
  // fit on that stream in O(log n).
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const {
      if (a->stream != b->stream) return std::less<StreamHandle>()(a->stream, b->stream);
      if (a->size != b->size) return a->size < b->size;
      return std::less<char*>()(a->ptr, b->ptr);
    }
  };
  using FreeSet = std::set<Block*, BlockLess>;
  using LiveMap = std::unordered_map<void*, Block*>;

  struct Block {
    char* ptr = nullptr;
    std::size_t size = 0;
    std::size_t requested = 0;
    StreamHandle stream = nullptr;
    // Neighbours within the same segment (address order); both null: the block is a segment.
    Block* prev = nullptr;
    Block* next = nullptr;
    bool small = false;
    bool allocated = false;
    bool cached = false;  // in its pool's free set
    int pending_events = 0;
    FreeSet::iterator position;
    // Other streams that used the block (record_stream); cleared, not shrunk, on reuse.
    std::vector<StreamHandle> streams;
    // The tree and hash nodes a block moves in and out of the containers with, kept with the
    // block so that a cached allocate/free pair allocates no heap memory.
    FreeSet::node_type set_node;
    LiveMap::node_type map_node;
    Block* next_spare = nullptr;
  };

  struct Pending {
    EventHandle event;
    StreamHandle stream;
    Block* block;
  };

  Impl(std::unique_ptr<DeviceBackend> b, Place p) : backend(std::move(b)), place(p) {
    live.reserve(1024);
  }

  ~Impl() {
    for (const Pending& p : pending) backend->release_event(p.event);
    for (void* s : segments) backend->free(s);
  }

  // --- block structs -------------------------------------------------------------------------

  Block* new_block() {
    if (spare_blocks == nullptr) {
      constexpr std::size_t kChunk = 64;
      chunks.push_back(std::make_unique<Block[]>(kChunk));
      Block* chunk = chunks.back().get();
      for (std::size_t i = 0; i < kChunk; ++i) {
        chunk[i].next_spare = spare_blocks;
        spare_blocks = &chunk[i];
      }
    }
    Block* b = spare_blocks;
    spare_blocks = b->next_spare;
    b->next_spare = nullptr;
    return b;
  }

  void recycle(Block* b) {
    b->ptr = nullptr;
    b->size = b->requested = 0;
    b->stream = nullptr;
    b->prev = b->next = nullptr;
    b->allocated = b->cached = false;
    b->pending_events = 0;
    b->streams.clear();
    b->next_spare = spare_blocks;
    spare_blocks = b;
  }

  // --- pools ---------------------------------------------------------------------------------

  FreeSet& pool_of(const Block* b) { return b->small ? small_pool : large_pool; }

  void cache(Block* b) {
    FreeSet& pool = pool_of(b);
    if (b->set_node.empty()) {
      b->position = pool.insert(b).first;
    } else {
      b->set_node.value() = b;
      b->position = pool.insert(std::move(b->set_node)).position;
    }
    b->cached = true;
  }

  void uncache(Block* b) {
    b->set_node = pool_of(b).extract(b->position);
    b->cached = false;
  }

  void track_live(Block* b) {
    if (b->map_node.empty()) {
      live.emplace(b->ptr, b);
    } else {
      b->map_node.key() = b->ptr;
      b->map_node.mapped() = b;
      live.insert(std::move(b->map_node));
    }
  }

  Block* find_free(bool small, StreamHandle stream, std::size_t size) {
    FreeSet& pool = small ? small_pool : large_pool;
    key.stream = stream;
    key.size = size;
    key.ptr = nullptr;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    return *it;
  }

  // Gives the tail of `b` beyond `size` back to the pool when it is worth keeping. Throws
  // (host memory for bookkeeping only) before changing anything.
  void maybe_split(Block* b, std::size_t size) {
    const std::size_t remainder = b->size - size;
    const bool worth = b->small ? remainder >= kRoundBytes : remainder > kLargeSplitRemainder;
    if (!worth) return;
    Block* rest = new_block();
    rest->ptr = b->ptr + size;
    rest->size = remainder;
    rest->stream = b->stream;
    rest->small = b->small;
    try {
      cache(rest);
    } catch (...) {
      recycle(rest);
      throw;
    }
    rest->prev = b;
    rest->next = b->next;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = size;
  }

  // Returns a block no one uses any more to its pool, merged with free neighbours.
  void release_block(Block* b) {
    add(stats.active_bytes, -static_cast<std::int64_t>(b->size));
    merge_and_cache(b);
  }

  void merge_and_cache(Block* b) {
    if (Block* p = b->prev; p != nullptr && p->cached) {
      uncache(p);
      b->ptr = p->ptr;
      b->size += p->size;
      b->prev = p->prev;
      if (b->prev != nullptr) b->prev->next = b;
      recycle(p);
    }
    if (Block* n = b->next; n != nullptr && n->cached) {
      uncache(n);
      b->size += n->size;
      b->next = n->next;
      if (b->next != nullptr) b->next->prev = b;
      recycle(n);
    }
    cache(b);
  }

  // Returns blocks whose other-stream events have all completed. Events on one stream complete
  // in order, so the first incomplete one stops the scan for its stream.
  void process_events() {
    StreamHandle blocked[8];
    int n_blocked = 0;
    bool overflow = false;
    std::size_t kept = 0;
    std::size_t i = 0;
    try {
      for (; i < pending.size(); ++i) {
        Pending p = pending[i];
        const bool skip =
            overflow || std::find(blocked, blocked + n_blocked, p.stream) != blocked + n_blocked;
        if (!skip && backend->query_event(p.event)) {
          backend->release_event(p.event);
          if (--p.block->pending_events == 0) finish_waiting(p.block);
          continue;
        }
        if (!skip) {
          if (n_blocked < 8) {
            blocked[n_blocked++] = p.stream;
          } else {
            overflow = true;
          }
        }
        pending[kept++] = p;
      }
    } catch (...) {
      for (; i < pending.size(); ++i) pending[kept++] = pending[i];
      pending.resize(kept);
      throw;
    }
    pending.resize(kept);
  }

  void finish_waiting(Block* b) {
    --waiting;
    release_block(b);
  }

  // Waits for every pending event and returns the blocks to their pools (out-of-memory path
  // only: this blocks the host until other streams catch up).
  void wait_for_events() {
    for (const Pending& p : pending) {
      backend->synchronize_event(p.event);
      ++stats.event_synchronizations;
    }
    std::vector<Pending> done;
    done.swap(pending);
    for (const Pending& p : done) {
      backend->release_event(p.event);
      if (--p.block->pending_events == 0) finish_waiting(p.block);
    }
  }

  // Frees every segment that is entirely cached.
  void release_cached() {
    for (FreeSet* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev != nullptr || b->next != nullptr) {
          ++it;
          continue;
        }
        b->set_node = pool->extract(it++);
        b->cached = false;
        segments.erase(b->ptr);
        backend->free(b->ptr);
        add(stats.reserved_bytes, -static_cast<std::int64_t>(b->size));
        add(stats.segments, -1);
        ++stats.device_frees;
        recycle(b);
      }
    }
  }

  std::size_t largest_free() const {
    std::size_t largest = 0;
    for (const FreeSet* pool : {&small_pool, &large_pool}) {
      for (const Block* b : *pool) largest = std::max(largest, b->size);
    }
    return largest;
  }

  std::size_t cached_total() const {
    std::size_t total = 0;
    for (const FreeSet* pool : {&small_pool, &large_pool}) {
      for (const Block* b : *pool) total += b->size;
    }
    return total;
  }

  [[noreturn]] void throw_oom(std::size_t bytes, std::size_t segment) {
    ++stats.ooms;
    std::string device_line;
    try {
      const DeviceMemoryInfo info = backend->memory_info();
      device_line = cat(format_bytes(info.free_bytes), " free of ",
                        format_bytes(info.total_bytes), " on the device");
    } catch (const std::exception& e) {
      device_line = cat("free memory unknown (", e.what(), ")");
    }
    const std::int64_t allocated = stats.allocated_bytes.current;
    const std::int64_t reserved = stats.reserved_bytes.current;
    EMBER_THROW_AS(OutOfMemoryError, "out of memory on ", backend->describe(),
                   ": could not allocate ", format_bytes(bytes), " (a new segment of ",
                   format_bytes(segment), "), even after freeing the cached segments. ",
                   "Allocated: ", format_bytes(allocated), "; reserved: ", format_bytes(reserved),
                   "; ", device_line, ". Fragmentation: ", format_bytes(reserved - allocated),
                   " reserved but not allocated, largest free cached block ",
                   format_bytes(largest_free()), ".");
  }

  // A block for a request of `size` (rounded) bytes that no cached block fits: a new segment,
  // with the out-of-memory handling. The block returned is out of the pools.
  Block* obtain(bool small, StreamHandle stream, std::size_t size, std::size_t bytes) {
    std::size_t segment = segment_size(size);
    void* p = backend->malloc(segment);
    if (p == nullptr) {
      ++stats.alloc_retries;
      wait_for_events();
      // Blocks that came back from other streams may fit now.
      if (Block* b = find_free(small, stream, size); b != nullptr) {
        uncache(b);
        return b;
      }
      release_cached();
      p = backend->malloc(segment);
      // A large request padded to a 20 MiB segment may still fit on its own.
      const std::size_t tight = round_up(size, kLargeRounding);
      if (p == nullptr && !small && tight < segment) {
        segment = tight;
        p = backend->malloc(segment);
      }
      if (p == nullptr) throw_oom(bytes, segment);
    }
    ++stats.device_mallocs;
    add(stats.reserved_bytes, static_cast<std::int64_t>(segment));
    add(stats.segments, 1);
    Block* b;
    try {
      segments.insert(p);
      b = new_block();
    } catch (...) {
      segments.erase(p);
      backend->free(p);
      add(stats.reserved_bytes, -static_cast<std::int64_t>(segment));
      add(stats.segments, -1);
      ++stats.device_frees;
      throw;
    }
    b->ptr = static_cast<char*>(p);
    b->size = segment;
    b->stream = stream;
    b->small = small;
    return b;
  }

  std::unique_ptr<DeviceBackend> backend;
  Place place;
  mutable std::mutex mutex;
  FreeSet small_pool;
  FreeSet large_pool;
  LiveMap live;
  std::unordered_set<void*> segments;  // every segment's base, to free them all at the end
  std::vector<Pending> pending;
  std::int64_t waiting = 0;  // blocks freed but waiting for other streams
  Block key;                    // search key for find_free (used under the lock)
  std::vector<std::unique_ptr<Block[]>> chunks;
  Block* spare_blocks = nullptr;
  CachingAllocatorStats stats;
};

// ---------------------------------------------------------------------------------------------

CachingDeviceAllocator::CachingDeviceAllocator(std::unique_ptr<DeviceBackend> backend,
                                               Place place)
    : place_(place) {
  EMBER_CHECK(backend != nullptr, "CachingDeviceAllocator for ", place, " needs a backend");
  impl_ = std::make_unique<Impl>(std::move(backend), place);
}

CachingDeviceAllocator::~CachingDeviceAllocator() = default;

std::size_t CachingDeviceAllocator::round_size(std::size_t bytes) {
  return bytes < kRoundBytes ? kRoundBytes : round_up(bytes, kRoundBytes);
}

std::size_t CachingDeviceAllocator::segment_size(std::size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kLargeSegmentLimit) return kLargeSegment;
  return round_up(rounded, kLargeRounding);
}

DeviceBackend& CachingDeviceAllocator::backend() { return *impl_->backend; }

void* CachingDeviceAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  return allocate(bytes, impl_->backend->current_stream());
}

void* CachingDeviceAllocator::allocate(std::size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  if (bytes > kMaxRequest) m.throw_oom(bytes, bytes);
  if (!m.pending.empty()) m.process_events();
  const std::size_t size = round_size(bytes);
  const bool small = size <= kSmallRequest;
  Impl::Block* b = m.find_free(small, stream, size);
  if (b != nullptr) {
    m.uncache(b);
  } else {
    b = m.obtain(small, stream, size, bytes);
  }
  try {
    m.maybe_split(b, size);
    m.track_live(b);
  } catch (...) {
    // Only host memory for bookkeeping can fail here: give the block back to its pool.
    try {
      m.merge_and_cache(b);
    } catch (...) {
    }
    throw;
  }
  b->allocated = true;
  b->requested = bytes;
  add(m.stats.allocated_bytes, static_cast<std::int64_t>(b->size));
  add(m.stats.active_bytes, static_cast<std::int64_t>(b->size));
  add(m.stats.requested_bytes, static_cast<std::int64_t>(bytes));
  add(m.stats.allocations, 1);
  ++m.stats.num_allocs;
  return b->ptr;
}

void CachingDeviceAllocator::deallocate(void* ptr, std::size_t) noexcept {
  if (ptr == nullptr) return;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  auto node = m.live.extract(ptr);
  if (node.empty()) {
    std::fprintf(stderr,
                 "ember: fatal: the caching allocator of %s was asked to free %p, which it did "
                 "not allocate (or which was freed already)\n",
                 place_.to_string().c_str(), ptr);
    std::abort();
  }
  Impl::Block* b = node.mapped();
  b->map_node = std::move(node);
  b->allocated = false;
  add(m.stats.allocated_bytes, -static_cast<std::int64_t>(b->size));
  add(m.stats.requested_bytes, -static_cast<std::int64_t>(b->requested));
  add(m.stats.allocations, -1);
  ++m.stats.num_frees;
  b->requested = 0;
  if (!b->streams.empty()) {
    try {
      m.pending.reserve(m.pending.size() + b->streams.size());
      for (StreamHandle s : b->streams) {
        EventHandle e = m.backend->acquire_event(s);
        try {
          m.backend->record_event(e, s);
        } catch (...) {
          m.backend->release_event(e);
          throw;
        }
        m.pending.push_back({e, s, b});
        ++b->pending_events;
      }
    } catch (const std::exception& e) {
      // Without the event there is no telling when the other stream is done with the block:
      // keep it out of the pool for good rather than risk handing it out too early.
      std::fprintf(stderr,
                   "ember: warning: could not record an event for a block freed on %s (%s); "
                   "its %zu bytes stay reserved\n",
                   place_.to_string().c_str(), e.what(), b->size);
      ++b->pending_events;
    }
    b->streams.clear();
    if (b->pending_events > 0) {
      ++m.waiting;
      return;
    }
  }
  m.release_block(b);
}

void CachingDeviceAllocator::record_stream(void* ptr, StreamHandle stream) {
  if (ptr == nullptr) return;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.find(ptr);
  EMBER_CHECK(it != m.live.end(), "record_stream on ", place_,
              ": the pointer was not allocated by this caching allocator (or was freed)");
  Impl::Block* b = it->second;
  if (stream == b->stream) return;
  if (std::find(b->streams.begin(), b->streams.end(), stream) == b->streams.end()) {
    b->streams.push_back(stream);
  }
}

std::size_t CachingDeviceAllocator::allocated_size(const void* ptr) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.find(const_cast<void*>(ptr));
  return it == m.live.end() ? 0 : it->second->size;
}

void CachingDeviceAllocator::empty_cache() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  if (!m.pending.empty()) m.process_events();
  m.release_cached();
}

CachingAllocatorStats CachingDeviceAllocator::stats() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  CachingAllocatorStats s = m.stats;
  s.cached_bytes = static_cast<std::int64_t>(m.cached_total());
  s.largest_free_block = static_cast<std::int64_t>(m.largest_free());
  s.pending_blocks = m.waiting;
  return s;
}

void CachingDeviceAllocator::reset_peak_stats() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  for (TrackedStat* s : {&m.stats.allocated_bytes, &m.stats.requested_bytes,
                         &m.stats.active_bytes, &m.stats.reserved_bytes, &m.stats.segments,
                         &m.stats.allocations}) {
    s->peak = s->current;
  }
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
             "  allocations: ", s.num_allocs, ", frees: ", s.num_frees, ", device mallocs: ",
             s.device_mallocs, ", device frees: ", s.device_frees, "\n",
             "  retries after flushing the cache: ", s.alloc_retries, ", out of memory: ", s.ooms,
             ", blocking event waits: ", s.event_synchronizations, "\n");
}

}  // namespace ember
