// Key -> row map of an embedding table, on the host or on a CUDA device.
//
// Keys (u32 or i64) get rows 0, 1, 2, ... in insertion order, up to `capacity` rows; the table
// also keeps the reverse map row -> key, which is what a dump, a save and row initialisation
// read. Batched calls take a 1-D key tensor and write an i64 row per key (-1: absent).
//
// Concurrency: find and insert_or_find may run from many threads (CPU) and many CUDA threads
// at once; a key inserted twice concurrently gets one row. Rows stay where they are for the
// table's life (no deletion), so a row found once stays valid.
//
// A full table is an error, never a silent drop or alias: the call that runs out of rows throws
// ember::Error naming the owner, the capacity, the rows in use and how many keys did not fit,
// and the table then refuses further inserts (the keys that did not fit have no row).
// Sizing: `slot_count` defaults to the power of two >= 2 x capacity (load factor <= 0.5 when
// full, where linear probing stays short).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ember/tensor/tensor.hpp"

namespace ember::embedding {

struct HostCounter;

// The new rows an insert created: [first, end). With one caller at a time they are contiguous.
struct InsertResult {
  std::int64_t first = 0;
  std::int64_t end = 0;
  std::int64_t count() const { return end - first; }
};

class HashTable {
 public:
  // `owner` names the table in error messages (e.g. "embedding layer 'sparse_embedding1'");
  // `capacity_hint` says which configuration key raises the capacity.
  HashTable(DType key_dtype, std::int64_t capacity, Place place, std::int64_t slot_count = 0,
            std::string owner = "hash table",
            std::string capacity_hint =
                "raise workspace_size_per_gpu_in_mb or "
                "max_vocabulary_size_per_gpu");
  ~HashTable();
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;

  DType key_dtype() const { return key_dtype_; }
  Place place() const { return place_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t slot_count() const { return slot_count_; }
  // Rows in use.
  std::int64_t size() const;
  double load_factor() const { return static_cast<double>(size()) / slot_count_; }

  // rows[i] = row of keys[i], or -1. keys: 1-D of key_dtype(); rows: i64 [n]; both at place().
  // Asynchronous on CUDA (queued on `stream`, default the device's current stream).
  void find(const Tensor& keys, const Tensor& rows, StreamHandle stream = nullptr) const;
  // Like find, but absent keys are inserted and get new rows. Synchronises with the device to
  // learn the new row count (and to report a full table).
  InsertResult insert_or_find(const Tensor& keys, const Tensor& rows,
                              StreamHandle stream = nullptr);

  // The key of each row in use, in row order (a view of the table's reverse map).
  Tensor keys_by_row() const;
  // Every (key, row) pair, in row order: keys [size()] and rows (i64) [size()], at place().
  std::pair<Tensor, Tensor> dump() const;
  // Fills an empty table with pairs from dump(): `rows` must be a permutation of 0..n-1.
  void load(const Tensor& keys, const Tensor& rows);
  void clear();

  // The full-table message, for callers that detect fullness themselves.
  std::string full_message(std::int64_t not_fitting) const;

 private:
  void check_keys(const Tensor& keys, const Tensor& rows, const char* what) const;

  DType key_dtype_;
  std::int64_t capacity_;
  Place place_;
  std::int64_t slot_count_;
  std::string owner_, capacity_hint_;
  Tensor slots_;                // slot_count_ HashSlot<Key> as bytes
  Tensor keys_by_row_;          // [capacity] key_dtype_
  Tensor device_state_;         // CUDA only: u64 [4] = row counter, first bad key index, ...
  std::int64_t rows_used_ = 0;  // host mirror of the row counter (CPU: the counter itself)
  std::unique_ptr<HostCounter> host_counter_;
  bool full_ = false;
};

}  // namespace ember::embedding
