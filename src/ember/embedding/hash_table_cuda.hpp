// CUDA launchers of the hash table (hash_table_cuda.cu); fmt-free, no CUDA headers.
#pragma once

#include <cstdint>

#include "ember/core/device.hpp"
#include "ember/embedding/hash_table_slots.hpp"

namespace ember::embedding::cuda {

// The table's device words (u64):
//   [0] row counter: keys that claimed a slot and so a row; may exceed the capacity
//   [1] smallest batch index of a reserved (all-ones) key in the last insert, or ~0
//   [2] keys met twice by insert_with_rows
//   [3] keys that found every slot taken (a full table: they count as keys that did not fit)
//   [4], [5] (as i64): the rows the last insert created, [first, end); [5] is also the rows in
//       use, min(counter, capacity), for kernels that must not wait to learn it
constexpr int kHashStateWords = 8;
constexpr int kHashLostKeysWord = 3;
constexpr int kHashNewRowsWord = 4;

template <class Key>
void hash_find(const HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
               std::int64_t* rows, StreamHandle stream);

// Queues the insert (and the update of words [1], [4], [5]); waits for nothing.
template <class Key>
void hash_insert_or_find(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
                         std::int64_t* rows, Key* keys_by_row, std::uint64_t capacity,
                         unsigned long long* state, StreamHandle stream);

template <class Key>
void hash_insert_with_rows(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys,
                           const std::int64_t* given_rows, std::int64_t n, Key* keys_by_row,
                           unsigned long long* state, StreamHandle stream);

}  // namespace ember::embedding::cuda
