// Element types: the run-time tag (DType), its size and name, the C++ type behind each tag, and
// dispatch from a tag to code templated on the type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

#include "ember/core/error.hpp"
#include "ember/core/half.hpp"

namespace ember {

enum class DType : std::uint8_t { F32, F16, BF16, F64, I8, U8, I32, U32, I64, U64, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                       DType::I8,  DType::U8,  DType::I32,  DType::U32,
                                       DType::I64, DType::U64, DType::Bool};

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
    case DType::U64:
      return 8;
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F64:
      return "f64";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
    case DType::I32:
      return "i32";
    case DType::U32:
      return "u32";
    case DType::I64:
      return "i64";
    case DType::U64:
      return "u64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}
constexpr bool is_integral(DType t) {
  return !is_floating(t) && t != DType::Bool;
}
constexpr bool is_signed(DType t) {
  return is_floating(t) || t == DType::I8 || t == DType::I32 || t == DType::I64;
}

// Parses "f32", "float32", "float", "i64", "int64", ... Throws ember::Error on anything else.
DType parse_dtype(std::string_view name);

inline std::ostream& operator<<(std::ostream& os, DType t) {
  return os << dtype_name(t);
}

// The C++ type behind each tag, and back.
template <DType T>
struct dtype_traits;
template <>
struct dtype_traits<DType::F32> {
  using type = float;
};
template <>
struct dtype_traits<DType::F16> {
  using type = Half;
};
template <>
struct dtype_traits<DType::BF16> {
  using type = BFloat16;
};
template <>
struct dtype_traits<DType::F64> {
  using type = double;
};
template <>
struct dtype_traits<DType::I8> {
  using type = std::int8_t;
};
template <>
struct dtype_traits<DType::U8> {
  using type = std::uint8_t;
};
template <>
struct dtype_traits<DType::I32> {
  using type = std::int32_t;
};
template <>
struct dtype_traits<DType::U32> {
  using type = std::uint32_t;
};
template <>
struct dtype_traits<DType::I64> {
  using type = std::int64_t;
};
template <>
struct dtype_traits<DType::U64> {
  using type = std::uint64_t;
};
template <>
struct dtype_traits<DType::Bool> {
  using type = bool;
};
template <DType T>
using dtype_type_t = typename dtype_traits<T>::type;

template <class T>
inline constexpr bool kHasDType = false;
template <class T>
inline constexpr DType kDTypeOf = DType::F32;
#define EMBER_DTYPE_OF(cpp, tag)               \
  template <>                                  \
  inline constexpr bool kHasDType<cpp> = true; \
  template <>                                  \
  inline constexpr DType kDTypeOf<cpp> = DType::tag;
EMBER_DTYPE_OF(float, F32)
EMBER_DTYPE_OF(Half, F16)
EMBER_DTYPE_OF(BFloat16, BF16)
EMBER_DTYPE_OF(double, F64)
EMBER_DTYPE_OF(std::int8_t, I8)
EMBER_DTYPE_OF(std::uint8_t, U8)
EMBER_DTYPE_OF(std::int32_t, I32)
EMBER_DTYPE_OF(std::uint32_t, U32)
EMBER_DTYPE_OF(std::int64_t, I64)
EMBER_DTYPE_OF(std::uint64_t, U64)
EMBER_DTYPE_OF(bool, Bool)
#undef EMBER_DTYPE_OF

template <class T>
constexpr DType dtype_of() {
  static_assert(kHasDType<std::remove_cv_t<T>>, "type has no Ember dtype");
  return kDTypeOf<std::remove_cv_t<T>>;
}

// A value-less carrier of a type, for dispatch: f(TypeTag<float>{}).
template <class T>
struct TypeTag {
  using type = T;
};

// A list of C++ element types, for dispatch over a subset of dtypes.
template <class... Ts>
struct TypeList {};

using AllTypes = TypeList<float, Half, BFloat16, double, std::int8_t, std::uint8_t, std::int32_t,
                          std::uint32_t, std::int64_t, std::uint64_t, bool>;
using NumericTypes = TypeList<float, Half, BFloat16, double, std::int8_t, std::uint8_t,
                              std::int32_t, std::uint32_t, std::int64_t, std::uint64_t>;
using FloatingTypes = TypeList<float, Half, BFloat16, double>;
// Key types of sparse inputs: u32 (HugeCTR's I32) and i64 (I64).
using KeyTypes = TypeList<std::uint32_t, std::int64_t>;

// Whether `t` is the dtype of one of Ts.
template <class... Ts>
constexpr bool dtype_among(TypeList<Ts...>, DType t) {
  return ((t == dtype_of<Ts>()) || ...);
}

namespace detail {

template <class... Ts>
[[noreturn]] void throw_dtype_not_among(TypeList<Ts...>, DType t, std::string_view what) {
  std::string accepted;
  ((accepted += (accepted.empty() ? "" : ", ") + std::string(dtype_name(dtype_of<Ts>()))), ...);
  EMBER_THROW(what, " takes dtypes ", accepted, ", not ", dtype_name(t));
}

template <class Accepted, class T, class... Rest, class F>
decltype(auto) dispatch_step(TypeList<T, Rest...>, DType t, std::string_view what, F& f) {
  if (t == dtype_of<T>()) return f(TypeTag<T>{});
  if constexpr (sizeof...(Rest) == 0)
    throw_dtype_not_among(Accepted{}, t, what);
  else
    return dispatch_step<Accepted>(TypeList<Rest...>{}, t, what, f);
}

}  // namespace detail

// Calls f(TypeTag<T>{}) with T the C++ type of `t`, instantiating f only for the types of
// `Types` (a TypeList); any other dtype is an error naming `what` and the accepted dtypes.
template <class Types, class F>
decltype(auto) dispatch_among(DType t, std::string_view what, F&& f) {
  return detail::dispatch_step<Types>(Types{}, t, what, f);
}

// Every dtype.
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  return dispatch_among<AllTypes>(t, "dispatch", f);
}

template <class F>
decltype(auto) dispatch_floating(DType t, std::string_view what, F&& f) {
  return dispatch_among<FloatingTypes>(t, what, f);
}

template <class F>
decltype(auto) dispatch_key(DType t, std::string_view what, F&& f) {
  return dispatch_among<KeyTypes>(t, what, f);
}

}  // namespace ember
