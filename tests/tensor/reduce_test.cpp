// Reductions on the CPU against sums in long double (exact 64-bit arithmetic for integers).
#include "ember/tensor/reduce.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_support.hpp"
#include "tensor/op_test_util.hpp"

namespace ember {
namespace {

using ops::ReduceOp;
using testing::Layout;
using testing::make_input;
using testing::random_values;
using testing::read_as_double;
using testing::values_match;
using testing::wrap_to;

constexpr ReduceOp kReduceOps[] = {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min};

double reduce_reference(ReduceOp op, const std::vector<double>& values, DType dtype) {
  long double sum = 0;
  double mx = -std::numeric_limits<double>::infinity(), mn = -mx;
  for (double v : values) {
    sum += v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  const auto n = static_cast<long double>(values.size());
  switch (op) {
    case ReduceOp::Sum:
      return is_floating(dtype) ? static_cast<double>(sum) : wrap_to(dtype, sum);
    case ReduceOp::Mean:
      return is_floating(dtype) ? static_cast<double>(sum / n)
                                : wrap_to(dtype, std::trunc(sum / n));
    case ReduceOp::Max:
      return mx;
    case ReduceOp::Min:
      return mn;
  }
  return 0;
}

// The size of the rounding error an f64 accumulation may add to a sum of these values (its terms'
// magnitudes times a few ulps), 0 for Max/Min which are exact.
double accumulation_error(ReduceOp op, const std::vector<double>& values) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) return 0;
  double magnitude = 0;
  for (double v : values)
    magnitude += std::abs(v);
  if (op == ReduceOp::Mean && !values.empty()) magnitude /= static_cast<double>(values.size());
  return 1e-13 * magnitude;
}

// values_match with each element's tolerance widened by its accumulation error.
::testing::AssertionResult sums_match(const std::vector<double>& got,
                                      const std::vector<double>& expected,
                                      const std::vector<double>& error, DType dtype) {
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << got.size() << " results, expected " << expected.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = expected[i], g = got[i];
    const double tol = testing::tolerance(dtype) * std::max(1.0, std::abs(e)) + error[i];
    if (std::isnan(e) != std::isnan(g) || (!std::isnan(e) && std::abs(g - e) > tol)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", expected " << e
                                           << " (" << dtype_name(dtype) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// The reference along `dim`: each output reduces its row of the input with `dim` moved last.
// `error` receives each output's accumulation error.
std::vector<double> reference_along(ReduceOp op, const Tensor& in, int dim,
                                    std::vector<double>* error = nullptr) {
  Dims order;
  for (int d = 0; d < in.rank(); ++d) {
    if (d != dim) order.push_back(d);
  }
  order.push_back(dim);
  const std::vector<double> values = read_as_double(in.permute(order));
  const std::int64_t length = in.size(dim);
  const std::int64_t outputs = length == 0 ? 0 : in.numel() / length;
  std::vector<double> out;
  for (std::int64_t o = 0; o < outputs; ++o) {
    const auto first = values.begin() + o * length;
    const std::vector<double> row(first, first + length);
    out.push_back(reduce_reference(op, row, in.dtype()));
    if (error != nullptr) error->push_back(accumulation_error(op, row));
  }
  return out;
}

std::vector<double> inputs(std::mt19937_64& rng, std::int64_t n, DType dtype) {
  if (is_floating(dtype)) return random_values(rng, n, dtype, -4, 4);
  return random_values(rng, n, dtype, is_signed(dtype) ? -60 : 0, 120);
}

struct Case {
  Shape shape;
  Layout layout;
};

TEST(Reduce, AlongEveryDimensionMatchesLongDoubleForEveryDType) {
  auto rng = testing::make_rng();
  const std::vector<Case> cases{
      {{1023}, Layout::Contiguous},      {{65537}, Layout::Offset},
      {{7, 13}, Layout::Contiguous},     {{33, 17}, Layout::Transposed},
      {{3, 5, 7}, Layout::SteppedSlice}, {{1, 9}, Layout::Contiguous},
      {{4, 1, 6}, Layout::Transposed},   {{2, 300, 40}, Layout::Contiguous}};
  for (DType dtype : testing::kNumericDTypes) {
    for (ReduceOp op : kReduceOps) {
      for (const Case& c : cases) {
        if (c.shape.numel() > 5000 && dtype != DType::F32 && dtype != DType::I32) continue;
        const Tensor in = make_input(inputs(rng, c.shape.numel(), dtype), c.shape, dtype, c.layout);
        for (int dim = 0; dim < c.shape.size(); ++dim) {
          const Tensor out = ops::reduce(op, in, dim);
          Shape expected_shape = c.shape;
          expected_shape.erase(dim);
          ASSERT_EQ(out.shape(), expected_shape);
          ASSERT_EQ(out.dtype(), dtype);
          // Sums of many f16/bf16 values carry the result's rounding only (f64 accumulation).
          std::vector<double> error;
          const auto expected = reference_along(op, in, dim, &error);
          ASSERT_TRUE(sums_match(read_as_double(out), expected, error, dtype))
              << ops::op_name(op) << " " << dtype_name(dtype) << " " << c.shape << " "
              << testing::layout_name(c.layout) << " dim " << dim;
        }
      }
    }
  }
}

TEST(Reduce, KeepDimAndStridedOutputs) {
  auto rng = testing::make_rng();
  const Tensor in =
      make_input(inputs(rng, 6 * 40, DType::F64), {6, 40}, DType::F64, Layout::Transposed);
  const Tensor kept = ops::reduce(ReduceOp::Sum, in, 1, /*keep_dim=*/true);
  EXPECT_EQ(kept.shape(), (Shape{6, 1}));
  const auto expected = reference_along(ReduceOp::Sum, in, 1);
  EXPECT_TRUE(values_match(read_as_double(kept), expected, DType::F64));
  // Into every other element of a larger buffer.
  const Tensor buffer = Tensor::full({12}, -1.0, DType::F64);
  ops::reduce(ReduceOp::Sum, buffer.slice(0, 0, 12, 2), in, -1);
  const auto got = read_as_double(buffer);
  for (std::size_t i = 0; i < 12; ++i) {
    if (i % 2 == 1) {
      EXPECT_EQ(got[i], -1.0);
    } else {
      EXPECT_NEAR(got[i], expected[i / 2], 1e-12 * std::max(1.0, std::abs(expected[i / 2])));
    }
  }
}

TEST(Reduce, AllElementsMatchesLongDouble) {
  auto rng = testing::make_rng();
  const std::vector<Case> cases{{{1}, Layout::Contiguous},        {{7}, Layout::Contiguous},
                                {{1023}, Layout::Offset},         {{65537}, Layout::Contiguous},
                                {{300, 301}, Layout::Transposed}, {{9, 31}, Layout::SteppedSlice},
                                {{}, Layout::Contiguous}};
  for (DType dtype : testing::kNumericDTypes) {
    for (ReduceOp op : kReduceOps) {
      for (const Case& c : cases) {
        const Tensor in = make_input(inputs(rng, c.shape.numel(), dtype), c.shape, dtype, c.layout);
        const Tensor out = ops::reduce_all(op, in);
        ASSERT_EQ(out.rank(), 0);
        const auto values = read_as_double(in);
        ASSERT_TRUE(sums_match(read_as_double(out), {reduce_reference(op, values, dtype)},
                               {accumulation_error(op, values)}, dtype))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << c.shape;
      }
    }
  }
}

TEST(Reduce, LongFloatSumsStayAccurate) {
  // A million f32 values: an f32 running sum would drift by ~1e-3 relative; f64 accumulation
  // leaves only the final rounding.
  auto rng = testing::make_rng();
  const std::int64_t n = 1 << 20;
  const Tensor x = Tensor::uniform({n}, 0, 1, rng());
  long double exact = 0;
  for (float v : x.to_vector<float>())
    exact += v;
  const double got = ops::sum(x).item<float>();
  EXPECT_NEAR(got, static_cast<double>(exact), 1e-6 * static_cast<double>(exact));
  const double got_dim = ops::sum(x.reshape({1, n}), 1).item<float>();
  EXPECT_NEAR(got_dim, static_cast<double>(exact), 1e-6 * static_cast<double>(exact));
}

TEST(Reduce, NanPropagatesThroughMaxAndMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector(std::vector<float>{1, nan, 3, -2}, {2, 2});
  EXPECT_TRUE(std::isnan(ops::max(x).item<float>()));
  EXPECT_TRUE(std::isnan(ops::min(x).item<float>()));
  const auto by_column = ops::max(x, 0).to_vector<float>();
  EXPECT_EQ(by_column[0], 3.0f);
  EXPECT_TRUE(std::isnan(by_column[1]));
}

TEST(Reduce, EmptyInputs) {
  EXPECT_EQ(ops::sum(Tensor::zeros({0}, DType::I32)).item<std::int32_t>(), 0);
  EXPECT_TRUE(std::isnan(ops::mean(Tensor::zeros({0})).item<float>()));
  EXPECT_THROW(ops::max(Tensor::zeros({0})), Error);
  EXPECT_THROW(ops::mean(Tensor::zeros({0}, DType::I64)), Error);
  const Tensor sums = ops::sum(Tensor::zeros({3, 0}), 1);
  EXPECT_EQ(sums.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(ops::sum(Tensor::zeros({0, 3}), 1).numel(), 0);
  try {
    ops::max(Tensor::zeros({3, 0}), 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max"), std::string::npos) << e.what();
  }
}

TEST(Reduce, IntegerMeanTruncatesAndSumsWrap) {
  const Tensor x = Tensor::from_vector(std::vector<std::int32_t>{-7, 0, 0, 0});
  EXPECT_EQ(ops::mean(x).item<std::int32_t>(), -1);  // -7 / 4 = -1.75 -> -1
  const Tensor bytes = Tensor::full({3}, 100.0, DType::U8);
  EXPECT_EQ(ops::sum(bytes).item<std::uint8_t>(), 44);    // 300 mod 256
  EXPECT_EQ(ops::mean(bytes).item<std::uint8_t>(), 100);  // the mean sees the 64-bit sum
}

TEST(Reduce, BadArgumentsAreClearErrors) {
  const Tensor x = Tensor::zeros({3, 4});
  EXPECT_THROW(ops::sum(Tensor::zeros({3}, DType::Bool)), Error);
  EXPECT_THROW(ops::sum(x, 2), Error);
  EXPECT_THROW(ops::sum(Tensor::zeros({}), 0), Error);
  try {
    ops::reduce(ReduceOp::Sum, Tensor::empty({4}), x, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::reduce(ReduceOp::Sum, Tensor::empty({3}, DType::F64), x, 1), Error);
}

}  // namespace
}  // namespace ember
