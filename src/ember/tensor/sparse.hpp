// Compressed sparse rows in HugeCTR's layout: values plus row offsets, no column indices (the
// "column" of a value is its position in its row). Sparse inputs arrive this way: the row of
// sample b and slot s is b * slot_num + s, and holds that sample's keys in that slot.
#pragma once

#include <cstdint>

#include "ember/tensor/tensor.hpp"

namespace ember {

class CsrTensor {
 public:
  CsrTensor() = default;
  // row_offsets: i64 [rows + 1], starting at 0 and non-decreasing; values: [>= nnz], whose first
  // nnz entries are the values. The structure is validated on the host.
  CsrTensor(Tensor row_offsets, Tensor values, std::int64_t nnz);

  std::int64_t rows() const { return row_offsets_.defined() ? row_offsets_.numel() - 1 : 0; }
  std::int64_t nnz() const { return nnz_; }
  DType dtype() const { return values_.dtype(); }
  Place place() const { return values_.place(); }
  bool defined() const { return row_offsets_.defined(); }
  const Tensor& row_offsets() const { return row_offsets_; }
  // The nnz values (a view of the first nnz entries of the value buffer).
  Tensor values() const { return values_.slice(0, 0, nnz_); }
  // The whole value buffer, including capacity beyond nnz.
  const Tensor& value_buffer() const { return values_; }

  CsrTensor to(Place place, StreamHandle stream = nullptr) const;
  // [rows, width] with row r's values first and `pad` after them; an error if a row is longer
  // than width. For tests.
  Tensor to_dense(std::int64_t width, double pad = 0) const;

 private:
  Tensor row_offsets_;
  Tensor values_;
  std::int64_t nnz_ = 0;
};

// Builds a CSR on the host (or in pinned memory, for asynchronous upload) up to fixed capacities;
// reusable after reset(). Going past a capacity is an error naming the limit.
template <class T>
class CsrBuilder {
 public:
  CsrBuilder(std::int64_t max_rows, std::int64_t max_nnz, Place place = Place::host());

  // Starts the next row (rows start empty).
  void new_row();
  // Appends to the current row; new_row() must have been called at least once.
  void push_back(T value);
  std::int64_t rows() const { return rows_; }
  std::int64_t nnz() const { return nnz_; }
  // The CSR built so far (a view of the builder's buffers: valid until reset()).
  CsrTensor view() const;
  void reset();

 private:
  std::int64_t max_rows_, max_nnz_;
  Tensor offsets_, values_;
  std::int64_t* offsets_data_;
  T* values_data_;
  std::int64_t rows_ = 0, nnz_ = 0;
};

}  // namespace ember
