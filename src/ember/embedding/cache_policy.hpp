// Which cached rows of a host-backed table make room when a batch needs rows that are not in the
// device cache. The policy only orders the occupied cache slots; the directory
// (cache_directory.hpp) decides what is pinned and moves the rows. Every batch needs all of its
// rows resident, so there is no admission control: a miss always enters the cache.
//
//   lru          least recently used first.
//   lfu          least frequently used first, counting the batches that used the row since it
//                entered the cache; ties (rows within a power of two of each other) least
//                recently used first (log2 frequency queues, as in Zhou et al.'s MQ cache).
//   lfu_history  as lfu, but a row's count survives its eviction, so a row that was hot comes
//                back with its history instead of starting at one (4 bytes per row on the host).
//
// Every operation is O(1) except victims(), which walks from the least valuable end past pinned
// slots. docs/embedding.md has the hit rates that chose the default.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ember/embedding/storage_config.hpp"

namespace ember::embedding {

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  // `slot` now holds `row` (a row fetched from the host or made by the batch).
  virtual void admit(std::int32_t slot, std::int64_t row) = 0;
  // A batch uses the row already in `slot`.
  virtual void touch(std::int32_t slot, std::int64_t row) = 0;
  // The row leaves `slot`.
  virtual void remove(std::int32_t slot, std::int64_t row) = 0;
  // Appends up to n occupied slots for which pinned(slot) is false, least valuable first. They
  // stay in the policy until remove()d.
  virtual void victims(std::int64_t n, const std::function<bool(std::int32_t)>& pinned,
                       std::vector<std::int32_t>& out) const = 0;
};

// A policy over `slots` cache slots of a table of `rows` rows.
std::unique_ptr<CachePolicy> make_cache_policy(EvictionPolicy policy, std::int64_t slots,
                                               std::int64_t rows);

}  // namespace ember::embedding
