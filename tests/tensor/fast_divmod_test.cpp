// FastDivmod against plain division, on the host (the same code runs in kernels; the GPU tests
// check it there through strided ops).
#include "ember/tensor/fast_divmod.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "support/test_support.hpp"

namespace ember {
namespace {

void check_divisor(std::uint32_t d, std::mt19937_64& rng) {
  const FastDivmod fd(d);
  std::vector<std::uint32_t> numerators{0,
                                        1,
                                        d - 1,
                                        d,
                                        d + 1,
                                        2 * d - 1,
                                        2 * d,
                                        FastDivmod::kMaxNumerator,
                                        FastDivmod::kMaxNumerator - 1,
                                        FastDivmod::kMaxNumerator / d * d,
                                        FastDivmod::kMaxNumerator / d * d - 1};
  for (int i = 0; i < 200; ++i) {
    numerators.push_back(
        static_cast<std::uint32_t>(rng() % (std::uint64_t{FastDivmod::kMaxNumerator} + 1)));
  }
  for (std::uint32_t n : numerators) {
    if (n > FastDivmod::kMaxNumerator) continue;
    std::uint32_t q = 0, r = 0;
    fd.divmod(n, q, r);
    ASSERT_EQ(q, n / d) << n << " / " << d;
    ASSERT_EQ(r, n % d) << n << " % " << d;
    ASSERT_EQ(fd.div(n), n / d) << n << " / " << d;
  }
}

TEST(FastDivmod, MatchesPlainDivisionForManyDivisorsAndNumerators) {
  auto rng = testing::make_rng();
  std::vector<std::uint32_t> divisors;
  for (std::uint32_t d = 1; d <= 2048; ++d)
    divisors.push_back(d);
  for (int k = 1; k <= 30; ++k) {
    const std::uint32_t p = 1u << k;
    divisors.insert(divisors.end(), {p - 1, p, p + 1});
  }
  divisors.push_back(FastDivmod::kMaxNumerator);
  divisors.push_back(FastDivmod::kMaxNumerator - 1);
  for (int i = 0; i < 2000; ++i) {
    divisors.push_back(1 + static_cast<std::uint32_t>(rng() % FastDivmod::kMaxNumerator));
  }
  for (std::uint32_t d : divisors)
    check_divisor(d, rng);
}

TEST(FastDivmod, ExhaustiveForSmallNumerators) {
  for (std::uint32_t d = 1; d <= 300; ++d) {
    const FastDivmod fd(d);
    for (std::uint32_t n = 0; n < 100000; ++n)
      ASSERT_EQ(fd.div(n), n / d) << n << " / " << d;
  }
}

TEST(FastDivmod, RejectsDivisorsOutsideItsRange) {
  EXPECT_THROW(FastDivmod(0), Error);
  EXPECT_THROW(FastDivmod(0x80000000u), Error);
}

}  // namespace
}  // namespace ember
