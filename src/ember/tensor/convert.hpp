// Value conversion between any two element types, the same on the host and in CUDA kernels:
// 16-bit floats go through float, bool is "nonzero", float -> integer truncates toward zero.
#pragma once

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
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember
