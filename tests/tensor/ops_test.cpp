// Pointwise ops on the CPU against plain loops in double (or exact integer arithmetic), on
// contiguous, misaligned, transposed, stepped-slice and broadcast operands of odd sizes.
#include "ember/tensor/ops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_support.hpp"
#include "tensor/op_test_util.hpp"

namespace ember {
namespace {

using testing::Layout;
using testing::make_input;
using testing::random_values;
using testing::read_as_double;
using testing::values_match;
using testing::wrap_to;

constexpr ops::UnaryOp kUnaryOps[] = {
    ops::UnaryOp::Neg,  ops::UnaryOp::Abs,    ops::UnaryOp::Exp,        ops::UnaryOp::Log,
    ops::UnaryOp::Sqrt, ops::UnaryOp::Rsqrt,  ops::UnaryOp::Tanh,       ops::UnaryOp::Sigmoid,
    ops::UnaryOp::Relu, ops::UnaryOp::Square, ops::UnaryOp::Reciprocal, ops::UnaryOp::Sign};
constexpr ops::BinaryOp kArithmeticOps[] = {ops::BinaryOp::Add, ops::BinaryOp::Sub,
                                            ops::BinaryOp::Mul, ops::BinaryOp::Div,
                                            ops::BinaryOp::Max, ops::BinaryOp::Min};
constexpr ops::BinaryOp kComparisonOps[] = {ops::BinaryOp::Eq, ops::BinaryOp::Ne,
                                            ops::BinaryOp::Lt, ops::BinaryOp::Le,
                                            ops::BinaryOp::Gt, ops::BinaryOp::Ge};

double unary_reference(ops::UnaryOp op, double x, DType dtype) {
  using ops::UnaryOp;
  if (is_floating(dtype)) {
    switch (op) {
      case UnaryOp::Neg:
        return -x;
      case UnaryOp::Abs:
        return std::fabs(x);
      case UnaryOp::Exp:
        return std::exp(x);
      case UnaryOp::Log:
        return std::log(x);
      case UnaryOp::Sqrt:
        return std::sqrt(x);
      case UnaryOp::Rsqrt:
        return 1.0 / std::sqrt(x);
      case UnaryOp::Tanh:
        return std::tanh(x);
      case UnaryOp::Sigmoid:
        return 1.0 / (1.0 + std::exp(-x));
      case UnaryOp::Relu:
        return x > 0 ? x : 0.0;
      case UnaryOp::Square:
        return x * x;
      case UnaryOp::Reciprocal:
        return 1.0 / x;
      case UnaryOp::Sign:
        return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    }
  }
  const long double v = x;
  switch (op) {
    case UnaryOp::Neg:
      return wrap_to(dtype, -v);
    case UnaryOp::Abs:
      return wrap_to(dtype, v < 0 ? -v : v);
    case UnaryOp::Relu:
      return wrap_to(dtype, v > 0 ? v : 0);
    case UnaryOp::Square:
      return wrap_to(dtype, v * v);
    case UnaryOp::Sign:
      return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0);
    default:
      break;
  }
  ADD_FAILURE() << "no integer reference for " << ops::op_name(op);
  return 0;
}

double binary_reference(ops::BinaryOp op, double a, double b, DType dtype) {
  using ops::BinaryOp;
  switch (op) {
    case BinaryOp::Eq:
      return a == b;
    case BinaryOp::Ne:
      return a != b;
    case BinaryOp::Lt:
      return a < b;
    case BinaryOp::Le:
      return a <= b;
    case BinaryOp::Gt:
      return a > b;
    case BinaryOp::Ge:
      return a >= b;
    case BinaryOp::Max:
      return std::max(a, b);
    case BinaryOp::Min:
      return std::min(a, b);
    default:
      break;
  }
  if (is_floating(dtype)) {
    switch (op) {
      case BinaryOp::Add:
        return a + b;
      case BinaryOp::Sub:
        return a - b;
      case BinaryOp::Mul:
        return a * b;
      case BinaryOp::Div:
        return a / b;
      default:
        break;
    }
  }
  const long double x = a, y = b;
  switch (op) {
    case BinaryOp::Add:
      return wrap_to(dtype, x + y);
    case BinaryOp::Sub:
      return wrap_to(dtype, x - y);
    case BinaryOp::Mul:
      return wrap_to(dtype, x * y);
    case BinaryOp::Div:
      return b == 0 ? 0.0 : wrap_to(dtype, std::trunc(x / y));
    default:
      break;
  }
  return 0;
}

// Input values in a domain where the op is defined and its results stay in range.
std::vector<double> op_inputs(std::mt19937_64& rng, std::int64_t n, DType dtype, bool positive) {
  if (is_floating(dtype)) return random_values(rng, n, dtype, positive ? 0.25 : -4.0, 4.0);
  if (dtype == DType::Bool) return random_values(rng, n, dtype, 0, 1);
  if (!is_signed(dtype) || positive) return random_values(rng, n, dtype, 0, 120);
  return random_values(rng, n, dtype, -60, 60);
}

// Nonzero divisors for floating types (so the reference is finite); zeros included for integers.
std::vector<double> divisor_inputs(std::mt19937_64& rng, std::int64_t n, DType dtype) {
  if (!is_floating(dtype)) {
    return random_values(rng, n, dtype, is_signed(dtype) ? -6 : 0, 6);
  }
  std::vector<double> v = random_values(rng, n, dtype, 0.5, 4.0);
  for (double& x : v) {
    if (rng() % 2 == 0) x = -x;
  }
  return v;
}

struct Case {
  Shape shape;
  Layout layout;
};

std::string describe(const Case& c) {
  return c.shape.to_string() + " " + testing::layout_name(c.layout);
}

const std::vector<Case>& single_operand_cases() {
  static const std::vector<Case> cases{
      {{0}, Layout::Contiguous},       {{1}, Layout::Contiguous},
      {{7}, Layout::Contiguous},       {{1023}, Layout::Contiguous},
      {{65537}, Layout::Contiguous},   {{1023}, Layout::Offset},
      {{65537}, Layout::Offset},       {{7}, Layout::SteppedSlice},
      {{1023}, Layout::SteppedSlice},  {{33, 17}, Layout::Transposed},
      {{3, 5, 7}, Layout::Transposed}, {{7, 13}, Layout::SteppedSlice},
      {{}, Layout::Contiguous},
  };
  return cases;
}

// The same without the largest sizes, for the sweeps with many combinations (the large sizes run
// through the same loops in the sweeps above).
std::vector<Case> lighter_cases() {
  std::vector<Case> cases;
  for (const Case& c : single_operand_cases()) {
    if (c.shape.numel() <= 1023 || c.layout == Layout::Contiguous) cases.push_back(c);
  }
  return cases;
}

// Sweeps with many combinations run the largest sizes (which take the multi-threaded loops) for
// a few dtypes only: the loops are the same for all.
bool large_sizes_for(DType dtype) {
  return dtype == DType::F32 || dtype == DType::I32 || dtype == DType::F16;
}

// ---- unary ------------------------------------------------------------------------------------

TEST(Ops, UnaryMatchesPlainLoopForEveryDTypeAndLayout) {
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    for (ops::UnaryOp op : kUnaryOps) {
      if (ops::unary_needs_floating(op) && !is_floating(dtype)) continue;
      const bool positive = op == ops::UnaryOp::Log || op == ops::UnaryOp::Sqrt ||
                            op == ops::UnaryOp::Rsqrt || op == ops::UnaryOp::Reciprocal;
      for (const Case& c : single_operand_cases()) {
        const Tensor in =
            make_input(op_inputs(rng, c.shape.numel(), dtype, positive), c.shape, dtype, c.layout);
        const Tensor out = Tensor::empty(c.shape, dtype);
        ops::unary(op, out, in);
        std::vector<double> expected;
        for (double x : read_as_double(in))
          expected.push_back(unary_reference(op, x, dtype));
        ASSERT_TRUE(values_match(read_as_double(out), expected, dtype))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << describe(c);
      }
    }
  }
}

