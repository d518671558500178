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
// insert_or_find_async (what the training step uses) reports it at the next check() instead, so
// that the step need not wait for the device; until then the keys that did not fit read -1.
// Sizing: `slot_count` defaults to the power of two >= 2 x capacity (load factor <= 0.5 when
// full, where linear probing stays short).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ember/core/stream.hpp"
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

  // The slot count a table of `capacity` rows gets by default, and the bytes of its slots and
  // reverse map (what it holds at its place).
  static std::int64_t default_slot_count(std::int64_t capacity);
  static std::uint64_t bytes_for(DType key_dtype, std::int64_t capacity);

  DType key_dtype() const { return key_dtype_; }
  Place place() const { return place_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t slot_count() const { return slot_count_; }
  // Rows in use (after check(): it may raise the error of an earlier insert_or_find_async).
  std::int64_t size() const;
  double load_factor() const { return static_cast<double>(size()) / slot_count_; }

  // rows[i] = row of keys[i], or -1. keys: 1-D of key_dtype(); rows: i64 [n]; both at place().
  // Asynchronous on CUDA (queued on `stream`, default the device's current stream).
  void find(const Tensor& keys, const Tensor& rows, StreamHandle stream = nullptr) const;
  // Like find, but absent keys are inserted and get new rows. Synchronises with the device to
  // learn the new row count (and to report a full table).
  InsertResult insert_or_find(const Tensor& keys, const Tensor& rows,
                              StreamHandle stream = nullptr);
  // insert_or_find without waiting for the device (on the host it is insert_or_find). The rows
  // it creates are new_rows()[0] .. new_rows()[1], read by kernels queued after it. A full table
  // or a reserved key is raised by the next check() (which this call, size(), dump() and load()
  // make first), with the same message; meanwhile the keys concerned read -1, never another
  // key's row. First raises the error of an earlier call, if any.
  void insert_or_find_async(const Tensor& keys, const Tensor& rows, StreamHandle stream = nullptr);
  // Raises the error of the last insert_or_find_async, if it had one (waits for that insert only,
  // not for later work).
  void check() const;
  // Two i64 at place(): [first, end) of the rows the last insert created; end is the rows in use.
  const std::int64_t* new_rows() const;

  // The key of each row in use, in row order (a view of the table's reverse map).
  Tensor keys_by_row() const;
  // The whole reverse map, [capacity] (rows past size() unset), without check().
  const Tensor& reverse_map() const { return keys_by_row_; }
  // Every (key, row) pair, in row order: keys [size()] and rows (i64) [size()], at place().
  std::pair<Tensor, Tensor> dump() const;
  // Fills an empty table with pairs from dump(): `rows` must be a permutation of 0..n-1.
  void load(const Tensor& keys, const Tensor& rows);
  void clear();

  // The full-table message, for callers that detect fullness themselves.
  std::string full_message(std::int64_t not_fitting) const;

 private:
  void check_keys(const Tensor& keys, const Tensor& rows, const char* what) const;
  // Turns the words of an insert (row counter, index of a reserved key or ~0) into host state
  // and errors; `late`: the insert was asynchronous and is checked by a later call.
  void take_insert_state(std::uint64_t counter, std::uint64_t bad_index, bool late) const;

  DType key_dtype_;
  std::int64_t capacity_;
  Place place_;
  std::int64_t slot_count_;
  std::string owner_, capacity_hint_;
  Tensor slots_;         // slot_count_ HashSlot<Key> as bytes
  Tensor keys_by_row_;   // [capacity] key_dtype_
  Tensor device_state_;  // CUDA only: u64 [cuda::kHashStateWords] (hash_table_cuda.hpp)
  // host mirror of the row counter (CPU: the counter itself), as of the last check
  mutable std::int64_t rows_used_ = 0;
  std::unique_ptr<HostCounter> host_counter_;
  mutable bool full_ = false;
  // The last insert_or_find_async on CUDA: its device words copied to pinned memory, and the
  // event after that copy; pending_ until check() has read them.
  Tensor pending_state_;
  Event pending_ready_;
  mutable bool pending_ = false;
};

}  // namespace ember::embedding
