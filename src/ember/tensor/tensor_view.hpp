// A statically typed view of a Tensor: the element type is known at compile time. Converts both
// ways with checks (dtype on the way in; the dynamic Tensor comes back unchanged).
#pragma once

#include <cstdint>

#include "ember/tensor/tensor.hpp"

namespace ember {

template <class T>
class TensorView {
 public:
  TensorView() = default;
  explicit TensorView(Tensor t) : tensor_(std::move(t)) {
    tensor_.check_dtype(dtype_of<T>(), "TensorView");
  }

  const Tensor& tensor() const { return tensor_; }
  operator const Tensor&() const { return tensor_; }  // NOLINT: the checked direction is the other
  T* data() const { return static_cast<T*>(tensor_.data()); }
  const Shape& shape() const { return tensor_.shape(); }
  const Strides& strides() const { return tensor_.strides(); }
  std::int64_t size(int dim) const { return tensor_.size(dim); }
  std::int64_t numel() const { return tensor_.numel(); }
  int rank() const { return tensor_.rank(); }
  Place place() const { return tensor_.place(); }

  // Element reference for host-accessible tensors; one index per dimension.
  template <class... Index>
  T& operator()(Index... index) const {
    static_assert((std::is_integral_v<Index> && ...), "indices must be integers");
    EMBER_CHECK(static_cast<int>(sizeof...(Index)) == rank(), "TensorView: ", sizeof...(Index),
                " indices for rank ", rank());
    EMBER_CHECK(place().host_accessible(), "TensorView element access on ", place(),
                ": copy to the host first");
    std::int64_t off = 0;
    int d = 0;
    ((off += static_cast<std::int64_t>(index) * tensor_.strides()[d++]), ...);
    return data()[off];
  }

 private:
  Tensor tensor_;
};

}  // namespace ember
