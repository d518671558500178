// CUDA launchers of the hash table (hash_table_cuda.cu); fmt-free, no CUDA headers.
#pragma once

#include <cstdint>

#include "ember/core/device.hpp"
#include "ember/embedding/hash_table_slots.hpp"

namespace ember::embedding::cuda {

// state[0]: row counter; state[1]: smallest index of a reserved (all-ones) key, or ~0;
// state[2]: keys met twice by insert_with_rows.
constexpr int kHashStateWords = 4;

template <class Key>
void hash_find(const HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
               std::int64_t* rows, StreamHandle stream);

template <class Key>
void hash_insert_or_find(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
                         std::int64_t* rows, Key* keys_by_row, std::uint64_t capacity,
                         unsigned long long* state, StreamHandle stream);

template <class Key>
void hash_insert_with_rows(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys,
                           const std::int64_t* given_rows, std::int64_t n, Key* keys_by_row,
                           unsigned long long* state, StreamHandle stream);

}  // namespace ember::embedding::cuda
