// CUDA kernels of the hash table: one thread per key, linear probing over 8/16-byte slots (one
// vector load per probe; neighbouring probes share a sector).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "ember/core/error.hpp"
#include "ember/embedding/hash_table_cuda.hpp"

namespace ember::embedding::cuda {

namespace {

constexpr int kThreads = 256;

int grid_for(std::int64_t n) {
  // Enough blocks to fill an H100 several times over; the kernels loop past that.
  return static_cast<int>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 132 * 64));
}

__device__ inline std::uint32_t cas_key(std::uint32_t* address, std::uint32_t expected,
                                        std::uint32_t desired) {
  return atomicCAS(reinterpret_cast<unsigned int*>(address), expected, desired);
}
__device__ inline std::int64_t cas_key(std::int64_t* address, std::int64_t expected,
                                       std::int64_t desired) {
  return static_cast<std::int64_t>(atomicCAS(reinterpret_cast<unsigned long long*>(address),
                                             static_cast<unsigned long long>(expected),
                                             static_cast<unsigned long long>(desired)));
}

__device__ inline std::uint32_t wait_row(const std::uint32_t* row_address) {
  const volatile std::uint32_t* row = row_address;
  std::uint32_t r = *row;
  while (r == kPendingRow)
    r = *row;
  return r;
}

__device__ inline std::int64_t as_row(std::uint32_t r) {
  return r >= kFirstMarkerRow ? -1 : static_cast<std::int64_t>(r);
}

// Hands out consecutive rows with one atomic per group of lanes that claim together: a single
// counter bumped once per new key would serialise the whole insert on one address.
__device__ inline unsigned long long next_row(unsigned long long* counter) {
  namespace cg = cooperative_groups;
  const cg::coalesced_group group = cg::coalesced_threads();
  unsigned long long base = 0;
  if (group.thread_rank() == 0) base = atomicAdd(counter, static_cast<unsigned long long>(group.size()));
  base = group.shfl(base, 0);
  return base + group.thread_rank();
}

template <class Key>
__global__ void find_kernel(const HashSlot<Key>* __restrict__ slots, std::uint64_t mask,
                            const Key* __restrict__ keys, std::int64_t n,
                            std::int64_t* __restrict__ rows) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const Key key = keys[i];
    std::int64_t row = -1;
    if (key != empty_key<Key>()) {
      std::uint64_t s = hash_key(key) & mask;
      for (std::uint64_t probe = 0; probe <= mask; ++probe, s = (s + 1) & mask) {
        const HashSlot<Key> slot = slots[s];
        if (slot.key == key) {
          row = as_row(slot.row);
          break;
        }
        if (slot.key == empty_key<Key>()) break;
      }
    }
    rows[i] = row;
  }
}

template <class Key>
__global__ void insert_kernel(HashSlot<Key>* __restrict__ slots, std::uint64_t mask,
                              const Key* __restrict__ keys, std::int64_t n,
                              std::int64_t* __restrict__ rows, Key* __restrict__ keys_by_row,
                              std::uint64_t capacity, unsigned long long* state) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const Key key = keys[i];
    std::int64_t row = -1;
    if (key == empty_key<Key>()) {
      atomicMin(&state[1], static_cast<unsigned long long>(i));
      rows[i] = -1;
      continue;
    }
    std::uint64_t s = hash_key(key) & mask;
    bool placed = false;
    for (std::uint64_t probe = 0; probe <= mask; ++probe, s = (s + 1) & mask) {
      HashSlot<Key>* slot = &slots[s];
      Key k = *reinterpret_cast<volatile Key*>(&slot->key);
      if (k == empty_key<Key>()) {
        k = cas_key(&slot->key, empty_key<Key>(), key);
        if (k == empty_key<Key>()) {  // claimed: take the next row and publish it
          const unsigned long long r = next_row(&state[0]);
          std::uint32_t published = kOverflowRow;
          if (r < capacity) {
            keys_by_row[r] = key;
            published = static_cast<std::uint32_t>(r);
          }
          atomicExch(reinterpret_cast<unsigned int*>(&slot->row), published);
          row = as_row(published);
          placed = true;
          break;
        }
      }
      if (k == key) {
        row = as_row(wait_row(&slot->row));
        placed = true;
        break;
      }
    }
    if (!placed) atomicAdd(&state[0], 1ull);  // no slot left: a key that did not fit
    rows[i] = row;
  }
}

template <class Key>
__global__ void insert_with_rows_kernel(HashSlot<Key>* __restrict__ slots, std::uint64_t mask,
                                        const Key* __restrict__ keys,
                                        const std::int64_t* __restrict__ given, std::int64_t n,
                                        Key* __restrict__ keys_by_row, unsigned long long* state) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const Key key = keys[i];
    std::uint64_t s = hash_key(key) & mask;
    for (std::uint64_t probe = 0; probe <= mask; ++probe, s = (s + 1) & mask) {
      HashSlot<Key>* slot = &slots[s];
      const Key k = cas_key(&slot->key, empty_key<Key>(), key);
      if (k == empty_key<Key>()) {
        slot->row = static_cast<std::uint32_t>(given[i]);
        keys_by_row[given[i]] = key;
        break;
      }
      if (k == key) {
        atomicAdd(&state[2], 1ull);
        break;
      }
    }
  }
}

}  // namespace

template <class Key>
void hash_find(const HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
               std::int64_t* rows, StreamHandle stream) {
  if (n == 0) return;
  find_kernel<Key><<<grid_for(n), kThreads, 0, stream>>>(slots, mask, keys, n, rows);
  EMBER_CUDA_CHECK_LAUNCH();
}

template <class Key>
void hash_insert_or_find(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
                         std::int64_t* rows, Key* keys_by_row, std::uint64_t capacity,
                         unsigned long long* state, StreamHandle stream) {
  if (n == 0) return;
  insert_kernel<Key><<<grid_for(n), kThreads, 0, stream>>>(slots, mask, keys, n, rows, keys_by_row,
                                                           capacity, state);
  EMBER_CUDA_CHECK_LAUNCH();
}

template <class Key>
void hash_insert_with_rows(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys,
                           const std::int64_t* given_rows, std::int64_t n, Key* keys_by_row,
                           unsigned long long* state, StreamHandle stream) {
  if (n == 0) return;
  insert_with_rows_kernel<Key>
      <<<grid_for(n), kThreads, 0, stream>>>(slots, mask, keys, given_rows, n, keys_by_row, state);
  EMBER_CUDA_CHECK_LAUNCH();
}

#define EMBER_INSTANTIATE(Key)                                                                    \
  template void hash_find<Key>(const HashSlot<Key>*, std::uint64_t, const Key*, std::int64_t,     \
                               std::int64_t*, StreamHandle);                                      \
  template void hash_insert_or_find<Key>(HashSlot<Key>*, std::uint64_t, const Key*, std::int64_t, \
                                         std::int64_t*, Key*, std::uint64_t, unsigned long long*, \
                                         StreamHandle);                                           \
  template void hash_insert_with_rows<Key>(HashSlot<Key>*, std::uint64_t, const Key*,             \
                                           const std::int64_t*, std::int64_t, Key*,               \
                                           unsigned long long*, StreamHandle);
EMBER_INSTANTIATE(std::uint32_t)
EMBER_INSTANTIATE(std::int64_t)
#undef EMBER_INSTANTIATE

}  // namespace ember::embedding::cuda
