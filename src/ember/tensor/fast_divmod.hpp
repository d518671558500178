// Division by a run-time constant without a hardware divide: the quotient of a 31-bit numerator
// is one high multiply and one shift, n / d == umulhi(n, m) >> s, with the multiplier m and the
// shift s worked out once on the host. CUDA kernels use it to turn a linear element index into
// per-dimension coordinates (an integer divide is a long instruction sequence on the GPU).
//
// Why it is exact (Granlund and Montgomery's round-up method): let l = ceil(log2 d) and
// m = ceil(2^(31 + l) / d), so m * d = 2^(31 + l) + e with 0 <= e < d. For n < 2^31,
//   n * m / 2^(31 + l) = n / d + n * e / (d * 2^(31 + l)),
// and the second term is below 2^31 * d / (d * 2^(31 + l)) = 2^-l <= 1 / d, too small to carry
// n / d past the next integer; so floor(n * m / 2^(31 + l)) = floor(n / d). For d >= 2, m fits in
// 32 bits and umulhi(n, m) = floor(n * m / 2^32), so s = l - 1. d == 1 would need m = 2^32 and is
// kept as a special case (a select, not a branch).
//
// Header-only, usable on the host and in CUDA kernels, free of fmt.
#pragma once

#include <cstdint>

#include "ember/core/error.hpp"
#include "ember/core/half.hpp"

namespace ember {

struct FastDivmod {
  // The largest numerator the multiplier is exact for.
  static constexpr std::uint32_t kMaxNumerator = 0x7fffffffu;

  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 0;
  std::uint32_t shift = 0;

  FastDivmod() = default;
  // d in [1, 2^31 - 1].
  explicit FastDivmod(std::uint32_t d) : divisor(d) {
    EMBER_CHECK(d >= 1 && d <= kMaxNumerator, "FastDivmod: divisor ", d,
                " is outside [1, 2^31 - 1]");
    if (d == 1) return;
    std::uint32_t l = 0;
    while ((std::uint64_t{1} << l) < d)
      ++l;  // l = ceil(log2 d), 1..31
    const std::uint64_t numerator = std::uint64_t{1} << (31 + l);
    multiplier = static_cast<std::uint32_t>((numerator + d - 1) / d);
    shift = l - 1;
  }

  EMBER_HOST_DEVICE static std::uint32_t umulhi(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<std::uint32_t>((std::uint64_t{a} * b) >> 32);
#endif
  }

  // n / divisor, for n <= kMaxNumerator.
  EMBER_HOST_DEVICE std::uint32_t div(std::uint32_t n) const {
    const std::uint32_t q = umulhi(n, multiplier) >> shift;
    return divisor == 1 ? n : q;
  }

  // Quotient and remainder together (the remainder costs one multiply-subtract).
  EMBER_HOST_DEVICE void divmod(std::uint32_t n, std::uint32_t& quotient,
                                std::uint32_t& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor;
  }
};

}  // namespace ember