TEST(Ops, UnaryInPlaceAndFunctionalForms) {
  Tensor x = Tensor::from_vector(std::vector<float>{-2, -0.5, 0, 3});
  ops::unary(ops::UnaryOp::Relu, x, x);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 0, 0, 3}));
  const Tensor y = ops::neg(Tensor::from_vector(std::vector<std::int32_t>{1, -2}));
  EXPECT_EQ(y.to_vector<std::int32_t>(), (std::vector<std::int32_t>{-1, 2}));
  EXPECT_EQ(ops::sqrt(Tensor::full({2, 3}, 4.0, DType::F64)).shape(), (Shape{2, 3}));
}

TEST(Ops, UnaryBroadcastsItsInputToTheOutput) {
  const Tensor row = Tensor::from_vector(std::vector<float>{1, -2, 3});
  const Tensor out = Tensor::empty({4, 3});
  ops::unary(ops::UnaryOp::Abs, out, row);
  for (std::int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.get<float>({i, 1}), 2.0f);
    EXPECT_EQ(out.get<float>({i, 2}), 3.0f);
  }
}

TEST(Ops, FloatingOnlyOpsRejectIntegersNamingTheOpAndDType) {
  const Tensor x = Tensor::zeros({3}, DType::I32);
  try {
    ops::exp(x);
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exp"), std::string::npos) << what;
    EXPECT_NE(what.find("i32"), std::string::npos) << what;
  }
  EXPECT_THROW(ops::unary(ops::UnaryOp::Neg, Tensor::zeros({3}, DType::Bool),
                          Tensor::zeros({3}, DType::Bool)),
               Error);
}

