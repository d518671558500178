// MultiCross on CUDA (the fused kernels, and the per-layer kernels past their width) against the
// CPU path computing in f64 from the same inputs and weights: every layer count, width and batch
// the fused kernels treat differently (one value per lane or 32, a partial last lane group, one
// row or many per warp), every activation dtype; and the gradients bit-identical from run to run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/weighted_layers.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

// The reference is f64 and the device's inputs are exactly its inputs (the 16-bit values, the
// f32 weights), so what remains is the device's own rounding: f32 arithmetic (sums of up to
// 65537 rows, dots of up to 1100 values, blocked: a few 1e-7 relative) and, for 16-bit
// activations, the one rounding of the output and of the input gradient (at most u / 2 relative
// each, u = 2^-11 for f16, 2^-8 for bf16). The parameter gradients are f32 in every dtype. The
// bounds are those of the layer tests (layers_gpu_test.cpp): 2e-5 for f32 work, 3u + 2e-5 for a
// 16-bit tensor.
constexpr double kF32Tolerance = 2e-5;
double tolerance16(DType t) {
  if (t == DType::F16) return 3 * std::ldexp(1.0, -11) + kF32Tolerance;
  if (t == DType::BF16) return 3 * std::ldexp(1.0, -8) + kF32Tolerance;
  return kF32Tolerance;
}

// ||a - b|| / ||magnitude||: the error against the size of the terms that were summed.
double error_against_magnitude(const std::vector<double>& a, const std::vector<double>& b,
                               const std::vector<double>& magnitude) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += magnitude[i] * magnitude[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-12);
}

struct CrossShape {
  std::int64_t batch, width;
  int layers;
};

std::string layer_json(int layers) {
  return cat(R"({"name": "mc", "type": "MultiCross", "bottom": "x", "top": "y",
                 "mc_param": {"num_layers": )",
             layers, R"(, "bias_init": "Uniform"}})");
}

struct DeviceRun {
  std::vector<double> y, dx;
  std::vector<std::vector<double>> param_grads;  // in the store's order
};

DeviceRun read_run(const Graph& g) {
  DeviceRun r{g.values("y"), g.grad("x"), {}};
  for (const auto& p : g.store().parameters())
    r.param_grads.push_back(to_doubles(p->grad()));
  return r;
}

// Runs the shape on the device and on the CPU; checks the path the device took (fused or
// per-layer), the results against the reference, and that a second backward (and forward) on
// the device reproduces the first bit for bit.
void run_case(const CrossShape& s, DType dtype, std::mt19937_64& rng) {
  const std::string what =
      cat(s.batch, "x", s.width, ", ", s.layers, " layer(s), ", dtype_name(dtype));
  const std::uint64_t seed = rng();
  Graph gpu(Place::cuda(0), dtype);
  gpu.input("x", {s.batch, s.width});
  auto& layer = dynamic_cast<MultiCrossLayer&>(gpu.add(layer_json(s.layers)));
  gpu.finalize(seed);
  EXPECT_EQ(layer.fused(), s.width <= cuda::kCrossFusedMaxWidth) << what;

  Graph cpu(Place::host(), DType::F64);
  cpu.input("x", {s.batch, s.width});
  cpu.add(layer_json(s.layers));
  cpu.finalize(seed);
  // The reference multiplies with the device's f32 weights exactly.
  for (const auto& p : gpu.store().parameters())
    from_doubles(cpu.store().find(p->name())->value(), to_doubles(p->value()));

  const auto n = static_cast<std::size_t>(s.batch * s.width);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(n), dy(n);
  for (auto& v : x)
    v = u(rng);
  for (auto& v : dy)
    v = u(rng);
  x = rounded(x, dtype);
  dy = rounded(dy, dtype);
  for (Graph* g : {&cpu, &gpu})
    g->set_values("x", x);

  cpu.forward(true);
  gpu.forward(true);
  cpu.set_grad("y", dy);
  gpu.set_grad("y", dy);
  cpu.backward();
  gpu.backward();
  const DeviceRun first = read_run(gpu);

  // The same computation on the absolute values of every input and weight: each result there is
  // the sum of the magnitudes of the terms that make the result here, which is what an f32 sum's
  // error is proportional to. A parameter gradient of one row (or of width 1) is one dot product
  // times a vector, and where that dot product cancels, its relative error grows without bound
  // in any f32 computation; the bound below is f32's against the terms' magnitude instead.
  Graph magnitude(Place::host(), DType::F64);
  magnitude.input("x", {s.batch, s.width});
  magnitude.add(layer_json(s.layers));
  magnitude.finalize(seed);
  auto absolute = [](std::vector<double> v) {
    for (auto& e : v)
      e = std::fabs(e);
    return v;
  };
  for (const auto& p : gpu.store().parameters())
    from_doubles(magnitude.store().find(p->name())->value(), absolute(to_doubles(p->value())));
  magnitude.set_values("x", absolute(x));
  magnitude.forward(true);
  magnitude.set_grad("y", absolute(dy));
  magnitude.backward();

  // The output and the input gradient are measured against their terms' magnitude too: at one
  // row of width 1 there is one value, and where its sums cancel the error against the value
  // itself has no bound (seen once in f32: 4.1e-5 of the value at 1 x 1 with 5 layers). The
  // 16-bit roundings are at most u / 2 of a value, so of its magnitude as well.
  const double tol16 = tolerance16(dtype);
  EXPECT_LE(error_against_magnitude(first.y, cpu.values("y"), magnitude.values("y")), tol16)
      << what << ": output";
  EXPECT_LE(error_against_magnitude(first.dx, cpu.grad("x"), magnitude.grad("x")), tol16)
      << what << ": input gradient";
  const auto& params = gpu.store().parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto want = to_doubles(cpu.store().find(params[i]->name())->grad());
    const auto scale = to_doubles(magnitude.store().find(params[i]->name())->grad());
    EXPECT_LE(error_against_magnitude(first.param_grads[i], want, scale), kF32Tolerance)
        << what << ": gradient of " << params[i]->name();
  }

  // Deterministic: the same inputs give the same bits (no atomics; a fixed summation order).
  gpu.forward(true);
  gpu.set_grad("y", dy);
  gpu.backward();
  const DeviceRun second = read_run(gpu);
  EXPECT_EQ(second.y, first.y) << what << ": output differs between runs";
  EXPECT_EQ(second.dx, first.dx) << what << ": input gradient differs between runs";
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(second.param_grads[i], first.param_grads[i])
        << what << ": gradient of " << params[i]->name() << " differs between runs";
  }
}

constexpr DType kAllDtypes[] = {DType::F32, DType::F16, DType::BF16};

// Widths of one value per lane, a partial lane group, DCN's 429 (odd: rows not 16-byte aligned
// in any dtype) and 32 values per lane; batches of one row, fewer rows than a block's warps, and
// more rows than the backward's resident warps.
TEST(MultiCrossOnCuda, FusedMatchesTheCpuOnEveryShape) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (std::int64_t batch : {1, 7, 1023}) {
    for (std::int64_t width : {1, 7, 429, 1023}) {
      for (int layers : {1, 2, 3, 5}) {
        for (DType dtype : kAllDtypes)
          run_case({batch, width, layers}, dtype, rng);
      }
    }
  }
}

// Many rows per warp (65537: one more than DCN's batch), at DCN's width and a narrow one.
TEST(MultiCrossOnCuda, FusedMatchesTheCpuOnLargeBatches) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (std::int64_t width : {7, 429}) {
    for (DType dtype : kAllDtypes)
      run_case({65537, width, 3}, dtype, rng);
  }
}

// Past kCrossFusedMaxWidth the per-layer kernels run (hidden states stored in f32).
TEST(MultiCrossOnCuda, PerLayerKernelsPastTheFusedWidthMatchTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  const std::int64_t wide = cuda::kCrossFusedMaxWidth + 77;
  for (std::int64_t batch : {7, 1023}) {
    for (int layers : {1, 3}) {
      for (DType dtype : kAllDtypes)
        run_case({batch, wide, layers}, dtype, rng);
    }
  }
}

// Which path a shape takes (cuda::cross_fused), checked on the host: widths up to 1024 fuse
// while the per-warp sums fit; many layers at the widest rows do not.
TEST(MultiCrossOnCuda, FusedThreshold) {
  EXPECT_TRUE(cuda::cross_fused(1, 1));
  EXPECT_TRUE(cuda::cross_fused(429, 3));
  EXPECT_TRUE(cuda::cross_fused(1024, 5));
  EXPECT_FALSE(cuda::cross_fused(1025, 1));
  EXPECT_TRUE(cuda::cross_fused(429, 25));
  EXPECT_FALSE(cuda::cross_fused(429, cuda::kMaxCrossLayers));
  EXPECT_TRUE(cuda::cross_fused(1024, 12));
  EXPECT_FALSE(cuda::cross_fused(1024, 13));
  EXPECT_EQ(cuda::cross_values_per_lane(1), 1);
  EXPECT_EQ(cuda::cross_values_per_lane(33), 2);
  EXPECT_EQ(cuda::cross_values_per_lane(429), 16);
  EXPECT_EQ(cuda::cross_values_per_lane(1024), 32);
}

}  // namespace
}  // namespace ember::network::testing
