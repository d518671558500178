// 16-bit floating-point storage types usable on the host and in CUDA kernels.
//
// A CPU-only build has no cuda_fp16.h, yet f16/bf16 tensors must still exist there (the CPU path
// is the reference). These types hold the bits and convert with round-to-nearest-even, the same
// rounding as the CUDA intrinsics; in device code the intrinsics are used.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define EMBER_HOST_DEVICE __host__ __device__
#define EMBER_DEVICE __device__
#else
#define EMBER_HOST_DEVICE
#define EMBER_DEVICE
#endif

namespace ember {

namespace detail {
EMBER_HOST_DEVICE inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
EMBER_HOST_DEVICE inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

EMBER_HOST_DEVICE inline std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x47800000u) {  // >= 65536: overflow to inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    // Scale into the subnormal range with one float addition that rounds to nearest even.
    const float magic = bits_float(0x3f000000u);  // 0.5
    const float v = bits_float(abs) + magic;
    return static_cast<std::uint16_t>(sign | (float_bits(v) - float_bits(magic)));
  }
  const std::uint32_t mant_odd = (abs >> 13) & 1u;
  std::uint32_t r = abs + 0xc8000fffu + mant_odd;  // rebias exponent and round to nearest even
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

EMBER_HOST_DEVICE inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    const float v = static_cast<float>(mant) * bits_float(0x33800000u);  // mant * 2^-24
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

EMBER_HOST_DEVICE inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

EMBER_HOST_DEVICE inline float bf16_bits_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}
}  // namespace detail

// IEEE 754 binary16.
struct alignas(2) Half {
  std::uint16_t bits = 0;

  Half() = default;
  EMBER_HOST_DEVICE Half(float f) { *this = from_float(f); }  // NOLINT: implicit like float16
  EMBER_HOST_DEVICE static Half from_bits(std::uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  EMBER_HOST_DEVICE static Half from_float(float f) {
#if defined(__CUDA_ARCH__)
    return from_bits(__half_as_ushort(__float2half_rn(f)));
#else
    return from_bits(detail::float_to_half_bits(f));
#endif
  }
  EMBER_HOST_DEVICE operator float() const {  // NOLINT
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return detail::half_bits_to_float(bits);
#endif
  }
};

// bfloat16: the upper half of a float32.
struct alignas(2) BFloat16 {
  std::uint16_t bits = 0;

  BFloat16() = default;
  EMBER_HOST_DEVICE BFloat16(float f) { *this = from_float(f); }  // NOLINT
  EMBER_HOST_DEVICE static BFloat16 from_bits(std::uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  EMBER_HOST_DEVICE static BFloat16 from_float(float f) {
#if defined(__CUDA_ARCH__)
    return from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(f)));
#else
    return from_bits(detail::float_to_bf16_bits(f));
#endif
  }
  EMBER_HOST_DEVICE operator float() const {  // NOLINT
    return detail::bf16_bits_to_float(bits);
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace ember