TEST(Ops, FloatingSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector(std::vector<float>{nan, -0.0f, inf, -inf});
  const auto relu = ops::relu(x).to_vector<float>();
  EXPECT_TRUE(std::isnan(relu[0]));
  EXPECT_EQ(relu[1], 0.0f);
  EXPECT_FALSE(std::signbit(relu[1]));  // relu(-0) is +0
  EXPECT_EQ(relu[2], inf);
  EXPECT_EQ(relu[3], 0.0f);
  const auto sig = ops::sigmoid(x).to_vector<float>();
  EXPECT_EQ(sig[2], 1.0f);
  EXPECT_EQ(sig[3], 0.0f);
  const auto sign = ops::unary(ops::UnaryOp::Sign, x).to_vector<float>();
  EXPECT_TRUE(std::isnan(sign[0]));
  EXPECT_EQ(sign[2], 1.0f);
  EXPECT_EQ(sign[3], -1.0f);
  const auto mx = ops::maximum(x, Tensor::zeros({4})).to_vector<float>();
  EXPECT_TRUE(std::isnan(mx[0]));  // NaN propagates through max
  const auto mn = ops::minimum(Tensor::zeros({4}), x).to_vector<float>();
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[3], -inf);
}

// ---- binary -----------------------------------------------------------------------------------

struct BinaryCase {
  Shape out, a, b;
  Layout la, lb;
};

std::string describe(const BinaryCase& c) {
  return "out " + c.out.to_string() + " a " + c.a.to_string() + " " + testing::layout_name(c.la) +
         " b " + c.b.to_string() + " " + testing::layout_name(c.lb);
}

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases{
      {{0}, {0}, {0}, Layout::Contiguous, Layout::Contiguous},
      {{1}, {1}, {1}, Layout::Contiguous, Layout::Contiguous},
      {{7}, {7}, {7}, Layout::Contiguous, Layout::Contiguous},
      {{1023}, {1023}, {1023}, Layout::Contiguous, Layout::Offset},
      {{65537}, {65537}, {65537}, Layout::Contiguous, Layout::Contiguous},
      {{65537}, {65537}, {65537}, Layout::Offset, Layout::Offset},
      {{33, 17}, {33, 17}, {33, 17}, Layout::Transposed, Layout::SteppedSlice},
      {{3, 5, 7}, {3, 5, 7}, {3, 5, 7}, Layout::SteppedSlice, Layout::Transposed},
      {{9, 31}, {9, 31}, {31}, Layout::Contiguous, Layout::Contiguous},
      {{9, 31}, {9, 31}, {9, 1}, Layout::Transposed, Layout::Contiguous},
      {{9, 31}, {1, 31}, {9, 1}, Layout::Contiguous, Layout::Contiguous},
      {{1023}, {1023}, {}, Layout::Contiguous, Layout::Contiguous},
      {{4, 5, 6}, {4, 1, 6}, {5, 1}, Layout::SteppedSlice, Layout::Contiguous},
  };
  return cases;
}

