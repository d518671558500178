#include "ember/tensor/sparse.hpp"

#include <vector>

namespace ember {

CsrTensor::CsrTensor(Tensor row_offsets, Tensor values, std::int64_t nnz)
    : row_offsets_(std::move(row_offsets)), values_(std::move(values)), nnz_(nnz) {
  row_offsets_.check_dtype(DType::I64, "CsrTensor row offsets");
  EMBER_CHECK(row_offsets_.rank() == 1 && row_offsets_.numel() >= 1,
              "CsrTensor: row offsets must be 1-D with rows + 1 entries, got shape ",
              row_offsets_.shape());
  EMBER_CHECK(values_.rank() == 1, "CsrTensor: values must be 1-D, got shape ", values_.shape());
  EMBER_CHECK(is_integral(values_.dtype()) || is_floating(values_.dtype()),
              "CsrTensor: unsupported value dtype ", dtype_name(values_.dtype()));
  EMBER_CHECK(nnz >= 0 && nnz <= values_.numel(), "CsrTensor: nnz ", nnz,
              " exceeds the value buffer of ", values_.numel());
  EMBER_CHECK(row_offsets_.place() == values_.place(), "CsrTensor: row offsets on ",
              row_offsets_.place(), " but values on ", values_.place());
  EMBER_CHECK(row_offsets_.is_contiguous() && values_.is_contiguous(),
              "CsrTensor: offsets and values must be contiguous");
  if (row_offsets_.place().host_accessible()) {
    // Every host batch of the input pipeline comes through here (1.7 M rows for 65536 samples of
    // 26 slots), so the scan is one tight pass: the row count read once, the first decrease
    // looked for without a branch that builds a message.
    const std::int64_t* off = row_offsets_.data<std::int64_t>();
    const std::int64_t n = rows();
    EMBER_CHECK(off[0] == 0, "CsrTensor: row offsets must start at 0, got ", off[0]);
    bool increasing = true;
    for (std::int64_t r = 0; r < n; ++r)
      increasing &= off[r + 1] >= off[r];
    if (!increasing) {
      std::int64_t r = 0;
      while (off[r + 1] >= off[r])
        ++r;
      EMBER_THROW("CsrTensor: row offsets decrease at row ", r, " (", off[r], " -> ", off[r + 1],
                  ")");
    }
    EMBER_CHECK(off[n] == nnz, "CsrTensor: last row offset ", off[n], " differs from nnz ", nnz);
  }
}

CsrTensor CsrTensor::to(Place place, StreamHandle stream) const {
  if (place == this->place()) return *this;
  return CsrTensor(row_offsets_.to(place, stream), values().to(place, stream), nnz_);
}

Tensor CsrTensor::to_dense(std::int64_t width, double pad) const {
  const CsrTensor host = to(Place::host());
  const std::vector<std::int64_t> off = host.row_offsets().to_vector<std::int64_t>();
  Tensor dense = Tensor::full({rows(), width}, pad, dtype(), Place::host());
  const Tensor vals = host.values();
  dispatch_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = vals.data<T>();
    T* out = dense.data<T>();
    for (std::int64_t r = 0; r < rows(); ++r) {
      const std::int64_t n = off[r + 1] - off[r];
      EMBER_CHECK(n <= width, "to_dense: row ", r, " has ", n, " values, more than width ", width);
      for (std::int64_t j = 0; j < n; ++j)
        out[r * width + j] = v[off[r] + j];
    }
  });
  return dense;
}

template <class T>
CsrBuilder<T>::CsrBuilder(std::int64_t max_rows, std::int64_t max_nnz, Place place)
    : max_rows_(max_rows), max_nnz_(max_nnz) {
  EMBER_CHECK(place.host_accessible(), "CsrBuilder builds on the host or in pinned memory, not ",
              place);
  EMBER_CHECK(max_rows >= 0 && max_nnz >= 0, "CsrBuilder: negative capacity");
  offsets_ = Tensor::empty({max_rows + 1}, DType::I64, place);
  values_ = Tensor::empty({max_nnz}, dtype_of<T>(), place);
  offsets_data_ = offsets_.data<std::int64_t>();
  values_data_ = values_.data<T>();
  offsets_data_[0] = 0;
}

template <class T>
void CsrBuilder<T>::new_row() {
  EMBER_CHECK(rows_ < max_rows_, "CsrBuilder: more than the capacity of ", max_rows_, " rows");
  ++rows_;
  offsets_data_[rows_] = nnz_;
}

template <class T>
void CsrBuilder<T>::push_back(T value) {
  EMBER_CHECK(rows_ > 0, "CsrBuilder: push_back before the first new_row()");
  EMBER_CHECK(nnz_ < max_nnz_, "CsrBuilder: more than the capacity of ", max_nnz_, " values (row ",
              rows_ - 1, ")");
  values_data_[nnz_++] = value;
  offsets_data_[rows_] = nnz_;
}

template <class T>
CsrTensor CsrBuilder<T>::view() const {
  return CsrTensor(offsets_.slice(0, 0, rows_ + 1), values_, nnz_);
}

template <class T>
void CsrBuilder<T>::reset() {
  rows_ = 0;
  nnz_ = 0;
}

template class CsrBuilder<std::uint32_t>;
template class CsrBuilder<std::int64_t>;
template class CsrBuilder<std::int32_t>;
template class CsrBuilder<float>;

}  // namespace ember
