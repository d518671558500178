#include "ember/tensor/tensor.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "ember/core/copy.hpp"
#include "ember/core/stream.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/random.hpp"

namespace ember {

namespace {

// Bytes a view can reach from its first element, for bounds checks (0 for empty tensors).
std::int64_t span_elements(const Shape& shape, const Strides& strides) {
  if (shape.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < shape.size(); ++d)
    last += (shape[d] - 1) * strides[d];
  return last + 1;
}

template <class T>
void fill_random_host(T* out, std::int64_t n, std::uint64_t seed, bool normal, double a, double b) {
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint64_t>(i);
    const double v =
        normal ? a + b * random::normal01(seed, u) : a + (b - a) * random::uniform01(seed, u);
    if constexpr (std::is_same_v<T, double>) {
      out[i] = v;
    } else {
      out[i] = T(static_cast<float>(v));
    }
  }
}

Tensor random_tensor(const Shape& shape, DType dtype, Place place, std::uint64_t seed, bool normal,
                     double a, double b) {
  Tensor host = Tensor::empty(shape, dtype, Place::host());
  dispatch_floating(dtype, normal ? "Tensor::normal" : "Tensor::uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_random_host(host.data<T>(), host.numel(), seed, normal, a, b);
  });
  return place == Place::host() ? host : host.to(place);
}

}  // namespace

// ---- creation ---------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Place place) {
  for (std::int64_t d : shape) {
    EMBER_CHECK(d >= 0, "negative dimension in shape ", shape);
  }
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  return from_allocation(Allocation::create(place, bytes), dtype, shape);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Place place) {
  return full(shape, 0.0, dtype, place);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Place place) {
  return full(shape, 1.0, dtype, place);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Place place) {
  Tensor t = empty(shape, dtype, place);
  ops::fill(t, value);
  return t;
}

Tensor Tensor::arange(std::int64_t n, DType dtype, Place place) {
  return arange(0.0, static_cast<double>(n), 1.0, dtype, place);
}

Tensor Tensor::arange(double start, double stop, double step, DType dtype, Place place) {
  EMBER_CHECK(step != 0.0, "arange: step must not be zero");
  const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((stop - start) / step)));
  Tensor host = empty({n}, dtype, Place::host());
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = host.data<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = start + static_cast<double>(i) * step;
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        out[i] = T(static_cast<float>(v));
      } else {
        out[i] = static_cast<T>(v);
      }
    }
  });
  return place == Place::host() ? host : host.to(place);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, std::uint64_t seed, DType dtype,
                       Place place) {
  EMBER_CHECK(low <= high, "uniform: low ", low, " is above high ", high);
  return random_tensor(shape, dtype, place, seed, false, low, high);
}

Tensor Tensor::normal(const Shape& shape, double mean, double stddev, std::uint64_t seed,
                      DType dtype, Place place) {
  EMBER_CHECK(stddev >= 0, "normal: negative standard deviation ", stddev);
  return random_tensor(shape, dtype, place, seed, true, mean, stddev);
}

Tensor Tensor::from_allocation(AllocationPtr allocation, DType dtype, const Shape& shape,
                               std::int64_t offset, const Strides& strides) {
  EMBER_CHECK(allocation != nullptr, "from_allocation: null allocation");
  EMBER_CHECK(offset >= 0, "from_allocation: negative offset ", offset);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = strides.empty() && !shape.empty() ? contiguous_strides(shape) : strides;
  EMBER_CHECK(t.strides_.size() == shape.size(), "from_allocation: strides ", t.strides_,
              " do not match shape ", shape);
  t.offset_ = offset;
  const std::int64_t reach = offset + span_elements(t.shape_, t.strides_);
  const std::size_t need = static_cast<std::size_t>(reach) * dtype_size(dtype);
  EMBER_CHECK(shape.numel() == 0 || need <= allocation->size(), "a ", dtype_name(dtype),
              " view of shape ", shape, " at offset ", offset, " needs ", need,
              " bytes but the allocation has ", allocation->size());
  t.allocation_ = std::move(allocation);
  return t;
}

// ---- properties -------------------------------------------------------------------------------

Place Tensor::place() const {
  return allocation_ ? allocation_->place() : Place::host();
}

std::int64_t Tensor::size(int dim) const {
  return shape_[normalize_dim(dim, rank(), "size")];
}

std::int64_t Tensor::stride(int dim) const {
  return strides_[normalize_dim(dim, rank(), "stride")];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element out of place (an interaction with no embeddings)
  std::int64_t expected = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

void* Tensor::data() const {
  if (!allocation_ || allocation_->data() == nullptr) return nullptr;
  return allocation_->bytes() + offset_ * static_cast<std::int64_t>(element_size());
}

// ---- views ------------------------------------------------------------------------------------

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = shape;
  int infer = -1;
  std::int64_t known = 1;
  for (int d = 0; d < target.size(); ++d) {
    if (target[d] == -1) {
      EMBER_CHECK(infer < 0, "reshape ", shape_, " to ", shape, ": only one dimension may be -1");
      infer = d;
    } else {
      EMBER_CHECK(target[d] >= 0, "reshape ", shape_, " to ", shape, ": negative dimension");
      known *= target[d];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel() % known == 0, "reshape ", shape_, " (", numel(),
                " elements) to ", shape, ": cannot infer the -1 dimension");
    target[infer] = numel() / known;
  }
  EMBER_CHECK(target.numel() == numel(), "reshape ", shape_, " (", numel(), " elements) to ",
              target, " (", target.numel(), " elements): element counts differ");
  EMBER_CHECK(is_contiguous(), "reshape of a non-contiguous ", shape_, " view (strides ", strides_,
              "): call contiguous() first");
  Tensor t = *this;
  t.shape_ = target;
  t.strides_ = contiguous_strides(target);
  return t;
}

Tensor Tensor::flatten() const {
  return reshape({numel()});
}

