// Pointwise ops and reductions on CUDA against the CPU, on the same random inputs in the same
// layouts (contiguous, misaligned, transposed, stepped slices, broadcast), for every dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>

#include "ember/core/stream.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/pointwise_plan.hpp"
#include "ember/tensor/reduce.hpp"
#include "support/test_support.hpp"
#include "tensor/op_test_util.hpp"

namespace ember {
namespace {

using testing::Layout;
using testing::make_input;
using testing::random_values;
using testing::read_as_double;
using testing::values_match;

const Place kGpu = Place::cuda(0);

constexpr ops::UnaryOp kUnaryOps[] = {
    ops::UnaryOp::Neg,  ops::UnaryOp::Abs,    ops::UnaryOp::Exp,        ops::UnaryOp::Log,
    ops::UnaryOp::Sqrt, ops::UnaryOp::Rsqrt,  ops::UnaryOp::Tanh,       ops::UnaryOp::Sigmoid,
    ops::UnaryOp::Relu, ops::UnaryOp::Square, ops::UnaryOp::Reciprocal, ops::UnaryOp::Sign};
constexpr ops::BinaryOp kBinaryOps[] = {ops::BinaryOp::Add, ops::BinaryOp::Sub, ops::BinaryOp::Mul,
                                        ops::BinaryOp::Div, ops::BinaryOp::Max, ops::BinaryOp::Min,
                                        ops::BinaryOp::Eq,  ops::BinaryOp::Ne,  ops::BinaryOp::Lt,
                                        ops::BinaryOp::Le,  ops::BinaryOp::Gt,  ops::BinaryOp::Ge};

std::vector<double> host_values(const Tensor& t) {
  return read_as_double(t.place().is_cuda() ? t.to(Place::host()) : t);
}

std::vector<double> inputs(std::mt19937_64& rng, std::int64_t n, DType dtype, bool positive) {
  if (is_floating(dtype)) return random_values(rng, n, dtype, positive ? 0.25 : -4.0, 4.0);
  if (dtype == DType::Bool) return random_values(rng, n, dtype, 0, 1);
  if (!is_signed(dtype) || positive) return random_values(rng, n, dtype, 0, 120);
  return random_values(rng, n, dtype, -60, 60);
}

struct Case {
  Shape shape;
  Layout layout;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {{0}, Layout::Contiguous},       {{1}, Layout::Contiguous},
      {{7}, Layout::Contiguous},       {{1023}, Layout::Contiguous},
      {{65537}, Layout::Contiguous},   {{1023}, Layout::Offset},
      {{65537}, Layout::Offset},       {{1023}, Layout::SteppedSlice},
      {{33, 17}, Layout::Transposed},  {{3, 5, 7}, Layout::Transposed},
      {{7, 13}, Layout::SteppedSlice}, {{}, Layout::Contiguous}};
  return all;
}

TEST(OpsGpu, UnaryMatchesCpuForEveryDTypeAndLayout) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    for (ops::UnaryOp op : kUnaryOps) {
      if (ops::unary_needs_floating(op) && !is_floating(dtype)) continue;
      const bool positive = op == ops::UnaryOp::Log || op == ops::UnaryOp::Sqrt ||
                            op == ops::UnaryOp::Rsqrt || op == ops::UnaryOp::Reciprocal;
      for (const Case& c : cases()) {
        const auto values = inputs(rng, c.shape.numel(), dtype, positive);
        const Tensor cpu = ops::unary(op, make_input(values, c.shape, dtype, c.layout));
        const Tensor gpu = ops::unary(op, make_input(values, c.shape, dtype, c.layout, kGpu));
        ASSERT_EQ(gpu.place(), kGpu);
        ASSERT_TRUE(values_match(host_values(gpu), host_values(cpu), dtype))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << c.shape << " "
            << testing::layout_name(c.layout);
      }
    }
  }
}

struct BinaryCase {
  Shape out, a, b;
  Layout la, lb;
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> all{
      {{0}, {0}, {0}, Layout::Contiguous, Layout::Contiguous},
      {{7}, {7}, {7}, Layout::Contiguous, Layout::Contiguous},
      {{65537}, {65537}, {65537}, Layout::Contiguous, Layout::Contiguous},
      {{65537}, {65537}, {65537}, Layout::Offset, Layout::Offset},   // equally misaligned
      {{1023}, {1023}, {1023}, Layout::Contiguous, Layout::Offset},  // differently misaligned
      {{33, 17}, {33, 17}, {33, 17}, Layout::Transposed, Layout::SteppedSlice},
      {{9, 31}, {9, 31}, {31}, Layout::Contiguous, Layout::Contiguous},
      {{9, 31}, {1, 31}, {9, 1}, Layout::Contiguous, Layout::Contiguous},
      {{1023}, {1023}, {}, Layout::Offset, Layout::Contiguous},  // repeated value
      {{4, 5, 6}, {4, 1, 6}, {5, 1}, Layout::SteppedSlice, Layout::Contiguous},
  };
  return all;
}

TEST(OpsGpu, BinaryMatchesCpuForEveryDTypeAndLayout) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType dtype : kAllDTypes) {
    for (ops::BinaryOp op : kBinaryOps) {
      if (!ops::is_comparison(op) && dtype == DType::Bool) continue;
      for (const BinaryCase& c : binary_cases()) {
        const auto va = inputs(rng, c.a.numel(), dtype, false);
        // Nonzero floating divisors; integer ones include zero (defined as 0).
        auto vb = inputs(rng, c.b.numel(), dtype, op == ops::BinaryOp::Div && is_floating(dtype));
        const Tensor cpu =
            ops::binary(op, make_input(va, c.a, dtype, c.la), make_input(vb, c.b, dtype, c.lb));
        const Tensor gpu = ops::binary(op, make_input(va, c.a, dtype, c.la, kGpu),
                                       make_input(vb, c.b, dtype, c.lb, kGpu));
        ASSERT_TRUE(values_match(host_values(gpu), host_values(cpu), cpu.dtype()))
            << ops::op_name(op) << " " << dtype_name(dtype) << " out " << c.out << " a " << c.a
            << " " << testing::layout_name(c.la) << " b " << c.b << " "
            << testing::layout_name(c.lb);
      }
    }
  }
}

TEST(OpsGpu, ScalarAxpyClampWhereMatchCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType dtype : testing::kNumericDTypes) {
    const double s = is_floating(dtype) ? 0.3 : 3.0;
    for (const Case& c : cases()) {
      const auto v = inputs(rng, c.shape.numel(), dtype, false);
      const auto w = inputs(rng, c.shape.numel(), dtype, false);
      const Tensor hx = make_input(v, c.shape, dtype, c.layout);
      const Tensor dx = make_input(v, c.shape, dtype, c.layout, kGpu);
      const std::string where = std::string(dtype_name(dtype)) + " " + c.shape.to_string() + " " +
                                testing::layout_name(c.layout);
      for (ops::BinaryOp op : kBinaryOps) {
        const Tensor cpu = ops::binary_scalar(op, hx, s);
        const Tensor gpu = ops::binary_scalar(op, dx, s);
        ASSERT_TRUE(values_match(host_values(gpu), host_values(cpu), cpu.dtype()))
            << "scalar " << ops::op_name(op) << " " << where;
      }
      const Tensor hy = make_input(w, c.shape, dtype, c.layout);
      const Tensor dy = make_input(w, c.shape, dtype, c.layout, kGpu);
      ops::axpy(hy, is_signed(dtype) ? -2.0 : 2.0, hx);
      ops::axpy(dy, is_signed(dtype) ? -2.0 : 2.0, dx);
      ASSERT_TRUE(values_match(host_values(dy), host_values(hy), dtype, 2.0)) << "axpy " << where;
      ASSERT_TRUE(values_match(host_values(ops::clamp(dx, 1.0, 9.5)),
                               host_values(ops::clamp(hx, 1.0, 9.5)), dtype))
          << "clamp " << where;
      const auto flags = random_values(rng, c.shape.numel(), DType::I64, 0, 1);
      for (DType cond_dtype : {DType::Bool, DType::I32}) {
        const Tensor cpu = ops::where(make_input(flags, c.shape, cond_dtype, c.layout), hx, hy);
        const Tensor gpu =
            ops::where(make_input(flags, c.shape, cond_dtype, c.layout, kGpu), dx, dy);
        ASSERT_TRUE(values_match(host_values(gpu), host_values(cpu), dtype)) << "where " << where;
      }
    }
  }
}

TEST(OpsGpu, FillAndCastEveryDTypePair) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      for (const Case& c : cases()) {
        // Past the integer ranges too, to check saturation: floats up to 1e3, with fractions.
        const auto values = is_floating(from)
                                ? random_values(rng, c.shape.numel(), from, -300, 1000)
                                : inputs(rng, c.shape.numel(), from, false);
        const Tensor cpu = make_input(values, c.shape, from, c.layout).to(to);
        const Tensor gpu_out = Tensor::empty(c.shape, to, kGpu);
        ops::copy(gpu_out, make_input(values, c.shape, from, c.layout, kGpu));
        ASSERT_TRUE(values_match(host_values(gpu_out), host_values(cpu), to, 0.0))
            << dtype_name(from) << " -> " << dtype_name(to) << " " << c.shape << " "
            << testing::layout_name(c.layout);
      }
    }
    // Fill, into a strided view, leaves the rest alone.
    const Tensor base = Tensor::zeros({5, 9}, from, kGpu);
    ops::fill(base.slice(1, 1, 9, 3), 1.0);
    const auto got = host_values(base);
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], (i % 9) % 3 == 1 ? 1.0 : 0.0) << dtype_name(from) << " element " << i;
    }
    const Tensor big = Tensor::full({65537}, 1.0, from, kGpu);
    for (double v : host_values(big))
      ASSERT_EQ(v, 1.0) << dtype_name(from);
  }
}

// Random shapes of rank 2 to 8 and random permutations: every strided copy turns linear indices
// into offsets with FastDivmod over the shape's sizes; the result must equal the CPU's.
TEST(OpsGpu, FastDivisionIndexMathThroughStridedOps) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = 2 + static_cast<int>(rng() % 7);
    Shape shape;
    std::int64_t numel = 1;
    for (int d = 0; d < rank; ++d) {
      const std::int64_t limit = std::max<std::int64_t>(2, (1 << 18) / numel);
      const std::int64_t size =
          1 + static_cast<std::int64_t>(rng() % std::min<std::int64_t>(limit, 37));
      shape.push_back(size);
      numel *= size;
    }
    std::vector<std::int64_t> order(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const Dims perm(order);
    const auto values = random_values(rng, numel, DType::I32, -1000000, 1000000);
    const Tensor h = testing::host_tensor(values, shape, DType::I32);
    const Tensor d = h.to(kGpu);
    // A permuted read with a cast (element-wise path) and a permuted same-dtype copy (tiled
    // where it applies), plus a stepped slice of the permuted view.
    const Tensor cpu_cast = h.permute(perm).to(DType::F64);
    const Tensor gpu_cast = ops::cast(d.permute(perm), DType::F64);
    ASSERT_TRUE(values_match(host_values(gpu_cast), host_values(cpu_cast), DType::F64, 0.0))
        << shape << " permuted " << perm;
    const Tensor gpu_copy = d.permute(perm).contiguous();
    ASSERT_TRUE(
        values_match(host_values(gpu_copy), host_values(h.permute(perm).contiguous()), DType::I32))
        << shape << " permuted " << perm;
    const int dim = static_cast<int>(rng() % static_cast<std::uint64_t>(rank));
    const Tensor cpu_step =
        ops::binary_scalar(ops::BinaryOp::Add, h.permute(perm).slice(dim, 0, 1 << 20, 2), 1);
    const Tensor gpu_step =
        ops::binary_scalar(ops::BinaryOp::Add, d.permute(perm).slice(dim, 0, 1 << 20, 2), 1);
    ASSERT_TRUE(values_match(host_values(gpu_step), host_values(cpu_step), DType::I32))
        << shape << " permuted " << perm << " stepped along " << dim;
  }
}

TEST(OpsGpu, TransposeCopiesTileCorrectly) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType dtype : {DType::U8, DType::F16, DType::F32, DType::F64}) {
    for (Shape shape : {Shape{67, 45}, Shape{32, 32}, Shape{1000, 33}, Shape{5, 70, 40}}) {
      const auto values = random_values(rng, shape.numel(), DType::I32, 0, 100);
      const Tensor h = testing::host_tensor(values, shape, dtype);
      const Tensor d = h.to(kGpu);
      const int r = shape.size();
      const Tensor cpu = h.transpose(r - 1, r - 2).contiguous();
      const Tensor gpu = d.transpose(r - 1, r - 2).contiguous();
      ASSERT_TRUE(values_match(host_values(gpu), host_values(cpu), dtype, 0.0))
          << dtype_name(dtype) << " " << shape;
      // Into a transposed destination from a contiguous source.
      const Tensor dst = Tensor::empty(shape, dtype, kGpu);
      ops::copy(dst.transpose(r - 1, r - 2), d.transpose(r - 1, r - 2));
      ASSERT_TRUE(values_match(host_values(dst), values, dtype, 0.0)) << dtype_name(dtype);
    }
  }
}

TEST(OpsGpu, WorkBeyondThirtyTwoBitIndexing) {
  EMBER_REQUIRE_GPU();
  const DeviceMemoryInfo memory = device_memory_info(0);
  // u8 elements, 2 GiB per tensor; enough for the 65537 x 32771 matrix below.
  const std::int64_t n = (std::int64_t{1} << 31) + 262147;
  if (memory.free_bytes < 4 * static_cast<unsigned long long>(n)) {
    GTEST_SKIP() << "needs " << 4 * n << " bytes of free device memory, has " << memory.free_bytes;
  }
  const Tensor a = Tensor::full({n}, 3.0, DType::U8, kGpu);
  const Tensor b = Tensor::empty({n}, DType::U8, kGpu);
  ops::fill(b.slice(0, 0, n, 2), 4.0);  // strided pieces past 2^31
  ops::fill(b.slice(0, 1, n, 2), 5.0);
  const Tensor c = ops::add(a, b);  // vectorised pieces
  for (std::int64_t start : {std::int64_t{0}, (std::int64_t{1} << 31) - 2048, n - 4096}) {
    const auto got = c.slice(0, start, start + 4096).to(Place::host()).to_vector<std::uint8_t>();
    for (std::int64_t i = 0; i < 4096; ++i) {
      ASSERT_EQ(got[static_cast<std::size_t>(i)], (start + i) % 2 == 0 ? 7 : 8) << start + i;
    }
  }
  // The all-element reduction over both 2^30-element pieces and the rest: a largest and a
  // smallest element placed past 2^31, and the u8 sum (wrapping) and mean (truncating) of all.
  const std::int64_t high = n - 5, low = (std::int64_t{1} << 31) + 11;  // even: 7; odd: 8
  ops::fill(c.slice(0, high, high + 1), 200.0);
  ops::fill(c.slice(0, low, low + 1), 1.0);
  const std::uint64_t evens = static_cast<std::uint64_t>(n + 1) / 2;
  const std::uint64_t odds = static_cast<std::uint64_t>(n) - evens;
  const std::uint64_t total = 7 * evens + 8 * odds - 7 + 200 - 8 + 1;
  auto item = [](const Tensor& t) { return t.to(Place::host()).item<std::uint8_t>(); };
  EXPECT_EQ(item(ops::reduce_all(ops::ReduceOp::Max, c)), 200);
  EXPECT_EQ(item(ops::reduce_all(ops::ReduceOp::Min, c)), 1);
  EXPECT_EQ(item(ops::reduce_all(ops::ReduceOp::Sum, c)), static_cast<std::uint8_t>(total % 256));
  EXPECT_EQ(item(ops::reduce_all(ops::ReduceOp::Mean, c)),
            static_cast<std::uint8_t>(total / static_cast<std::uint64_t>(n)));
  // A transposed view of more than 2^31 elements: element-wise pieces (not tiled).
  const std::int64_t rows = 65537, cols = 32771;  // 2.15e9 elements
  const Tensor m = a.slice(0, 0, rows * cols).reshape({rows, cols});
  ops::fill(m.select(0, rows - 1), 9.0);  // a last row distinguishable from the rest
  const Tensor t = b.slice(0, 0, rows * cols).reshape({cols, rows});
  ops::copy(t, m.transpose(0, 1));
  EXPECT_EQ(t.get<std::uint8_t>({cols - 1, rows - 1}), 9);
  EXPECT_EQ(t.get<std::uint8_t>({0, rows - 1}), 9);
  EXPECT_EQ(t.get<std::uint8_t>({cols - 1, rows - 2}), 3);
}

TEST(OpsGpu, OpsRunOnTheGivenStreamAndRejectMixedPlaces) {
  EMBER_REQUIRE_GPU();
  Stream stream = Stream::create(0);
  const Tensor x = Tensor::arange(100000, DType::F32, kGpu);
  const Tensor y = Tensor::empty({100000}, DType::F32, kGpu);
  ops::unary(ops::UnaryOp::Square, y, x, stream.handle());
  stream.synchronize();
  EXPECT_EQ(y.get<float>({300}), 90000.0f);
  EXPECT_THROW(ops::add(x, Tensor::zeros({100000})), Error);
  try {
    ops::add(x, Tensor::zeros({100000}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host"), std::string::npos) << e.what();
  }
}

// ---- the vectorised path ----------------------------------------------------------------------
// Pointwise path 1 (pointwise_plan.hpp) moves 16-byte vectors after a head of single elements that
// reaches the output's vector boundary, in grid steps of several vectors per thread, and ends with
// a tail of singles. These tests place every operand at each element offset 0..15 into a guarded
// allocation (so that every head length occurs for every vector width), check with the planner
// that the launch really is vectorised, and compare the whole allocation, guards included, with
// the CPU's: the output is poisoned first, so an element left unwritten or written outside the
// view shows.

// A value no tested op produces from the inputs used here (|inputs| <= 60). A bool output's poison
// is `true`, so there only the false results would show an unwritten element.
constexpr double kPoison = 123;
constexpr std::int64_t kGuard = 16;

struct Placed {
  Tensor base;  // [offset poison elements | the n elements | kGuard poison elements]
  Tensor view;
};

// `values` (or, when empty, n poison elements) `offset` elements into a guarded allocation.
Placed placed(const std::vector<double>& values, std::int64_t n, DType dtype, std::int64_t offset,
              Place place) {
  std::vector<double> all(static_cast<std::size_t>(offset + n + kGuard), kPoison);
  std::copy(values.begin(), values.end(), all.begin() + offset);
  Placed p;
  p.base = testing::host_tensor(all, {static_cast<std::int64_t>(all.size())}, dtype).to(place);
  p.view = Tensor::from_allocation(p.base.allocation(), dtype, {n}, offset);
  return p;
}

// Whether the CUDA planner vectorises out = f(ins...) at width 16 / (widest element).
bool vectorised(const Tensor& out, const std::vector<Tensor>& ins) {
  PointwiseOperands ops;
  ops.count = 1 + static_cast<int>(ins.size());
  ops.data[0] = out.data();
  ops.strides[0] = out.strides();
  ops.element_size[0] = dtype_size(out.dtype());
  std::size_t widest = ops.element_size[0];
  for (std::size_t k = 0; k < ins.size(); ++k) {
    ops.data[k + 1] = ins[k].data();
    ops.strides[k + 1] = ins[k].strides();
    ops.element_size[k + 1] = dtype_size(ins[k].dtype());
    widest = std::max(widest, ops.element_size[k + 1]);
  }
  const auto launches = plan_pointwise(out.shape(), ops, static_cast<int>(16 / widest));
  return std::all_of(launches.begin(), launches.end(),
                     [](const PointwiseLaunch& l) { return l.vectorised; });
}

// One op of the vectorised-path tests: writes `out` from `ins` (on any place).
struct VectorCase {
  std::string name;
  DType out;
  std::vector<DType> ins;
  std::function<void(const Tensor& out, const std::vector<Tensor>& ins)> run;
  bool vectorises = true;  // whether the CUDA op has a vectorised kernel at all
};

std::vector<VectorCase> vector_cases() {
  using ops::BinaryOp;
  auto binary = [](BinaryOp op) {
    return [op](const Tensor& out, const std::vector<Tensor>& in) {
      ops::binary(op, out, in[0], in[1]);
    };
  };
  auto relu = [](const Tensor& out, const std::vector<Tensor>& in) {
    ops::unary(ops::UnaryOp::Relu, out, in[0]);
  };
  auto cast = [](const Tensor& out, const std::vector<Tensor>& in) { ops::copy(out, in[0]); };
  auto scalar_mul = [](const Tensor& out, const std::vector<Tensor>& in) {
    ops::binary_scalar(BinaryOp::Mul, out, in[0], 0.5);  // an immediate operand
  };
  auto add_first_of_b = [](const Tensor& out, const std::vector<Tensor>& in) {
    // b's first element repeated (stride 0, read from memory once per thread).
    ops::binary(BinaryOp::Add, out, in[0], in[1].slice(0, 0, 1).expand(in[0].shape()));
  };
  auto where = [](const Tensor& out, const std::vector<Tensor>& in) {
    ops::where(out, in[0], in[1], in[2]);
  };
  return {
      {"add f32", DType::F32, {DType::F32, DType::F32}, binary(BinaryOp::Add)},
      {"add f16", DType::F16, {DType::F16, DType::F16}, binary(BinaryOp::Add)},
      {"sub bf16", DType::BF16, {DType::BF16, DType::BF16}, binary(BinaryOp::Sub)},
      {"mul f64", DType::F64, {DType::F64, DType::F64}, binary(BinaryOp::Mul)},
      {"add u8", DType::U8, {DType::U8, DType::U8}, binary(BinaryOp::Add)},
      {"add i64", DType::I64, {DType::I64, DType::I64}, binary(BinaryOp::Add)},
      {"lt f32 -> bool", DType::Bool, {DType::F32, DType::F32}, binary(BinaryOp::Lt)},
      {"relu f32", DType::F32, {DType::F32}, relu},
      {"relu bf16", DType::BF16, {DType::BF16}, relu},
      {"relu i8", DType::I8, {DType::I8}, relu},
      {"mul f16 by an immediate", DType::F16, {DType::F16}, scalar_mul},
      {"add a repeated f32", DType::F32, {DType::F32, DType::F32}, add_first_of_b},
      {"cast f32 -> bf16", DType::BF16, {DType::F32}, cast},
      {"cast f32 -> f16", DType::F16, {DType::F32}, cast},
      {"cast bf16 -> f32", DType::F32, {DType::BF16}, cast},
      {"cast f16 -> f32", DType::F32, {DType::F16}, cast},
      {"cast f16 -> bf16", DType::BF16, {DType::F16}, cast},
      {"cast f64 -> f32", DType::F32, {DType::F64}, cast},
      {"cast u8 -> f32", DType::F32, {DType::U8}, cast},
      {"cast f32 -> i8", DType::I8, {DType::F32}, cast},
      {"cast i32 -> i64 (strided kernel only)", DType::I64, {DType::I32}, cast, false},
      {"where f64", DType::F64, {DType::Bool, DType::F64, DType::F64}, where},
  };
}

std::vector<double> vector_inputs(std::mt19937_64& rng, std::int64_t n, DType dtype) {
  if (dtype == DType::Bool) return random_values(rng, n, dtype, 0, 1);
  if (is_floating(dtype)) return random_values(rng, n, dtype, -60, 60);
  return random_values(rng, n, dtype, is_signed(dtype) ? -60 : 0, 60);
}

// Runs `c` with the output at out_offset and every input at in_offset; the GPU's whole output
// allocation must equal the CPU's. expect_vector 1: the planner must vectorise the launch, 0: it
// must not, -1: either.
::testing::AssertionResult vector_case_matches(std::mt19937_64& rng, const VectorCase& c,
                                               std::int64_t n, std::int64_t out_offset,
                                               std::int64_t in_offset, int expect_vector) {
  std::vector<Tensor> host_in, gpu_in;
  for (DType d : c.ins) {
    const auto values = vector_inputs(rng, n, d);
    host_in.push_back(placed(values, n, d, in_offset, Place::host()).view);
    gpu_in.push_back(placed(values, n, d, in_offset, kGpu).view);
  }
  const Placed host_out = placed({}, n, c.out, out_offset, Place::host());
  const Placed gpu_out = placed({}, n, c.out, out_offset, kGpu);
  if (expect_vector >= 0 && vectorised(gpu_out.view, gpu_in) != (expect_vector == 1)) {
    return ::testing::AssertionFailure()
           << "the planner " << (expect_vector == 1 ? "does not vectorise" : "vectorises")
           << " this case";
  }
  c.run(host_out.view, host_in);
  c.run(gpu_out.view, gpu_in);
  auto result = values_match(host_values(gpu_out.base), host_values(host_out.base), c.out);
  if (!result) result << " (index into the allocation; the view starts at " << out_offset << ")";
  return result;
}

TEST(OpsGpu, VectorisedPathMatchesCpuAtEveryAlignmentAndOddSizes) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  // Device allocations start on 16-byte boundaries, so an element offset is the misalignment.
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(Tensor::empty({3}, DType::U8, kGpu).data()) % 16, 0u);
  for (const VectorCase& c : vector_cases()) {
    for (std::int64_t n : {1, 2, 7, 31, 1023, 65537}) {
      for (std::int64_t offset = 0; offset < 16; ++offset) {
        // One element is one strided step; the rest vectorise when the op has the kernel (the
        // planner is not asked about ops that never do).
        const int expect = !c.vectorises ? -1 : n > 1 ? 1 : 0;
        ASSERT_TRUE(vector_case_matches(rng, c, n, offset, offset, expect))
            << c.name << ", " << n << " elements at offset " << offset;
      }
    }
    // Output and inputs on different sides of a vector boundary: the strided fallback.
    for (std::int64_t n : {7, 1023, 65537}) {
      ASSERT_TRUE(vector_case_matches(rng, c, n, 0, 1, n >= 64 ? 0 : -1))
          << c.name << ", " << n << " elements, output aligned, inputs one element off";
    }
  }
}

// More vectors than one wave of the grid takes in a step (SMs x 2048 threads x 4 vectors of 4 f32
// is 4.3 million elements on 132 SMs): every thread loops over several grid steps, the last one
// partial.
TEST(OpsGpu, VectorisedPathOverSeveralGridSteps) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  const std::int64_t n = 3 * (std::int64_t{1} << 22) + 5;
  for (const VectorCase& c : vector_cases()) {
    if (c.name != "add f32" && c.name != "cast f32 -> bf16" && c.name != "relu bf16" &&
        c.name != "add a repeated f32") {
      continue;
    }
    for (std::int64_t offset : {0, 3}) {
      ASSERT_TRUE(vector_case_matches(rng, c, n, offset, offset, 1))
          << c.name << ", " << n << " elements at offset " << offset;
    }
  }
}

// ---- reductions -----------------------------------------------------------------------------

// GPU and CPU both accumulate in f64 (or 64-bit integers) but in different orders: their sums may
// differ by a few ulps of the terms' magnitude. Bound that by the magnitude of all the input.
::testing::AssertionResult reductions_match(const Tensor& gpu, const Tensor& cpu,
                                            const std::vector<double>& inputs, DType dtype) {
  double magnitude = 0;
  for (double v : inputs)
    magnitude += std::abs(v);
  const auto g = host_values(gpu), e = host_values(cpu);
  if (g.size() != e.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double tol =
        2 * testing::tolerance(dtype) * std::max(1.0, std::abs(e[i])) + 1e-13 * magnitude;
    if (std::isnan(e[i]) != std::isnan(g[i]) ||
        (!std::isnan(e[i]) && std::abs(g[i] - e[i]) > tol)) {
      return ::testing::AssertionFailure() << "element " << i << ": gpu " << g[i] << ", cpu "
                                           << e[i] << " (" << dtype_name(dtype) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ReduceGpu, AlongEachDimensionMatchesCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  // Shapes that reach every kernel path: many short rows, few long rows (parts), very short rows,
  // wide columns, few columns (parts), narrow columns (transposed first), strided inputs.
  struct DimCase {
    Shape shape;
    int dim;
    Layout layout;
  };
  const std::vector<DimCase> dim_cases{
      {{20000, 33}, 1, Layout::Contiguous},  {{3, 300001}, 1, Layout::Contiguous},
      {{50000, 5}, 1, Layout::Contiguous},   {{300, 1024}, 0, Layout::Contiguous},
      {{100003, 40}, 0, Layout::Contiguous}, {{64, 100, 7}, 1, Layout::Contiguous},
      {{5, 9, 3}, 1, Layout::Contiguous},    {{33, 1000}, 0, Layout::Transposed},
      {{7, 13}, 1, Layout::SteppedSlice},    {{1, 1}, 0, Layout::Contiguous},
      {{4, 5, 6}, 2, Layout::Offset}};
  for (DType dtype : testing::kNumericDTypes) {
    for (ops::ReduceOp op :
         {ops::ReduceOp::Sum, ops::ReduceOp::Mean, ops::ReduceOp::Max, ops::ReduceOp::Min}) {
      for (const DimCase& c : dim_cases) {
        if (c.shape.numel() > 100000 && dtype != DType::F32 && dtype != DType::I64 &&
            dtype != DType::BF16) {
          continue;
        }
        const auto values = inputs(rng, c.shape.numel(), dtype, false);
        const Tensor cpu = ops::reduce(op, make_input(values, c.shape, dtype, c.layout), c.dim);
        const Tensor gpu =
            ops::reduce(op, make_input(values, c.shape, dtype, c.layout, kGpu), c.dim);
        ASSERT_TRUE(reductions_match(gpu, cpu, values, dtype))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << c.shape << " dim " << c.dim
            << " " << testing::layout_name(c.layout);
      }
    }
  }
}

TEST(ReduceGpu, AllElementsMatchesCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  const std::vector<Case> all_cases{
      {{1}, Layout::Contiguous},       {{1023}, Layout::Offset},
      {{1 << 22}, Layout::Contiguous}, {{300, 301}, Layout::Transposed},
      {{9, 31}, Layout::SteppedSlice}, {{}, Layout::Contiguous}};
  for (DType dtype : testing::kNumericDTypes) {
    for (ops::ReduceOp op :
         {ops::ReduceOp::Sum, ops::ReduceOp::Mean, ops::ReduceOp::Max, ops::ReduceOp::Min}) {
      for (const Case& c : all_cases) {
        const auto values = inputs(rng, c.shape.numel(), dtype, false);
        const Tensor cpu = ops::reduce_all(op, make_input(values, c.shape, dtype, c.layout));
        const Tensor gpu = ops::reduce_all(op, make_input(values, c.shape, dtype, c.layout, kGpu));
        ASSERT_EQ(gpu.place(), kGpu);
        ASSERT_TRUE(reductions_match(gpu, cpu, values, dtype))
            << ops::op_name(op) << " " << dtype_name(dtype) << " " << c.shape << " "
            << testing::layout_name(c.layout);
      }
    }
  }
  EXPECT_TRUE(
      std::isnan(ops::mean(Tensor::zeros({0}, DType::F32, kGpu)).to(Place::host()).item<float>()));
}

// The all-element reduction loads 16-byte vectors after a head that reaches the first boundary:
// every head length, odd sizes, one block (small inputs) and several blocks with a second pass
// over their partials (large ones), and more vectors than one grid step takes.
TEST(ReduceGpu, AllElementsAtEveryAlignment) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  const std::int64_t large = 3 * (std::int64_t{1} << 22) + 5;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8,
                      DType::I32, DType::I64}) {
    for (std::int64_t n :
         {std::int64_t{1}, std::int64_t{7}, std::int64_t{1023}, std::int64_t{65537}, large}) {
      if (n == large && dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::I8) continue;
      const auto values = inputs(rng, n, dtype, false);
      for (std::int64_t offset = 0; offset < 16; offset += n == large ? 5 : 1) {
        const Tensor host = placed(values, n, dtype, offset, Place::host()).view;
        const Tensor gpu = placed(values, n, dtype, offset, kGpu).view;
        for (ops::ReduceOp op :
             {ops::ReduceOp::Sum, ops::ReduceOp::Mean, ops::ReduceOp::Max, ops::ReduceOp::Min}) {
          ASSERT_TRUE(
              reductions_match(ops::reduce_all(op, gpu), ops::reduce_all(op, host), values, dtype))
              << ops::op_name(op) << " " << dtype_name(dtype) << ", " << n << " elements at offset "
              << offset;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ember
