// Value conversion between any two element types, the same on the host and in CUDA kernels:
// 16-bit floats go through float, bool is "nonzero", floating -> integer truncates toward zero
// and saturates at the integer type's range (NaN gives 0) -- what the GPU's conversion
// instructions do, made explicit so that the CPU agrees (a plain C++ cast of an out-of-range
// float is undefined behaviour). Integer -> integer keeps the low bits (modular), as in C++20.
#pragma once

#include <limits>
#include <type_traits>

#include "ember/core/half.hpp"

namespace ember {

template <class T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <class T>
using OpMath = std::conditional_t<kIsHalfLike<T>, float, T>;

template <class To, class From>
EMBER_HOST_DEVICE inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (kIsHalfLike<From>) {
    return convert<To, float>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (kIsHalfLike<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // The bounds are powers of two (or 2^k - 1, which rounds up to 2^k in From): a value at or
    // past them saturates, anything strictly inside truncates exactly.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (v != v) return To(0);
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember
