// DropoutMask's integer test against the definition it replaces: element i of a step survives
// when random::uniform01(stream, i) >= rate. Same draws, so the same elements are dropped.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "ember/network/kernels/dropout_mask.hpp"
#include "ember/tensor/random.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

TEST(DropoutMask, KeepsExactlyTheDrawsAtLeastTheRate) {
  auto rng = ember::testing::make_rng();
  std::uniform_real_distribution<float> any_rate(0.0f, 1.0f);
  for (float rate : {0.2f, 0.5f, 1e-7f, 0.9999999f, 0.0f, any_rate(rng), any_rate(rng)}) {
    const std::uint64_t stream = dropout_stream(rng(), rng() % 1000);
    const DropoutMask mask = DropoutMask::of(stream, rate);
    std::int64_t kept = 0, differ = 0;
    constexpr std::uint64_t kDraws = 200000;
    for (std::uint64_t i = 0; i < kDraws; ++i) {
      const bool want = random::uniform01(stream, i) >= static_cast<double>(rate);
      kept += want;
      differ += mask.keeps(i) != want;
    }
    EXPECT_EQ(differ, 0) << "rate " << rate;
    if (rate == 0.5f) {
      EXPECT_NEAR(static_cast<double>(kept) / kDraws, 0.5, 0.01);
    }
  }
  // The rate 0.25 is 2^51 / 2^53: the threshold is exactly 2^51 (a draw equal to the rate is
  // kept, as uniform01(...) >= rate keeps it).
  const DropoutMask quarter = DropoutMask::of(0, 0.25f);
  EXPECT_EQ(quarter.threshold, std::uint64_t{1} << 51);
}

}  // namespace
}  // namespace ember::network
