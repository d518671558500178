#include "ember/core/caching_stream_pools.hpp"

#include <algorithm>
#include <cstdint>

#include "ember/core/error.hpp"

namespace ember::detail {

StreamPool::StreamPool(StreamHandle s, std::uint32_t i, DeviceBackend& b, const std::string& owner,
                       std::size_t granularity, CachingCounters& c, SegmentMap& m)
    : stream(s),
      id(i),
      backend(b),
      counters(c),
      shard(c.add_shard()),
      segment_map(m),
      uses(b, owner) {
  if (granularity > 0) growing.emplace(backend, granularity, blocks, counters);
}

StreamPool::~StreamPool() {
  for (void* s : segments)
    backend.free(s);
}

void StreamPool::poll() {
  uses.poll([this](StreamUses& u) { release_block(static_cast<CachingBlock*>(&u), false); });
}

void StreamPool::wait_for_events() {
  counters.waited(uses.wait_all(
      [this](StreamUses& u) { release_block(static_cast<CachingBlock*>(&u), false); }));
}

bool StreamPool::grows(bool small) {
  return growing && growing->segment_for(stream, small) != nullptr;
}

CachingBlock* StreamPool::obtain(bool small, std::size_t size, std::size_t segment) {
  if (growing) {
    if (GrowingSegment* s = growing->segment_for(stream, small); s != nullptr) {
      // The addresses the growth will map are registered first (registering may fail; the
      // growth cannot be undone once mapped). They stay registered after a trim: the address
      // space is this pool's as long as the segment lives.
      const std::size_t end = std::min(s->reserved, s->mapped + growing->growth_for(*s, size));
      if (end > s->registered) {
        segment_map.add(s->base + s->registered, end - s->registered, id);
        s->registered = end;
      }
      return growing->grow(*s, size);
    }
  }
  void* p = backend.malloc(segment);
  if (p == nullptr) return nullptr;
  counters.device_malloc(segment, 1);
  CachingBlock* b;
  bool registered = false;
  try {
    segments.insert(p);
    segment_map.add(p, segment, id);
    registered = true;
    b = blocks.new_block();
  } catch (...) {
    if (registered) segment_map.remove(p);
    segments.erase(p);
    backend.free(p);
    counters.device_free(segment, 1);
    throw;
  }
  b->ptr = static_cast<char*>(p);
  b->size = segment;
  b->stream = stream;
  b->small = small;
  return b;
}

void StreamPool::release_cached(bool trim) {
  if (trim && growing) growing->trim();
  blocks.release_whole_segments([this](CachingBlock* b) {
    segment_map.remove(b->ptr);
    segments.erase(b->ptr);
    backend.free(b->ptr);
    counters.device_free(b->size, 1);
    blocks.recycle(b);
  });
}

// ---------------------------------------------------------------------------------------------

StreamPools::Table::Table(std::size_t capacity)
    : mask(capacity - 1), slots(std::make_unique<std::atomic<StreamPool*>[]>(capacity)) {
  for (std::size_t i = 0; i < capacity; ++i)
    slots[i].store(nullptr, std::memory_order_relaxed);
}

StreamPools::StreamPools(Factory make) : make_(std::move(make)) {
  tables_.push_back(std::make_unique<Table>(16));
  table_.store(tables_.back().get(), std::memory_order_release);
}

StreamPools::~StreamPools() = default;

StreamPool& StreamPools::create(StreamHandle stream) {
  std::lock_guard<std::mutex> lock(registry_);
  if (StreamPool* p = find(stream); p != nullptr) return *p;
  const auto id = static_cast<std::uint32_t>(pools_.size() + 1);
  EMBER_CHECK(id <= SegmentMap::kMaxPoolId, "the caching device allocator serves at most ",
              SegmentMap::kMaxPoolId, " streams");
  std::unique_ptr<StreamPool> pool = make_(stream, id);
  pools_.reserve(pools_.size() + 1);
  std::atomic<StreamPool*>* chunk = by_id_[id / kChunk].load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunks_.reserve(chunks_.size() + 1);
    chunks_.push_back(std::make_unique<std::atomic<StreamPool*>[]>(kChunk));
    chunk = chunks_.back().get();
    for (std::uint32_t i = 0; i < kChunk; ++i)
      chunk[i].store(nullptr, std::memory_order_relaxed);
    by_id_[id / kChunk].store(chunk, std::memory_order_release);
  }
  // Findable by id before it is findable by stream: a thread that finds the pool by its stream
  // may hand out a block at once, and whoever frees that block finds the pool by its id.
  chunk[id % kChunk].store(pool.get(), std::memory_order_release);
  try {
    index(pool.get());  // may throw, before publishing the pool
  } catch (...) {
    chunk[id % kChunk].store(nullptr, std::memory_order_relaxed);
    throw;
  }
  pools_.push_back(std::move(pool));
  return *pools_.back();
}

void StreamPools::index(StreamPool* pool) {
  auto place = [](Table& t, StreamPool* p) {
    std::size_t i = home_slot(p->stream, t.mask);
    while (t.slots[i].load(std::memory_order_relaxed) != nullptr)
      i = (i + 1) & t.mask;
    t.slots[i].store(p, std::memory_order_release);
  };
  Table& now = *tables_.back();
  // At most half full, so that a probe for a missing stream soon meets an empty slot.
  if (2 * (pools_.size() + 1) <= now.mask + 1) {
    place(now, pool);
    return;
  }
  auto bigger = std::make_unique<Table>(2 * (now.mask + 1));
  for (const auto& p : pools_)
    place(*bigger, p.get());
  place(*bigger, pool);
  tables_.reserve(tables_.size() + 1);
  table_.store(bigger.get(), std::memory_order_release);
  tables_.push_back(std::move(bigger));
}

StreamPools::LockAll::LockAll(StreamPools& pools) : pools_(pools), registry_(pools.registry_) {
  for (const auto& p : pools_.pools_)
    p->mutex.lock();
}

StreamPools::LockAll::~LockAll() {
  for (auto it = pools_.pools_.rbegin(); it != pools_.pools_.rend(); ++it)
    (*it)->mutex.unlock();
}

}  // namespace ember::detail