Tensor Tensor::slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  const int d = normalize_dim(dim, rank(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const std::int64_t n = shape_[d];
  auto clamp_index = [n](std::int64_t i) {
    if (i < 0) i += n;
    return std::clamp<std::int64_t>(i, 0, n);
  };
  const std::int64_t b = clamp_index(start), e = std::max(b, clamp_index(stop));
  Tensor t = *this;
  t.shape_[d] = (e - b + step - 1) / step;
  t.offset_ += b * strides_[d];
  t.strides_[d] = strides_[d] * step;
  return t;
}

Tensor Tensor::select(int dim, std::int64_t index) const {
  const int d = normalize_dim(dim, rank(), "select");
  const std::int64_t n = shape_[d];
  const std::int64_t i = index < 0 ? index + n : index;
  EMBER_CHECK(i >= 0 && i < n, "select: index ", index, " is out of range for dimension ", d,
              " of size ", n);
  Tensor t = *this;
  t.offset_ += i * strides_[d];
  t.shape_.erase(d);
  t.strides_.erase(d);
  return t;
}

Tensor Tensor::permute(const Dims& order) const {
  EMBER_CHECK(order.size() == rank(), "permute: order ", order, " does not match rank ", rank());
  std::array<bool, kMaxRank> seen{};
  Tensor t = *this;
  for (int i = 0; i < rank(); ++i) {
    const int src = normalize_dim(static_cast<int>(order[i]), rank(), "permute");
    EMBER_CHECK(!seen[static_cast<std::size_t>(src)], "permute: dimension ", src,
                " appears twice in ", order);
    seen[static_cast<std::size_t>(src)] = true;
    t.shape_[i] = shape_[src];
    t.strides_[i] = strides_[src];
  }
  return t;
}

Tensor Tensor::transpose(int dim0, int dim1) const {
  const int a = normalize_dim(dim0, rank(), "transpose");
  const int b = normalize_dim(dim1, rank(), "transpose");
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::unsqueeze(int dim) const {
  const int d = normalize_dim(dim, rank() + 1, "unsqueeze");
  Tensor t = *this;
  const std::int64_t stride = d < rank() ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(d, 1);
  t.strides_.insert(d, stride);
  return t;
}

Tensor Tensor::squeeze(int dim) const {
  const int d = normalize_dim(dim, rank(), "squeeze");
  EMBER_CHECK(shape_[d] == 1, "squeeze: dimension ", d, " of ", shape_, " has size ", shape_[d],
              ", not 1");
  Tensor t = *this;
  t.shape_.erase(d);
  t.strides_.erase(d);
  return t;
}

Tensor Tensor::expand(const Shape& shape) const {
  EMBER_CHECK(shape.size() >= rank(), "expand: cannot expand ", shape_, " to fewer dimensions ",
              shape);
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = Dims::filled(shape.size(), 0);
  const int lead = shape.size() - rank();
  for (int d = 0; d < rank(); ++d) {
    const std::int64_t have = shape_[d], want = shape[lead + d];
    if (have == want) {
      t.strides_[lead + d] = strides_[d];
    } else {
      EMBER_CHECK(have == 1, "expand: ", shape_, " cannot broadcast to ", shape, " (dimension ", d,
                  ": ", have, " vs ", want, ")");
    }
  }
  return t;
}

Tensor Tensor::view_as(DType dtype) const {
  EMBER_CHECK(is_contiguous(), "view_as needs a contiguous tensor");
  const auto from = static_cast<std::int64_t>(element_size());
  const auto to = static_cast<std::int64_t>(dtype_size(dtype));
  Tensor t = *this;
  t.dtype_ = dtype;
  if (from == to) return t;
  EMBER_CHECK(rank() >= 1, "view_as: a scalar ", dtype_name(dtype_), " cannot be viewed as ",
              dtype_name(dtype), " (their sizes differ)");
  const std::int64_t last = shape_[rank() - 1];
  EMBER_CHECK(last * from % to == 0 && offset_ * from % to == 0, "view_as: ", shape_, " ",
              dtype_name(dtype_), " (", last * from, " bytes a row, starting at byte ",
              offset_ * from, ") cannot be viewed as ", dtype_name(dtype),
              ": both must divide by its size, ", to);
  Shape shape = shape_;
  shape[rank() - 1] = last * from / to;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.offset_ = offset_ * from / to;
  return t;
}

// ---- copies -----------------------------------------------------------------------------------

Tensor Tensor::contiguous() const {
  if (!defined() || is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, place());
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(Place place, StreamHandle stream) const {
  if (place == this->place() && is_contiguous()) return *this;
  Tensor out = empty(shape_, dtype_, place);
  out.copy_from(*this, stream);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  return ops::cast(*this, dtype);
}

void Tensor::copy_from(const Tensor& src, StreamHandle stream) const {
  EMBER_CHECK(defined() && src.defined(), "copy_from with an undefined tensor");
  check_dtype(src.dtype(), "copy_from (use ops::copy to convert dtypes)");
  EMBER_CHECK(broadcast_shapes(src.shape(), shape_) == shape_, "copy_from: source shape ",
              src.shape(), " does not broadcast to destination shape ", shape_);
  if (numel() == 0) return;
  if (src.place() == place()) {
    ops::copy(*this, src, stream);
    return;
  }
  // Across places: move contiguous bytes, with a contiguous staging copy on either side when a
  // side is strided or broadcast.
  if (is_contiguous() && src.is_contiguous() && src.shape() == shape_) {
    copy_bytes(data(), place(), src.data(), src.place(), nbytes(), stream);
    return;
  }
  const Tensor packed = src.shape() == shape_ ? src.contiguous() : src.expand(shape_).clone();
  if (is_contiguous()) {
    copy_bytes(data(), place(), packed.data(), packed.place(), nbytes(), stream);
    if (stream != nullptr) synchronize_stream(stream);  // `packed` dies here
    return;
  }
  Tensor staged = empty(shape_, dtype_, place());
  copy_bytes(staged.data(), staged.place(), packed.data(), packed.place(), nbytes(), stream);
  ops::copy(*this, staged, stream);
  if (stream != nullptr) synchronize_stream(stream);
}

// ---- element access ---------------------------------------------------------------------------

std::int64_t Tensor::element_offset(std::initializer_list<std::int64_t> index) const {
  EMBER_CHECK(static_cast<int>(index.size()) == rank(), "index of ", index.size(),
              " coordinates for a tensor of rank ", rank(), " (shape ", shape_, ")");
  std::int64_t off = offset_;
  int d = 0;
  for (std::int64_t i : index) {
    const std::int64_t n = shape_[d];
    const std::int64_t j = i < 0 ? i + n : i;
    EMBER_CHECK(j >= 0 && j < n, "index ", i, " is out of range for dimension ", d, " of shape ",
                shape_);
    off += j * strides_[d];
    ++d;
  }
  return off;
}

void Tensor::read_element(std::int64_t element, void* out) const {
  const std::byte* src = allocation_->bytes() + element * static_cast<std::int64_t>(element_size());
  copy_bytes(out, Place::host(), src, place(), element_size());
}

void Tensor::write_element(std::int64_t element, const void* in) const {
  std::byte* dst = allocation_->bytes() + element * static_cast<std::int64_t>(element_size());
  copy_bytes(dst, place(), in, Place::host(), element_size());
}

double Tensor::get_double(std::initializer_list<std::int64_t> index) const {
  const std::int64_t e = element_offset(index);
  return dispatch_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v{};
    read_element(e, &v);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return static_cast<double>(static_cast<float>(v));
    } else {
      return static_cast<double>(v);
    }
  });
}

void Tensor::copy_out_contiguous(void* host_dst) const {
  if (numel() == 0) return;
  Tensor packed = contiguous();
  copy_bytes(host_dst, Place::host(), packed.data(), packed.place(), packed.nbytes());
}

// ---- printing and checks ----------------------------------------------------------------------

std::string Tensor::to_string(int max_per_dim) const {
  std::ostringstream os;
  if (!defined()) return "Tensor(undefined)";
  os << "Tensor(" << dtype_name(dtype_) << ", " << shape_ << ", " << place() << ")";
  if (numel() == 0) return os.str() + " []";
  Tensor host = to(Place::host());
  std::vector<double> values(static_cast<std::size_t>(host.numel()));
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = host.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        values[i] = static_cast<float>(p[i]);
      } else {
        values[i] = static_cast<double>(p[i]);
      }
    }
  });
  const Strides strides = contiguous_strides(shape_);
  std::ostringstream body;
  body.precision(6);
  // Prints dimension d starting at flat index base, eliding the middle when it is long.
  auto print = [&](auto&& self, int d, std::int64_t base) -> void {
    if (d == rank()) {
      body << values[static_cast<std::size_t>(base)];
      return;
    }
    body << "[";
    const std::int64_t n = shape_[d];
    const std::int64_t half = std::max(1, max_per_dim / 2);
    for (std::int64_t i = 0; i < n; ++i) {
      if (n > max_per_dim && i == half) {
        body << "...";
        i = n - half - 1;
        continue;
      }
      if (i > 0) body << ", ";
      self(self, d + 1, base + i * strides[d]);
    }
    body << "]";
  };
  print(print, 0, 0);
  return os.str() + " " + body.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.to_string();
}

void Tensor::check_shape(const Shape& expected, const char* what) const {
  EMBER_CHECK(shape_ == expected, what, ": expected shape ", expected, ", got ", shape_);
}

void Tensor::check_dtype(DType expected, const char* what) const {
  EMBER_CHECK(dtype_ == expected, what, ": expected dtype ", dtype_name(expected), ", got ",
              dtype_name(dtype_));
}

void Tensor::check_place(Place expected, const char* what) const {
  EMBER_CHECK(place() == expected, what, ": expected a tensor on ", expected, ", got one on ",
              place());
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  EMBER_CHECK(a.shape() == b.shape(), what, ": shapes differ: ", a.shape(), " vs ", b.shape());
}

}  // namespace ember