TEST(Ops, BinaryArithmeticMatchesPlainLoop) {
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    for (ops::BinaryOp op : kArithmeticOps) {
      for (const BinaryCase& c : binary_cases()) {
        const Tensor a = make_input(op_inputs(rng, c.a.numel(), dtype, false), c.a, dtype, c.la);
        const std::vector<double> bv = op == ops::BinaryOp::Div
                                           ? divisor_inputs(rng, c.b.numel(), dtype)
                                           : op_inputs(rng, c.b.numel(), dtype, false);
        const Tensor b = make_input(bv, c.b, dtype, c.lb);
        const Tensor out = Tensor::empty(c.out, dtype);
        ops::binary(op, out, a, b);
        const auto va = read_as_double(a.expand(c.out)), vb = read_as_double(b.expand(c.out));
        std::vector<double> expected;
        for (std::size_t i = 0; i < va.size(); ++i) {
          expected.push_back(binary_reference(op, va[i], vb[i], dtype));
        }
        ASSERT_TRUE(values_match(read_as_double(out), expected, dtype))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << describe(c);
      }
    }
  }
}

TEST(Ops, ComparisonsWriteBoolForEveryDType) {
  auto rng = testing::make_rng();
  std::vector<DType> dtypes(std::begin(kAllDTypes), std::end(kAllDTypes));
  for (DType dtype : dtypes) {
    for (ops::BinaryOp op : kComparisonOps) {
      for (const BinaryCase& c : binary_cases()) {
        if (c.out.numel() > 1023 && !large_sizes_for(dtype)) continue;
        // Few distinct values, so that equality happens often.
        const double hi = dtype == DType::Bool ? 1 : 3;
        const Tensor a =
            make_input(random_values(rng, c.a.numel(), dtype, 0, hi), c.a, dtype, c.la);
        const Tensor b =
            make_input(random_values(rng, c.b.numel(), dtype, 0, hi), c.b, dtype, c.lb);
        const Tensor out = Tensor::empty(c.out, DType::Bool);
        ops::binary(op, out, a, b);
        const auto va = read_as_double(a.expand(c.out)), vb = read_as_double(b.expand(c.out));
        std::vector<double> expected;
        for (std::size_t i = 0; i < va.size(); ++i) {
          expected.push_back(binary_reference(op, va[i], vb[i], dtype));
        }
        ASSERT_TRUE(values_match(read_as_double(out), expected, DType::Bool))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << describe(c);
      }
    }
  }
}

TEST(Ops, ComparisonIntoANumericOutput) {
  const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3});
  const Tensor b = Tensor::from_vector(std::vector<float>{2, 2, 2});
  const Tensor out = Tensor::full({3}, 9.0, DType::F32);
  ops::binary(ops::BinaryOp::Ge, out, a, b);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 1, 1}));
  const Tensor flags = ops::binary(ops::BinaryOp::Lt, a, b);
  EXPECT_EQ(flags.dtype(), DType::Bool);
  EXPECT_EQ(flags.to_vector<bool>(), (std::vector<bool>{true, false, false}));
}

