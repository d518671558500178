// Helpers shared by the op tests (CPU against plain loops, GPU against the CPU): inputs in
// several memory layouts, and reading elements straight through strides, without ops::copy.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ember/tensor/convert.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::testing {

inline constexpr DType kNumericDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                           DType::I8,  DType::U8,  DType::I32,  DType::U32,
                                           DType::I64, DType::U64};
inline constexpr DType kFloatingDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64};

// An integer result reduced modulo 2^bits into `dtype`, as two's complement hardware does.
inline double wrap_to(DType dtype, long double exact) {
  const auto v = static_cast<std::uint64_t>(static_cast<std::int64_t>(exact));
  switch (dtype) {
    case DType::I8:
      return static_cast<std::int8_t>(v);
    case DType::U8:
      return static_cast<std::uint8_t>(v);
    case DType::I32:
      return static_cast<std::int32_t>(v);
    case DType::U32:
      return static_cast<std::uint32_t>(v);
    case DType::I64:
      return static_cast<double>(static_cast<std::int64_t>(v));
    case DType::U64:
      return static_cast<double>(v);
    default:
      return static_cast<double>(exact);
  }
}

// How an input is laid out in memory: all views of a larger or reordered base allocation.
enum class Layout { Contiguous, Transposed, SteppedSlice, Offset };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Transposed:
      return "transposed";
    case Layout::SteppedSlice:
      return "stepped-slice";
    case Layout::Offset:
      return "offset-by-one";
  }
  return "?";
}

// Row-major values of a host tensor read element by element through its strides.
template <class T>
std::vector<T> read_elements(const Tensor& t) {
  EMBER_CHECK(t.place().host_accessible(), "read_elements needs a host tensor");
  const T* base = static_cast<const T*>(t.data());
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(t.numel()));
  if (t.numel() == 0) return out;
  if (t.is_contiguous()) return std::vector<T>(base, base + t.numel());
  std::vector<std::int64_t> index(static_cast<std::size_t>(t.rank()), 0);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::int64_t offset = 0;
    for (int d = 0; d < t.rank(); ++d)
      offset += index[static_cast<std::size_t>(d)] * t.stride(d);
    out.push_back(base[offset]);
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++index[static_cast<std::size_t>(d)] < t.size(d)) break;
      index[static_cast<std::size_t>(d)] = 0;
    }
  }
  return out;
}

template <class T>
double as_double(T v) {
  if constexpr (kIsHalfLike<T>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

inline std::vector<double> read_as_double(const Tensor& t) {
  return dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> out;
    for (T v : read_elements<T>(t))
      out.push_back(as_double(v));
    return out;
  });
}

// Random values in [lo, hi]: whole numbers for integer and bool dtypes.
inline std::vector<double> random_values(std::mt19937_64& rng, std::int64_t n, DType dtype,
                                         double lo, double hi) {
  std::vector<double> v(static_cast<std::size_t>(n));
  if (is_floating(dtype)) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (double& x : v)
      x = dist(rng);
  } else {
    std::uniform_int_distribution<std::int64_t> dist(static_cast<std::int64_t>(std::ceil(lo)),
                                                     static_cast<std::int64_t>(std::floor(hi)));
    for (double& x : v)
      x = static_cast<double>(dist(rng));
  }
  return v;
}

// A dense host tensor holding `values` converted to `dtype` (written directly, not via ops).
inline Tensor host_tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype, Place::host());
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(t.data());
    for (std::size_t i = 0; i < values.size(); ++i)
      p[i] = convert<T>(values[i]);
  });
  return t;
}

// A tensor of `shape` at `place` in the given layout, whose row-major values are `values`. The
// base allocation is filled on the host, moved to `place` whole, and viewed there, so that the
// same layout exists on every place.
inline Tensor make_input(const std::vector<double>& values, const Shape& shape, DType dtype,
                         Layout layout, Place place = Place::host()) {
  const int r = shape.size();
  if (layout == Layout::Transposed && r < 2) layout = Layout::SteppedSlice;
  if (layout == Layout::SteppedSlice && r < 1) layout = Layout::Offset;
  switch (layout) {
    case Layout::Contiguous:
      return host_tensor(values, shape, dtype).to(place);
    case Layout::Transposed: {
      // The base is shape with its last two dimensions swapped; transposing it back gives shape.
      Shape base_shape = shape;
      std::swap(base_shape[r - 1], base_shape[r - 2]);
      const std::int64_t rows = shape[r - 2], cols = shape[r - 1];
      const std::int64_t outer = rows * cols == 0 ? 0 : shape.numel() / (rows * cols);
      std::vector<double> base(values.size());
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j)
            base[static_cast<std::size_t>(o * rows * cols + j * rows + i)] =
                values[static_cast<std::size_t>(o * rows * cols + i * cols + j)];
      return host_tensor(base, base_shape, dtype).to(place).transpose(r - 1, r - 2);
    }
    case Layout::SteppedSlice: {
      // Every other element of a last dimension twice as long (plus one), starting at 1.
      Shape base_shape = shape;
      const std::int64_t cols = shape[r - 1];
      base_shape[r - 1] = 2 * cols + 1;
      const std::int64_t outer = cols == 0 ? 0 : shape.numel() / cols;
      std::vector<double> base(static_cast<std::size_t>(base_shape.numel()), -7.0);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < cols; ++j)
          base[static_cast<std::size_t>(o * (2 * cols + 1) + 1 + 2 * j)] =
              values[static_cast<std::size_t>(o * cols + j)];
      return host_tensor(base, base_shape, dtype).to(place).slice(r - 1, 1, 2 * cols + 1, 2);
    }
    case Layout::Offset: {
      // Dense, but one element into its allocation: misaligned for vector loads.
      std::vector<double> base(values.size() + 1, -7.0);
      std::copy(values.begin(), values.end(), base.begin() + 1);
      const Tensor whole =
          host_tensor(base, {static_cast<std::int64_t>(base.size())}, dtype).to(place);
      return Tensor::from_allocation(whole.allocation(), dtype, shape, 1);
    }
  }
  return {};
}

// Tolerance for comparing a computed floating value with a reference in double.
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64:
      return 1e-12;
    case DType::F32:
      return 2e-6;
    case DType::F16:
      return 2e-3;
    case DType::BF16:
      return 1.6e-2;
    default:
      return 0.0;
  }
}

// Compares `got` with `expected` element by element: exactly for integer and bool dtypes, to
// tolerance(dtype) relative (absolute below 1) for floating ones; NaN only matches NaN.
inline ::testing::AssertionResult values_match(const std::vector<double>& got,
                                               const std::vector<double>& expected, DType dtype,
                                               double scale = 1.0) {
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " vs " << expected.size();
  }
  const double tol = tolerance(dtype) * scale;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], e = expected[i];
    bool ok;
    if (std::isnan(e) || std::isnan(g)) {
      ok = std::isnan(e) && std::isnan(g);
    } else if (std::isinf(e) || std::isinf(g)) {
      ok = g == e;
    } else {
      ok = std::abs(g - e) <= tol * std::max(1.0, std::abs(e));
    }
    if (!ok) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", expected " << e
                                           << " (" << dtype_name(dtype) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ember::testing
