// The element type of an embedding table's vectors (f32, f16 or bf16) and how an update in f32
// is rounded back into it; shared by the CPU steps and the CUDA kernels (fmt-free, host/device).
//
// A 16-bit table stores only its vectors in 16 bits: optimizer states stay f32, pooling and
// gradient sums run in f32 (a 16-bit value widens exactly), and each update computes the new
// weight in f32 from the widened old one, then rounds it once into the table:
//  - Nearest: round to nearest even. Cheap, but an update smaller than half a 16-bit ulp of the
//    weight is lost every time (f16 has 11 significant bits: a weight of 0.05 ignores steps
//    under 1.5e-5; bf16, 8 bits, under 1.2e-4).
//  - Stochastic: rounds up or down with probabilities proportional to the distances, so the
//    expected stored value is the f32 result and small steps survive on average. The random
//    bits are a hash of (seed, step, column, the old weight): a function of the
//    values only, not of rows or ranks, so the CPU and the GPU (and any rank count) round alike.
//    UpdateRounding holds one step's part of the hash, so a kernel mixes it once.
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/core/half.hpp"
#include "ember/tensor/random.hpp"

namespace ember::embedding::kernels {

enum class ValueType : std::uint8_t { F32, F16, BF16 };
enum class Rounding : std::uint8_t { Nearest, Stochastic };

constexpr int value_bytes(ValueType t) {
  return t == ValueType::F32 ? 4 : 2;
}
constexpr const char* value_type_name(ValueType t) {
  return t == ValueType::F32 ? "f32" : t == ValueType::F16 ? "f16" : "bf16";
}
constexpr const char* rounding_name(Rounding r) {
  return r == Rounding::Nearest ? "nearest" : "stochastic";
}

// A table's vectors: [rows, vec_size] of `type` at the rank's place, and how updates round.
struct Values {
  void* data = nullptr;
  ValueType type = ValueType::F32;
  Rounding rounding = Rounding::Stochastic;
  std::uint64_t seed = 0;  // stochastic rounding's stream
};

// Calls f(V{}) with V the C++ type of `t` (float, Half, BFloat16).
template <class F>
decltype(auto) with_value_type(ValueType t, F&& f) {
  switch (t) {
    case ValueType::F16:
      return f(Half{});
    case ValueType::BF16:
      return f(BFloat16{});
    case ValueType::F32:
    default:
      return f(float{});
  }
}

namespace detail {
template <class V>
EMBER_HOST_DEVICE inline std::uint16_t bits_of(V v) {
  return v.bits;
}
// The 16-bit value next to v (not an infinity or a nan) one step away from zero (away = true)
// or towards it; zero's neighbours are the smallest subnormals of either sign (`negative`).
template <class V>
EMBER_HOST_DEVICE inline V neighbour(V v, bool away, bool negative) {
  const std::uint16_t b = v.bits;
  if ((b & 0x7fffu) == 0) return V::from_bits(static_cast<std::uint16_t>(negative ? 0x8001u : 1u));
  return V::from_bits(static_cast<std::uint16_t>(away ? b + 1 : b - 1));
}
}  // namespace detail

// The stochastic-rounding stream of a layer, from its seed (every rank and device alike).
EMBER_HOST_DEVICE inline std::uint64_t rounding_seed(std::uint64_t layer_seed) {
  return random::mix64(layer_seed ^ 0x5eed5eed5eed5eedull);
}

// A step's rounding key: the stream's seed and the step, mixed once per step and kernel thread.
EMBER_HOST_DEVICE inline std::uint64_t rounding_key(std::uint64_t seed, std::int64_t step) {
  return random::mix64(seed ^
                       random::mix64(static_cast<std::uint64_t>(step) * 0x9e3779b97f4a7c15ull));
}

// 24 random bits for rounding column `c` of a weight updated in the step of `key` from `before`.
// Not a function of the new value x: the GPU fuses multiply-adds where the CPU rounds twice, so x
// may differ between them in its last f32 bit, and bits drawn from x would then round the two to
// different neighbours half of the time. Drawn from the old value, the two differ only where
// that last bit carries x across the draw's threshold. The draw is independent of where x falls
// between its two neighbours (x comes from the gradient, not from these bits), so the rounding
// stays unbiased. For one step and column, distinct old values give distinct draws (mix32 is a
// bijection). 32-bit mixing only: with three 64-bit mixes a value, the GPU update of a 16-bit
// table was bound by its integer multiplies.
EMBER_HOST_DEVICE inline std::uint32_t rounding_bits(std::uint64_t key, std::int64_t c,
                                                     float before) {
  const std::uint32_t inner =
      random::mix32(ember::detail::float_bits(before) ^ static_cast<std::uint32_t>(key >> 32));
  const std::uint32_t column = static_cast<std::uint32_t>(c) * 0x9e3779b1u;
  return random::mix32(inner ^ column ^ static_cast<std::uint32_t>(key)) >> 8;
}

// x rounded into V. Stochastic: the nearest value a (round to nearest even) or its neighbour b
// on x's other side, b with probability |x - a| / |b - a| (every quantity here is exact in f32:
// a and x are close enough for an exact difference, and |b - a| is a power of two).
template <class V>
EMBER_HOST_DEVICE inline V round_value(float x, Rounding rounding, std::uint32_t random24) {
  if constexpr (sizeof(V) == 4) {
    return x;
  } else {
    const V a = V::from_float(x);
    const float fa = static_cast<float>(a);
    if (rounding == Rounding::Nearest || fa == x || !(fabsf(fa) < INFINITY)) return a;
    const bool away = fabsf(x) > fabsf(fa);
    const V b = detail::neighbour(a, away, x < 0.0f);
    const float fb = static_cast<float>(b);
    if (!(fabsf(fb) < INFINITY)) return a;
    const float distance = fabsf(x - fa), ulp = fabsf(fb - fa);
    const float u = static_cast<float>(random24) * 0x1.0p-24f;  // [0, 1), 24 bits: exact
    return u * ulp < distance ? b : a;
  }
}

// How one step's updates of a table round into V: the step's key worked out once (kernels make
// one per thread), then each value's draw from its column and old weight.
template <class V>
struct UpdateRounding {
  Rounding rounding;
  std::uint64_t key;
  EMBER_HOST_DEVICE UpdateRounding(const Values& v, std::int64_t step)
      : rounding(v.rounding),
        key(sizeof(V) == 4 || v.rounding != Rounding::Stochastic ? 0 : rounding_key(v.seed, step)) {
  }
  // Column c's update: x is the f32 result, before the widened old weight.
  EMBER_HOST_DEVICE V operator()(std::int64_t c, float x, float before) const {
    if constexpr (sizeof(V) == 4) {
      return x;
    } else {
      return round_value<V>(x, rounding,
                            rounding == Rounding::Stochastic ? rounding_bits(key, c, before) : 0u);
    }
  }
};

}  // namespace ember::embedding::kernels