TEST(Ops, BinaryScalarMatchesPlainLoop) {
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    const double scalars[] = {is_floating(dtype) ? 1.75 : 3.0, is_floating(dtype) ? -0.5 : 0.0};
    for (double s : scalars) {
      std::vector<ops::BinaryOp> all(std::begin(kArithmeticOps), std::end(kArithmeticOps));
      all.insert(all.end(), std::begin(kComparisonOps), std::end(kComparisonOps));
      for (ops::BinaryOp op : all) {
        if (ops::is_comparison(op) && s != scalars[0]) continue;
        for (const Case& c : lighter_cases()) {
          if (c.shape.numel() > 1023 && !large_sizes_for(dtype)) continue;
          const Tensor a =
              make_input(op_inputs(rng, c.shape.numel(), dtype, false), c.shape, dtype, c.layout);
          const Tensor out = ops::binary_scalar(op, a, s);
          EXPECT_EQ(out.dtype(), ops::is_comparison(op) ? DType::Bool : dtype);
          std::vector<double> expected;
          // The scalar is taken in the op's compute type: f32 for f32, f16 and bf16.
          const bool f32_math = dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
          const double sv = f32_math ? static_cast<double>(static_cast<float>(s)) : s;
          for (double x : read_as_double(a))
            expected.push_back(binary_reference(op, x, sv, dtype));
          ASSERT_TRUE(values_match(read_as_double(out), expected,
                                   ops::is_comparison(op) ? DType::Bool : dtype))
              << ops::op_name(op) << " " << s << " " << dtype_name(dtype) << " " << describe(c);
        }
      }
    }
  }
}

TEST(Ops, ScalarsMustFitIntegerDTypes) {
  const Tensor x = Tensor::zeros({4}, DType::I32);
  try {
    ops::binary_scalar(ops::BinaryOp::Mul, x, 0.5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0.5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::binary_scalar(ops::BinaryOp::Add, Tensor::zeros({2}, DType::U8), 256.0), Error);
  EXPECT_THROW(ops::binary_scalar(ops::BinaryOp::Add, Tensor::zeros({2}, DType::U8), -1.0), Error);
  EXPECT_THROW(ops::axpy(x, 1.5, x), Error);
  EXPECT_THROW(ops::fill(x, 2.5), Error);
  EXPECT_THROW(ops::fill(Tensor::zeros({2}, DType::I8), 128), Error);
  EXPECT_NO_THROW(ops::fill(Tensor::zeros({2}, DType::I8), -128));
}

// ---- integer semantics ------------------------------------------------------------------------

TEST(Ops, IntegerDivisionTruncatesAndDivisionByZeroIsZero) {
  const Tensor a = Tensor::from_vector(std::vector<std::int32_t>{7, -7, 7, -7, 5, 0, INT32_MIN});
  const Tensor b = Tensor::from_vector(std::vector<std::int32_t>{2, 2, -2, -2, 0, 0, -1});
  EXPECT_EQ(ops::div(a, b).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{3, -3, -3, 3, 0, 0, INT32_MIN}));
  const Tensor u = Tensor::from_vector(std::vector<std::uint64_t>{9, 9, 0});
  const Tensor v = Tensor::from_vector(std::vector<std::uint64_t>{4, 0, 0});
  EXPECT_EQ(ops::div(u, v).to_vector<std::uint64_t>(), (std::vector<std::uint64_t>{2, 0, 0}));
  EXPECT_EQ(ops::binary_scalar(ops::BinaryOp::Div, a, 0).to_vector<std::int32_t>(),
            std::vector<std::int32_t>(7, 0));
  const Tensor i8 = Tensor::from_vector(std::vector<std::int8_t>{-128, 100});
  EXPECT_EQ(ops::binary_scalar(ops::BinaryOp::Div, i8, -1).to_vector<std::int8_t>(),
            (std::vector<std::int8_t>{-128, -100}));
}

