// The blocks a caching device allocator has handed out, by address. Its streams allocate and
// free at the same time, so the map is cut into buckets by address, each with its own lock on a
// cache line of its own: threads meet only when two of their blocks fall into one bucket. With
// 1024 buckets, eight threads that each reuse one block (the alloc+free pairs of bench_memory)
// share a bucket with a chance of about 3 % (64 buckets: about 35 %, and then for the whole run).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

#include "ember/core/caching_blocks.hpp"
#include "ember/core/spin_mutex.hpp"

namespace ember::detail {

class LiveBlocks {
 public:
  LiveBlocks() {
    for (Bucket& b : buckets_)
      b.map.reserve(8);
  }
  LiveBlocks(const LiveBlocks&) = delete;
  LiveBlocks& operator=(const LiveBlocks&) = delete;

  // Adds `b` under b->ptr, reusing the node it carries (no heap memory after its first time).
  void insert(CachingBlock* b) {
    Bucket& k = bucket(b->ptr);
    std::lock_guard<SpinMutex> lock(k.mutex);
    if (b->map_node.empty()) {
      k.map.emplace(b->ptr, b);
    } else {
      b->map_node.key() = b->ptr;
      b->map_node.mapped() = b;
      k.map.insert(std::move(b->map_node));
    }
  }

  // Takes the block at `ptr` out (keeping its node with it); null when none is live there.
  CachingBlock* extract(void* ptr) noexcept {
    Bucket& k = bucket(ptr);
    std::lock_guard<SpinMutex> lock(k.mutex);
    auto node = k.map.extract(ptr);
    if (node.empty()) return nullptr;
    CachingBlock* b = node.mapped();
    b->map_node = std::move(node);
    return b;
  }

  // Calls `f(CachingBlock*)` with the live block at `ptr` (null when none), under its bucket's
  // lock: the block stays live meanwhile, unless `f` frees it.
  template <typename F>
  decltype(auto) with(const void* ptr, F&& f) {
    Bucket& k = bucket(ptr);
    std::lock_guard<SpinMutex> lock(k.mutex);
    auto it = k.map.find(const_cast<void*>(ptr));
    return f(it == k.map.end() ? nullptr : it->second);
  }

  // Every live block; only while no other thread uses the allocator.
  template <typename F>
  void for_each(F&& f) {
    for (Bucket& k : buckets_) {
      for (auto& [ptr, b] : k.map)
        f(b);
    }
  }

 private:
  static constexpr int kBucketBits = 10;
  struct alignas(64) Bucket {
    SpinMutex mutex;
    LiveMap map;
  };
  static_assert(sizeof(Bucket) == 64, "a bucket's lock and map head fill one cache line");
  Bucket& bucket(const void* ptr) {
    // Blocks start on 512-byte boundaries; Fibonacci hashing spreads the rest.
    const auto a = reinterpret_cast<std::uintptr_t>(ptr) >> 9;
    return buckets_[(a * 0x9E3779B97F4A7C15ull) >> (64 - kBucketBits)];
  }

  std::array<Bucket, std::size_t{1} << kBucketBits> buckets_;
};

}  // namespace ember::detail
