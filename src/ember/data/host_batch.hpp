// A batch being assembled on the host: what the readers parse straight into. One allocation
// (pageable, or pinned when the batch is bound for a GPU) holds label rows, dense rows and, per
// sparse input, the CSR of the whole batch (row = sample x slot_num + slot).
//
// Readers write sample `size()` in place and then commit it with set_size(size() + 1); a sample
// that fails half way is simply not committed (its partial rows are overwritten by the next).
#pragma once

#include <cstdint>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/allocator.hpp"
#include "ember/core/place.hpp"
#include "ember/data/batch_layout.hpp"

namespace ember::data {

class HostBatch {
 public:
  HostBatch(const BatchLayout& layout, std::int64_t capacity, Place place = Place::host());
  // Memory from `allocator` (host-accessible; it must outlive the batch), e.g. a pipeline's pinned
  // allocator.
  HostBatch(const BatchLayout& layout, std::int64_t capacity, Allocator& allocator);

  const BatchLayout& layout() const { return layout_; }
  const BatchBufferPlan& plan() const { return plan_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t size() const { return size_; }
  bool full() const { return size_ == capacity_; }
  bool empty() const { return size_ == 0; }
  Place place() const { return allocation_->place(); }
  const AllocationPtr& allocation() const { return allocation_; }

  void clear() {
    size_ = 0;
    forget_row_keys();
  }
  void set_size(std::int64_t n);

  float* label() const { return label_; }  // [capacity, label_dim]
  float* dense() const { return dense_; }  // [capacity, dense_dim]
  int num_inputs() const { return static_cast<int>(offsets_.size()); }
  // [capacity * slot_num + 1], entry 0 always 0.
  std::int64_t* row_offsets(int input) const { return offsets_[static_cast<std::size_t>(input)]; }
  void* values(int input) const { return values_[static_cast<std::size_t>(input)]; }
  template <class Key>
  Key* values_as(int input) const {
    return static_cast<Key*>(values(input));
  }
  std::int64_t value_capacity(int input) const {
    return plan_.value_capacity[static_cast<std::size_t>(input)];
  }
  // Keys of the committed samples of `input`.
  std::int64_t nnz(int input) const;

  // Commits `n` samples that another process parses (shared reading, key_exchange.hpp): each
  // of their rows gets room for keys_reserved_per_row() keys, which the key exchange fills (or,
  // where the other processes' counts differ, rewrites), and their label and dense values are
  // left as they are.
  void add_rows_parsed_elsewhere(std::int64_t n);

  // Appends samples [begin, end) of `src` (same layout), rebasing its row offsets.
  void append(const HostBatch& src, std::int64_t begin, std::int64_t end);

  // Per sparse input, the key count every row of samples [first, first + samples) holds, or -1
  // where the rows differ (one-hot data: 1). Found by one pass over their offsets, kept until
  // the batch changes (set_size, append, clear, add_rows_parsed_elsewhere, or
  // forget_row_keys), so the reader that filled the batch can pay for the pass and the
  // collector and the device copies read the answer.
  const std::vector<std::int64_t>& uniform_row_keys(std::int64_t first, std::int64_t samples);
  // The same if already found or noted; null otherwise (no pass).
  const std::vector<std::int64_t>* known_uniform_row_keys(std::int64_t first,
                                                          std::int64_t samples) const {
    return row_keys_samples_ == samples && row_keys_first_ == first ? &row_keys_ : nullptr;
  }
  // Says it without the pass: the caller knows (the key exchange, having checked every
  // process's rows).
  void note_uniform_row_keys(std::int64_t first, std::int64_t samples,
                             std::vector<std::int64_t> per_input);
  // Someone rewrote row offsets in place (the key exchange).
  void forget_row_keys() { row_keys_samples_ = -1; }

 private:
  HostBatch(const BatchLayout& layout, std::int64_t capacity, AllocationPtr allocation);

  BatchLayout layout_;
  std::int64_t capacity_;
  BatchBufferPlan plan_;
  AllocationPtr allocation_;
  std::int64_t size_ = 0;
  float* label_ = nullptr;
  float* dense_ = nullptr;
  std::vector<std::int64_t*> offsets_;
  std::vector<void*> values_;
  // uniform_row_keys()'s answer and the samples it is for (-1: none).
  std::int64_t row_keys_first_ = 0, row_keys_samples_ = -1;
  std::vector<std::int64_t> row_keys_;
};

}  // namespace ember::data
