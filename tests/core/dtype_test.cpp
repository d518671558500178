#include "ember/core/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/test_support.hpp"

namespace ember {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::I8), 1u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::U32), 4u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::U64), 8u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  for (DType t : kAllDTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    const std::size_t size =
        dispatch_dtype(t, [](auto tag) { return sizeof(typename decltype(tag)::type); });
    EXPECT_EQ(size, dtype_size(t)) << dtype_name(t);
    EXPECT_EQ(dispatch_dtype(t, [](auto tag) { return dtype_of<typename decltype(tag)::type>(); }),
              t);
  }
  EXPECT_EQ(parse_dtype("float"), DType::F32);
  EXPECT_EQ(parse_dtype("INT64"), DType::I64);
}

TEST(DType, UnknownNameIsAClearError) {
  try {
    parse_dtype("float8");
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("float8"), std::string::npos) << e.what();
  }
}

TEST(DType, NarrowDispatchersRejectOtherTypes) {
  EXPECT_THROW(dispatch_floating(DType::I32, "relu", [](auto) { return 0; }), Error);
  EXPECT_THROW(dispatch_key(DType::F32, "hash table", [](auto) { return 0; }), Error);
  EXPECT_EQ(
      dispatch_key(DType::I64, "x", [](auto tag) { return sizeof(typename decltype(tag)::type); }),
      8u);
}

// Reference conversion through double: the nearest representable half, ties to even.
std::uint16_t reference_half_bits(float f) {
  if (std::isnan(f)) return 0x7e00;
  static std::vector<double> values = [] {
    std::vector<double> v;
    for (std::uint32_t b = 0; b < 0x7c00; ++b)
      v.push_back(detail::half_bits_to_float(static_cast<std::uint16_t>(b)));
    return v;
  }();
  const double a = std::fabs(static_cast<double>(f));
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  // Beyond the largest half plus half an ulp (65520) everything rounds to infinity.
  if (a >= 65520.0) return sign | 0x7c00;
  auto it = std::lower_bound(values.begin(), values.end(), a);
  std::size_t hi = static_cast<std::size_t>(it - values.begin());
  if (hi == 0) return sign;
  const std::size_t lo = hi - 1;
  if (hi == values.size()) return static_cast<std::uint16_t>(sign | lo);
  const double dlo = a - values[lo], dhi = values[hi] - a;
  std::size_t pick = dlo < dhi ? lo : (dhi < dlo ? hi : ((lo & 1) == 0 ? lo : hi));
  return static_cast<std::uint16_t>(sign | pick);
}

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = detail::half_bits_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Half(f).bits, b) << "bits " << b;
  }
}

TEST(Half, RoundsFloatsToNearestEven) {
  auto rng = testing::make_rng();
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t u = bits(rng);
    // Half the draws near the half range, so that normal, subnormal and overflow cases all occur.
    if (i % 2 == 0) u = (u & 0x807fffffu) | ((100u + (u >> 24) % 45u) << 23);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(Half(f).bits, reference_half_bits(f)) << "float " << f << " bits " << u;
  }
  EXPECT_EQ(Half(65504.f).bits, 0x7bff);
  EXPECT_EQ(Half(65519.f).bits, 0x7bff);
  EXPECT_EQ(Half(65520.f).bits, 0x7c00);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(1e10f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(BFloat16(1.0f + 1.0f / 256).bits, 0x3f80);
  EXPECT_EQ(BFloat16(1.0f + 3.0f / 256).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
  auto rng = testing::make_rng();
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  for (int i = 0; i < 100000; ++i) {
    const float f = dist(rng);
    const float back = BFloat16(f);
    ASSERT_LE(std::fabs(back - f), std::fabs(f) * (1.0f / 256)) << f;
  }
}

TEST(DType, DispatchAmongReachesEachTypeOfItsListOnce) {
  for (DType t : kAllDTypes) {
    const DType seen =
        dispatch_dtype(t, [](auto tag) { return dtype_of<typename decltype(tag)::type>(); });
    EXPECT_EQ(seen, t);
    EXPECT_EQ(dtype_among(KeyTypes{}, t), t == DType::U32 || t == DType::I64) << t;
    EXPECT_EQ(dtype_among(NumericTypes{}, t), t != DType::Bool) << t;
  }
  const std::size_t size = dispatch_floating(
      DType::BF16, "test", [](auto tag) { return sizeof(typename decltype(tag)::type); });
  EXPECT_EQ(size, 2u);
}

TEST(DType, DispatchAmongNamesWhatAndTheAcceptedDTypes) {
  int calls = 0;
  EMBER_EXPECT_THROW_WITH(dispatch_key(DType::F32, "embedding keys", [&](auto) { ++calls; }), Error,
                          "embedding keys takes dtypes u32, i64, not f32");
  EMBER_EXPECT_THROW_WITH(dispatch_floating(DType::I8, "softmax", [&](auto) { ++calls; }), Error,
                          "softmax takes dtypes f32, f16, bf16, f64, not i8");
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace ember
