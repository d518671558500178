// The hash table's storage layout and hash, shared by the CPU and CUDA implementations (this
// header is fmt-free and host/device).
//
// Open addressing with linear probing over a power-of-two array of slots. A slot holds a key and
// its row in one aligned 8-byte (u32 keys) or 16-byte (i64 keys) unit, so a probe is one
// vector load and consecutive probes usually stay in the same 32-byte sector.
// All-ones bytes mark an empty slot (key) and a row not yet published (row), so clearing the
// table is a byte fill with 0xFF. The all-ones key (u32 4294967295, i64 -1) cannot be stored.
#pragma once

#include <cstdint>

#include "ember/core/half.hpp"

namespace ember::embedding {

template <class Key>
struct alignas(2 * sizeof(Key)) HashSlot {
  Key key;
  std::uint32_t row;
};
static_assert(sizeof(HashSlot<std::uint32_t>) == 8);
static_assert(sizeof(HashSlot<std::int64_t>) == 16);

template <class Key>
EMBER_HOST_DEVICE constexpr Key empty_key() {
  return static_cast<Key>(~static_cast<std::uint64_t>(0));
}

// Row values with a meaning: a claimed slot whose row is not yet written, and a key that got
// no row because the table was full.
constexpr std::uint32_t kPendingRow = 0xFFFFFFFFu;
constexpr std::uint32_t kOverflowRow = 0xFFFFFFFEu;
// Rows at or above this are markers, not rows.
constexpr std::uint32_t kFirstMarkerRow = 0xFFFFFFF0u;

// Murmur3's finalisers: cheap, and they spread sequential keys over the whole table.
EMBER_HOST_DEVICE inline std::uint64_t hash_key(std::uint32_t key) {
  std::uint32_t h = key;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
EMBER_HOST_DEVICE inline std::uint64_t hash_key(std::int64_t key) {
  std::uint64_t h = static_cast<std::uint64_t>(key);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace ember::embedding