TEST(Ops, IntegerArithmeticWraps) {
  const Tensor a = Tensor::from_vector(std::vector<std::int32_t>{INT32_MAX, INT32_MIN, INT32_MIN});
  const Tensor one = Tensor::from_vector(std::vector<std::int32_t>{1, 1, 1});
  EXPECT_EQ(ops::add(a, one).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{INT32_MIN, INT32_MIN + 1, INT32_MIN + 1}));
  EXPECT_EQ(ops::sub(a, one).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{INT32_MAX - 1, INT32_MAX, INT32_MAX}));
  EXPECT_EQ(ops::abs(a).to_vector<std::int32_t>()[1], INT32_MIN);
  EXPECT_EQ(ops::neg(a).to_vector<std::int32_t>()[1], INT32_MIN);
  const Tensor big = Tensor::from_vector(std::vector<std::int64_t>{INT64_MAX});
  EXPECT_EQ(ops::mul(big, big).to_vector<std::int64_t>()[0], 1);  // (2^63-1)^2 mod 2^64
  const Tensor u8 = Tensor::from_vector(std::vector<std::uint8_t>{0, 1, 200});
  EXPECT_EQ(ops::neg(u8).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{0, 255, 56}));
  EXPECT_EQ(ops::abs(u8).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{0, 1, 200}));
  EXPECT_EQ(ops::unary(ops::UnaryOp::Sign, u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{0, 1, 1}));
  EXPECT_EQ(ops::add(u8, 100.0).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{100, 101, 44}));
}

// ---- axpy, clamp, where, fill -------------------------------------------------------------------

TEST(Ops, AxpyMatchesPlainLoop) {
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    const double alpha = is_floating(dtype) ? 0.75 : (is_signed(dtype) ? -3.0 : 3.0);
    for (const BinaryCase& c : binary_cases()) {
      if (!(c.a == c.out)) continue;  // y is the output: it never broadcasts
      const Tensor y = make_input(op_inputs(rng, c.a.numel(), dtype, false), c.a, dtype, c.la);
      const Tensor x = make_input(op_inputs(rng, c.b.numel(), dtype, false), c.b, dtype, c.lb);
      const auto vy = read_as_double(y), vx = read_as_double(x.expand(c.out));
      ops::axpy(y, alpha, x);
      std::vector<double> expected;
      for (std::size_t i = 0; i < vy.size(); ++i) {
        expected.push_back(is_floating(dtype)
                               ? vy[i] + alpha * vx[i]
                               : wrap_to(dtype, static_cast<long double>(vy[i]) + alpha * vx[i]));
      }
      ASSERT_TRUE(values_match(read_as_double(y), expected, dtype, 2.0))
          << dtype_name(dtype) << " " << describe(c);
    }
  }
}

TEST(Ops, ClampMatchesPlainLoopAndRoundsIntegerBoundsInward) {
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    const double low = is_signed(dtype) ? -1.5 : 2.5, high = 7.25;
    for (const Case& c : single_operand_cases()) {
      const Tensor in =
          make_input(op_inputs(rng, c.shape.numel(), dtype, false), c.shape, dtype, c.layout);
      const Tensor out = ops::clamp(in, low, high);
      const double l = is_floating(dtype) ? low : std::ceil(low);
      const double h = is_floating(dtype) ? high : std::floor(high);
      std::vector<double> expected;
      for (double x : read_as_double(in))
        expected.push_back(std::min(std::max(x, l), h));
      // The bounds themselves round to 16-bit floats.
      ASSERT_TRUE(values_match(read_as_double(out), expected, dtype, 2.0))
          << dtype_name(dtype) << " " << describe(c);
    }
  }
  EXPECT_THROW(ops::clamp(Tensor::zeros({2}, DType::I32), 0.25, 0.75), Error);  // no integer
  EXPECT_THROW(ops::clamp(Tensor::zeros({2}), 1.0, 0.0), Error);
  // Bounds beyond the type's range saturate.
  const Tensor u8 = Tensor::from_vector(std::vector<std::uint8_t>{0, 5, 255});
  EXPECT_EQ(ops::clamp(u8, -10, 1000).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{0, 5, 255}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(ops::clamp(Tensor::full({1}, nan), 0, 1).item<float>()));
}

TEST(Ops, WhereMatchesPlainLoopForEveryDType) {
  auto rng = testing::make_rng();
  for (DType dtype : kAllDTypes) {
    for (DType cond_dtype : {DType::Bool, DType::F32, DType::I64}) {
      for (const BinaryCase& c : binary_cases()) {
        if (c.out.numel() > 1023 && !large_sizes_for(dtype)) continue;
        // Zeros and ones (as any dtype), so that both branches are taken.
        const Tensor cond =
            make_input(random_values(rng, c.b.numel(), DType::I64, 0, 1), c.b, cond_dtype, c.lb);
        const Tensor a = make_input(random_values(rng, c.a.numel(), dtype, 0, 1), c.a, dtype, c.la);
        const Tensor b = make_input(random_values(rng, c.out.numel(), dtype, 0, 1), c.out, dtype,
                                    Layout::Contiguous);
        const Tensor out = ops::where(cond, a, b);
        ASSERT_EQ(out.shape(), c.out);
        const auto vc = read_as_double(cond.expand(c.out)), va = read_as_double(a.expand(c.out)),
                   vb = read_as_double(b);
        std::vector<double> expected;
        for (std::size_t i = 0; i < vc.size(); ++i)
          expected.push_back(vc[i] != 0 ? va[i] : vb[i]);
        ASSERT_TRUE(values_match(read_as_double(out), expected, dtype))
            << dtype_name(dtype) << " cond " << dtype_name(cond_dtype) << " " << describe(c);
      }
    }
  }
}

TEST(Ops, FillWritesOnlyTheViewForEveryDType) {
  for (DType dtype : kAllDTypes) {
    const Tensor base = Tensor::zeros({5, 9}, dtype);
    const Tensor view = base.slice(1, 1, 9, 3).transpose(0, 1);  // [3, 5], strided
    ops::fill(view, 1.0);
    for (std::int64_t i = 0; i < 5; ++i) {
      for (std::int64_t j = 0; j < 9; ++j) {
        const double expected = (j % 3 == 1) ? 1.0 : 0.0;
        ASSERT_EQ(base.get_double({i, j}), expected) << dtype_name(dtype) << " " << i << "," << j;
      }
    }
    const Tensor big = Tensor::empty({65537}, dtype);
    ops::fill(big, dtype == DType::Bool ? 1.0 : 3.0);
    for (double v : read_as_double(big))
      ASSERT_EQ(v, dtype == DType::Bool ? 1.0 : 3.0);
  }
}

// ---- copy and cast ------------------------------------------------------------------------------

double cast_reference(double v, DType to) {
  switch (to) {
    case DType::Bool:
      return v != 0 ? 1 : 0;
    case DType::F32:
      return static_cast<float>(v);
    case DType::F64:
      return v;
    case DType::F16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BF16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    default:
      return std::trunc(v);
  }
}

TEST(Ops, CastEveryDTypePairInEveryLayout) {
  auto rng = testing::make_rng();
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      for (const Case& c : lighter_cases()) {
        if (c.shape.numel() > 1023 && from != to) continue;  // 65537 once per dtype
        // Values every dtype holds: 0..100 for integers, with fractions for floating inputs.
        std::vector<double> values = from == DType::Bool
                                         ? random_values(rng, c.shape.numel(), from, 0, 1)
                                         : random_values(rng, c.shape.numel(), from, 0, 100);
        const Tensor in = make_input(values, c.shape, from, c.layout);
        const Tensor out = Tensor::empty(c.shape, to);
        ops::copy(out, in);
        std::vector<double> expected;
        for (double v : read_as_double(in))
          expected.push_back(cast_reference(v, to));
        ASSERT_TRUE(values_match(read_as_double(out), expected, to, 0.0))
            << dtype_name(from) << " -> " << dtype_name(to) << " " << describe(c);
      }
    }
  }
}

TEST(Ops, FloatToIntegerSaturatesAndNanIsZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor f = Tensor::from_vector(std::vector<float>{1e10f, -1e10f, nan, -2.9f, 2.9f});
  EXPECT_EQ(f.to(DType::I32).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{INT32_MAX, INT32_MIN, 0, -2, 2}));
  EXPECT_EQ(f.to(DType::U8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{255, 0, 0, 0, 2}));
  EXPECT_EQ(f.to(DType::I64).to_vector<std::int64_t>()[0], 10000000000LL);
  const Tensor d = Tensor::from_vector(std::vector<double>{1e30, -1e30});
  EXPECT_EQ(d.to(DType::I64).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{INT64_MAX, INT64_MIN}));
  EXPECT_EQ(d.to(DType::U64).to_vector<std::uint64_t>(),
            (std::vector<std::uint64_t>{UINT64_MAX, 0}));
  EXPECT_EQ(f.to(DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true, true, true, true}));
}

TEST(Ops, CopyThroughTransposesAndPermutes) {
  // Larger than a tile in both dimensions, with ragged edges.
  auto rng = testing::make_rng();
  const Shape shape{67, 45};
  const auto values = random_values(rng, shape.numel(), DType::F32, -1, 1);
  const Tensor in = make_input(values, shape, DType::F32, Layout::Transposed);
  const Tensor out = Tensor::empty(shape);
  ops::copy(out, in);
  EXPECT_TRUE(values_match(read_as_double(out), read_as_double(in), DType::F32, 0.0));
  // A 3-D permutation, copied into a permuted destination.
  const Tensor cube = testing::host_tensor(random_values(rng, 40 * 35 * 6, DType::F32, -1, 1),
                                           {40, 35, 6}, DType::F32);
  const Tensor dst = Tensor::empty({35, 6, 40}).permute({1, 2, 0});  // a [6, 40, 35] view
  ops::copy(dst, cube.permute({2, 0, 1}));
  EXPECT_TRUE(
      values_match(read_as_double(dst), read_as_double(cube.permute({2, 0, 1})), DType::F32, 0.0));
}

// ---- errors -------------------------------------------------------------------------------------

TEST(Ops, DTypeMismatchNamesTheOpAndBothDTypes) {
  try {
    ops::add(Tensor::zeros({3}), Tensor::zeros({3}, DType::F16));
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("add"), std::string::npos) << what;
    EXPECT_NE(what.find("f32"), std::string::npos) << what;
    EXPECT_NE(what.find("f16"), std::string::npos) << what;
  }
  EXPECT_THROW(ops::binary(ops::BinaryOp::Add, Tensor::zeros({3}, DType::F64), Tensor::zeros({3}),
                           Tensor::zeros({3})),
               Error);
  EXPECT_THROW(ops::add(Tensor::zeros({3}, DType::Bool), Tensor::zeros({3}, DType::Bool)), Error);
  EXPECT_THROW(ops::where(Tensor::zeros({3}, DType::Bool), Tensor::zeros({3}),
                          Tensor::zeros({3}, DType::I32)),
               Error);
}

TEST(Ops, ShapeMismatchShowsBothShapes) {
  try {
    ops::binary(ops::BinaryOp::Mul, Tensor::empty({4, 3}), Tensor::zeros({4, 3}),
                Tensor::zeros({4, 2}));
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[4, 2]"), std::string::npos) << what;
    EXPECT_NE(what.find("[4, 3]"), std::string::npos) << what;
  }
  // Inputs broadcast to the output, never the output to the inputs.
  EXPECT_THROW(ops::unary(ops::UnaryOp::Neg, Tensor::empty({3}), Tensor::zeros({2, 3})), Error);
  EXPECT_THROW(ops::add(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), Error);
}

TEST(Ops, PartialOverlapIsAnErrorButInPlaceIsFine) {
  const Tensor x = Tensor::arange(10, DType::F32);
  try {
    ops::unary(ops::UnaryOp::Neg, x.slice(0, 1, 10), x.slice(0, 0, 9));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlaps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::copy(x.reshape({2, 5}), x.reshape({5, 2}).transpose(0, 1)), Error);
  ops::binary(ops::BinaryOp::Add, x, x, x);
  EXPECT_EQ(x.get<float>({3}), 6.0f);
  // Disjoint halves of one allocation are fine.
  ops::copy(x.slice(0, 0, 5), x.slice(0, 5, 10));
  EXPECT_EQ(x.get<float>({0}), 10.0f);
}

TEST(Ops, UndefinedTensorsAreErrors) {
  EXPECT_THROW(ops::relu(Tensor()), Error);
  EXPECT_THROW(ops::fill(Tensor(), 1.0), Error);
  EXPECT_THROW(ops::add(Tensor(), Tensor::zeros({1})), Error);
}

}  // namespace
}  // namespace ember
