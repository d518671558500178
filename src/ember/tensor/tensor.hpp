// The dynamically typed strided tensor: a view (dtype, shape, strides in elements, offset) into
// a shared Allocation at some Place. Views share memory; copies are explicit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/dtype.hpp"
#include "ember/core/place.hpp"
#include "ember/tensor/shape.hpp"

namespace ember {

class Tensor {
 public:
  // An undefined tensor (no allocation); defined() is false.
  Tensor() = default;

  // ---- creation -------------------------------------------------------------------------
  // Uninitialised memory.
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Place place = Place::host());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Place place = Place::host());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Place place = Place::host());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Place place = Place::host());
  // 0, 1, ..., n-1 and start, start+step, ... (< stop), 1-D.
  static Tensor arange(std::int64_t n, DType dtype = DType::F32, Place place = Place::host());
  static Tensor arange(double start, double stop, double step, DType dtype = DType::F32,
                       Place place = Place::host());
  // Seeded random values; element i depends only on (seed, i), so the values are the same on
  // every place and for any number of threads.
  static Tensor uniform(const Shape& shape, double low, double high, std::uint64_t seed,
                        DType dtype = DType::F32, Place place = Place::host());
  static Tensor normal(const Shape& shape, double mean, double stddev, std::uint64_t seed,
                       DType dtype = DType::F32, Place place = Place::host());
  // A copy of `values` (1-D, or reshaped to `shape`).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Place place = Place::host());
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Place place = Place::host());
  // A view of existing memory: `offset` in elements from the allocation's start. Strides default
  // to row-major. Checks that the view stays inside the allocation.
  static Tensor from_allocation(AllocationPtr allocation, DType dtype, const Shape& shape,
                                std::int64_t offset = 0, const Strides& strides = {});

  // ---- properties -----------------------------------------------------------------------
  bool defined() const { return allocation_ != nullptr; }
  DType dtype() const { return dtype_; }
  Place place() const;
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  int rank() const { return shape_.size(); }
  std::int64_t numel() const { return shape_.numel(); }
  std::int64_t size(int dim) const;
  std::int64_t stride(int dim) const;
  std::size_t element_size() const { return dtype_size(dtype_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  bool is_cuda() const { return place().is_cuda(); }
  const AllocationPtr& allocation() const { return allocation_; }

  // Address of the first element (nullptr for an undefined tensor).
  void* data() const;
  // Typed address; the dtype must be T's.
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>(), "data<T>()");
    return static_cast<T*>(data());
  }

  // ---- views: share the allocation --------------------------------------------------------
  // One entry may be -1 (inferred). Needs a contiguous tensor (an error otherwise, not a copy).
  Tensor reshape(const Shape& shape) const;
  Tensor flatten() const;
  // Elements start, start+step, ... before stop along `dim`. Negative start/stop count from the
  // end; both are clamped to the size as in Python; step must be positive.
  Tensor slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;
  // Removes `dim`, keeping index `index` (negative counts from the end).
  Tensor select(int dim, std::int64_t index) const;
  Tensor permute(const Dims& order) const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor unsqueeze(int dim) const;
  Tensor squeeze(int dim) const;
  // A broadcast view: size-1 dimensions (and new leading ones) repeat with stride 0.
  Tensor expand(const Shape& shape) const;
  // The same bytes read as another dtype (contiguous only), as PyTorch's Tensor.view(dtype):
  // u32 keys as i32; or, between sizes, the last dimension rescaled (its bytes and the view's
  // start must divide by the new size), e.g. [n, 128] f16 as [n, 64] u32 words, to move 16-bit
  // rows through code that moves 32-bit elements.
  Tensor view_as(DType dtype) const;

  // ---- copies -------------------------------------------------------------------------------
  // This tensor if contiguous, else a contiguous copy at the same place.
  Tensor contiguous() const;
  Tensor clone() const;
  // A contiguous copy at `place` (this tensor itself if it already is contiguous there). With a
  // stream the copy is queued on it and the source must stay alive until it runs.
  Tensor to(Place place, StreamHandle stream = nullptr) const;
  // A copy converted to `dtype`.
  Tensor to(DType dtype) const;
  // Copies src into this tensor, element by element: same shape (src may broadcast), same
  // dtype (use ops::copy to convert), any strides, any two places.
  void copy_from(const Tensor& src, StreamHandle stream = nullptr) const;

  // ---- element access: convenient for tests, never for hot paths.
  // Views share memory, so writing is allowed through a const handle (like ops' out tensors)
  // ---------------------------
  template <class T>
  std::vector<T> to_vector() const;
  template <class T>
  T item() const;
  template <class T>
  T get(std::initializer_list<std::int64_t> index) const;
  template <class T>
  void set(std::initializer_list<std::int64_t> index, T value) const;
  // Any element as a double, whatever the dtype.
  double get_double(std::initializer_list<std::int64_t> index) const;

  // "Tensor(f32, [2, 3], host) [[1, 2, 3], [4, 5, 6]]", eliding the middle of long tensors.
  std::string to_string(int max_per_dim = 6) const;

  // Throws an error showing both sides unless the shapes / dtypes / places match.
  void check_shape(const Shape& expected, const char* what) const;
  void check_dtype(DType expected, const char* what) const;
  void check_place(Place expected, const char* what) const;

 private:
  std::int64_t element_offset(std::initializer_list<std::int64_t> index) const;
  void read_element(std::int64_t element, void* out) const;
  void write_element(std::int64_t element, const void* in) const;
  void copy_out_contiguous(void* host_dst) const;

  AllocationPtr allocation_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Strides strides_;
  std::int64_t offset_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Throws an error showing both tensors unless they have equal shapes.
void check_same_shape(const Tensor& a, const Tensor& b, const char* what);

// ---- template definitions ------------------------------------------------------------------

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Place place) {
  return from_vector(values, Shape{static_cast<std::int64_t>(values.size())}, place);
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Place place) {
  EMBER_CHECK(shape.numel() == static_cast<std::int64_t>(values.size()),
              "from_vector: ", values.size(), " values cannot fill shape ", shape);
  Tensor host = empty(shape, dtype_of<T>(), Place::host());
  if constexpr (std::is_same_v<T, bool>) {
    bool* out = host.data<bool>();
    for (std::size_t i = 0; i < values.size(); ++i)
      out[i] = values[i];
  } else {
    std::copy(values.begin(), values.end(), host.data<T>());
  }
  return place == Place::host() ? host : host.to(place);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_dtype(dtype_of<T>(), "to_vector<T>()");
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> bytes(out.size());
    copy_out_contiguous(bytes.data());
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = bytes[i] != 0;
  } else {
    copy_out_contiguous(out.data());
  }
  return out;
}

template <class T>
T Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item() needs exactly one element, tensor has shape ", shape_);
  check_dtype(dtype_of<T>(), "item<T>()");
  T value{};
  read_element(offset_, &value);
  return value;
}

template <class T>
T Tensor::get(std::initializer_list<std::int64_t> index) const {
  check_dtype(dtype_of<T>(), "get<T>()");
  T value{};
  read_element(element_offset(index), &value);
  return value;
}

template <class T>
void Tensor::set(std::initializer_list<std::int64_t> index, T value) const {
  check_dtype(dtype_of<T>(), "set<T>()");
  write_element(element_offset(index), &value);
}

}  // namespace ember
