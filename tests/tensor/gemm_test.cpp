#include "ember/tensor/gemm.hpp"

#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace ember {
namespace {

// C = op(A) op(B) by a plain triple loop in double.
std::vector<double> naive(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Tensor ha = a.to(DType::F64), hb = b.to(DType::F64);
  const std::int64_t m = ta ? a.size(1) : a.size(0), k = ta ? a.size(0) : a.size(1);
  const std::int64_t n = tb ? b.size(0) : b.size(1);
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        acc += (ta ? ha.get<double>({p, i}) : ha.get<double>({i, p})) *
               (tb ? hb.get<double>({j, p}) : hb.get<double>({p, j}));
      }
      c[static_cast<std::size_t>(i * n + j)] = acc;
    }
  return c;
}

TEST(Gemm, AllTransposeCombinationsMatchATripleLoop) {
  auto rng = testing::make_rng();
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, std::tuple{7, 5, 3}, std::tuple{33, 17, 65}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Tensor a = Tensor::uniform(ta ? Shape{k, m} : Shape{m, k}, -1, 1, rng());
        Tensor b = Tensor::uniform(tb ? Shape{n, k} : Shape{k, n}, -1, 1, rng());
        Tensor c = Tensor::zeros({m, n});
        ops::gemm(a, b, c, {.transpose_a = ta, .transpose_b = tb});
        const auto expect = naive(a, b, ta, tb);
        const auto got = c.to_vector<float>();
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], expect[i], 1e-4 * (1 + std::abs(expect[i])))
              << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb;
        }
      }
    }
  }
}

TEST(Gemm, ShapeMismatchShowsAllShapes) {
  try {
    ops::gemm(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), Tensor::zeros({2, 5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember
