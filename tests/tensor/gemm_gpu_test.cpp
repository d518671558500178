// GEMM on CUDA (cuBLAS) against the CPU (OpenBLAS) on the same random inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "ember/tensor/gemm.hpp"
#include "support/test_support.hpp"
#include "tensor/op_test_util.hpp"

namespace ember {
namespace {

const Place kGpu = Place::cuda(0);

// ||got - expected|| / ||expected|| over all elements.
double relative_error(const Tensor& got, const Tensor& expected) {
  const auto g = testing::read_as_double(got.place().is_cuda() ? got.to(Place::host()) : got);
  const auto e = testing::read_as_double(expected);
  EXPECT_EQ(g.size(), e.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < g.size() && i < e.size(); ++i) {
    if (std::isnan(g[i])) return INFINITY;
    diff += (g[i] - e[i]) * (g[i] - e[i]);
    norm += e[i] * e[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

struct GemmCase {
  std::int64_t m, n, k;
};

TEST(GemmGpu, Fp32MatchesCpuTightlyForAllTransposes) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (GemmCase c :
       {GemmCase{1, 1, 1}, GemmCase{7, 5, 3}, GemmCase{127, 65, 257}, GemmCase{512, 384, 1024}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor a = Tensor::uniform(ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, -1, 1, rng());
        const Tensor b = Tensor::uniform(tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, -1, 1, rng());
        const Tensor c0 = Tensor::uniform({c.m, c.n}, -1, 1, rng());
        const ops::GemmOptions o{.transpose_a = ta, .transpose_b = tb, .alpha = 1.5f, .beta = 0.5f};
        const Tensor cpu = c0.clone();
        ops::gemm(a, b, cpu, o);
        const Tensor gpu = c0.to(kGpu);
        ops::gemm(a.to(kGpu), b.to(kGpu), gpu, o);
        EXPECT_LT(relative_error(gpu, cpu), 1e-5)
            << c.m << "x" << c.n << "x" << c.k << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST(GemmGpu, Tf32IsLooseButClose) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  const Tensor a = Tensor::uniform({256, 512}, -1, 1, rng());
  const Tensor b = Tensor::uniform({512, 320}, -1, 1, rng());
  const Tensor cpu = ops::matmul(a, b);
  const Tensor gpu = ops::matmul(a.to(kGpu), b.to(kGpu), {.allow_tf32 = true});
  const double err = relative_error(gpu, cpu);
  EXPECT_LT(err, 5e-3);
  EXPECT_GT(err, 0.0);  // TF32 rounds its inputs: bit-identical results would mean it is off
}

TEST(GemmGpu, HalfAndBFloat16WithFloatAccumulation) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType in : {DType::F16, DType::BF16}) {
    for (DType out : {DType::F32, in}) {
      const Tensor a = Tensor::uniform({129, 200}, -1, 1, rng(), in);
      const Tensor b = Tensor::uniform({200, 65}, -1, 1, rng(), in);
      const Tensor c0 = Tensor::uniform({129, 65}, -1, 1, rng(), out);
      const Tensor cpu = c0.clone();
      ops::gemm(a, b, cpu, {.beta = 1.0f});
      const Tensor gpu = c0.to(kGpu);
      ops::gemm(a.to(kGpu), b.to(kGpu), gpu, {.beta = 1.0f});
      const double tol = out == DType::F32 ? 1e-4 : (out == DType::F16 ? 2e-3 : 1e-2);
      EXPECT_LT(relative_error(gpu, cpu), tol) << dtype_name(in) << " -> " << dtype_name(out);
    }
  }
}

TEST(GemmGpu, BatchedStridedSlicesAndBatchStrideZero) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = Tensor::uniform(ta ? Shape{6, 33, 17} : Shape{6, 17, 33}, -1, 1, rng());
      const Tensor b = Tensor::uniform(tb ? Shape{6, 9, 33} : Shape{6, 33, 9}, -1, 1, rng());
      const ops::GemmOptions o{.transpose_a = ta, .transpose_b = tb};
      const Tensor cpu = ops::matmul(a, b, o);
      const Tensor gpu = ops::matmul(a.to(kGpu), b.to(kGpu), o);
      EXPECT_LT(relative_error(gpu, cpu), 1e-5) << "ta=" << ta << " tb=" << tb;
    }
  }
  // Leading-stride slices: every other row block of a larger buffer, C a column block.
  const Tensor a_buf = Tensor::uniform({40, 50}, -1, 1, rng());
  const Tensor b_buf = Tensor::uniform({30, 20}, -1, 1, rng());
  const Tensor a = a_buf.slice(1, 3, 28), b = b_buf.slice(0, 5, 30).slice(1, 0, 11);
  const Tensor cpu_c = Tensor::zeros({40, 16});
  ops::gemm(a, b, cpu_c.slice(1, 2, 13));
  const Tensor gpu_c = Tensor::zeros({40, 16}, DType::F32, kGpu);
  ops::gemm(a_buf.to(kGpu).slice(1, 3, 28), b_buf.to(kGpu).slice(0, 5, 30).slice(1, 0, 11),
            gpu_c.slice(1, 2, 13));
  EXPECT_LT(relative_error(gpu_c, cpu_c), 1e-5);
  // One weight matrix for every batch (batch stride 0).
  const Tensor w = Tensor::uniform({24, 10}, -1, 1, rng());
  const Tensor x = Tensor::uniform({5, 7, 24}, -1, 1, rng());
  const Tensor cpu_y = Tensor::empty({5, 7, 10});
  ops::batched_gemm(x, w.unsqueeze(0).expand({5, 24, 10}), cpu_y);
  const Tensor gpu_y = Tensor::empty({5, 7, 10}, DType::F32, kGpu);
  ops::batched_gemm(x.to(kGpu), w.to(kGpu).unsqueeze(0).expand({5, 24, 10}), gpu_y);
  EXPECT_LT(relative_error(gpu_y, cpu_y), 1e-5);
}

TEST(GemmGpu, MixedPlacesAreAnError) {
  EMBER_REQUIRE_GPU();
  EXPECT_THROW(ops::gemm(Tensor::zeros({2, 3}, DType::F32, kGpu), Tensor::zeros({3, 4}),
                         Tensor::zeros({2, 4}, DType::F32, kGpu)),
               Error);
}

}  // namespace
}  // namespace ember
