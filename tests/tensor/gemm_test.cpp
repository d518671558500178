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

// op(A) op(B) for 2-D views of any layout, by the triple loop.
std::vector<double> naive_batch(const Tensor& a, const Tensor& b, std::int64_t i, bool ta,
                                bool tb) {
  return naive(a.select(0, i), b.select(0, i), ta, tb);
}

TEST(Gemm, BetaAccumulatesAndAlphaScales) {
  auto rng = testing::make_rng();
  const Tensor a = Tensor::uniform({9, 5}, -1, 1, rng());
  const Tensor b = Tensor::uniform({5, 11}, -1, 1, rng());
  const Tensor c = Tensor::uniform({9, 11}, -1, 1, rng());
  const auto c0 = c.to_vector<float>();
  ops::gemm(a, b, c, {.alpha = 2.0f, .beta = 0.5f});
  const auto ab = naive(a, b, false, false);
  const auto got = c.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], 2.0 * ab[i] + 0.5 * c0[i], 1e-4);
  }
}

TEST(Gemm, LeadingStrideSlicesOfLargerMatrices) {
  auto rng = testing::make_rng();
  // A is the first 5 columns of a [7, 13] buffer, B rows 2..7 of a [9, 4] one, C a column block.
  const Tensor a_buf = Tensor::uniform({7, 13}, -1, 1, rng());
  const Tensor b_buf = Tensor::uniform({9, 4}, -1, 1, rng());
  const Tensor c_buf = Tensor::full({7, 10}, 42.0);
  const Tensor a = a_buf.slice(1, 0, 5), b = b_buf.slice(0, 2, 7), c = c_buf.slice(1, 3, 7);
  ops::gemm(a, b, c);
  const auto expect = naive(a, b, false, false);
  for (std::int64_t i = 0; i < 7; ++i) {
    for (std::int64_t j = 0; j < 10; ++j) {
      if (j >= 3 && j < 7) {
        ASSERT_NEAR(c_buf.get<float>({i, j}), expect[static_cast<std::size_t>(i * 4 + j - 3)],
                    1e-4);
      } else {
        ASSERT_EQ(c_buf.get<float>({i, j}), 42.0f) << "written outside C at " << i << "," << j;
      }
    }
  }
}

TEST(Gemm, BatchedMatchesPerBatchTripleLoops) {
  auto rng = testing::make_rng();
  for (auto [batch, m, n, k] :
       {std::tuple{1, 3, 4, 5}, std::tuple{6, 7, 5, 3}, std::tuple{3, 33, 17, 65}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor a =
            Tensor::uniform(ta ? Shape{batch, k, m} : Shape{batch, m, k}, -1, 1, rng());
        const Tensor b =
            Tensor::uniform(tb ? Shape{batch, n, k} : Shape{batch, k, n}, -1, 1, rng());
        const Tensor c = ops::matmul(a, b, {.transpose_a = ta, .transpose_b = tb});
        ASSERT_EQ(c.shape(), (Shape{batch, m, n}));
        for (std::int64_t i = 0; i < batch; ++i) {
          const auto expect = naive_batch(a, b, i, ta, tb);
          const auto got = c.select(0, i).contiguous().to_vector<float>();
          for (std::size_t e = 0; e < got.size(); ++e) {
            ASSERT_NEAR(got[e], expect[e], 1e-4 * (1 + std::abs(expect[e])))
                << batch << "x" << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb;
          }
        }
      }
    }
  }
}

TEST(Gemm, BatchStrideZeroReusesOneMatrix) {
  auto rng = testing::make_rng();
  const Tensor w = Tensor::uniform({4, 6}, -1, 1, rng());
  const Tensor x = Tensor::uniform({5, 3, 4}, -1, 1, rng());
  const Tensor y = Tensor::empty({5, 3, 6});
  ops::batched_gemm(x, w.unsqueeze(0).expand({5, 4, 6}), y);
  for (std::int64_t i = 0; i < 5; ++i) {
    const auto expect = naive(x.select(0, i), w, false, false);
    const auto got = y.select(0, i).contiguous().to_vector<float>();
    for (std::size_t e = 0; e < got.size(); ++e)
      ASSERT_NEAR(got[e], expect[e], 1e-4);
  }
}

TEST(Gemm, HalfInputsWithFloatOrHalfOutputs) {
  auto rng = testing::make_rng();
  for (DType in : {DType::F16, DType::BF16}) {
    for (DType out : {DType::F32, in}) {
      const Tensor a = Tensor::uniform({13, 24}, -1, 1, rng(), in);
      const Tensor b = Tensor::uniform({24, 9}, -1, 1, rng(), in);
      const Tensor c = Tensor::uniform({13, 9}, -1, 1, rng(), out);
      const Tensor c0 = c.to(DType::F64);
      ops::gemm(a, b, c, {.beta = 1.0f});
      const auto expect = naive(a, b, false, false);  // on the rounded 16-bit inputs
      const Tensor got = c.to(DType::F64);
      // f32 accumulation, then one rounding to the output type.
      const double tol = out == DType::F32 ? 1e-4 : (out == DType::F16 ? 1e-2 : 6e-2);
      for (std::int64_t i = 0; i < 13; ++i) {
        for (std::int64_t j = 0; j < 9; ++j) {
          const double e = expect[static_cast<std::size_t>(i * 9 + j)] + c0.get<double>({i, j});
          ASSERT_NEAR(got.get<double>({i, j}), e, tol * (1 + std::abs(e)))
              << dtype_name(in) << " -> " << dtype_name(out);
        }
      }
    }
  }
}

TEST(Gemm, DoublePrecision) {
  auto rng = testing::make_rng();
  const Tensor a = Tensor::uniform({8, 3}, -1, 1, rng(), DType::F64);
  const Tensor b = Tensor::uniform({8, 5}, -1, 1, rng(), DType::F64);
  const Tensor c = ops::matmul(a, b, {.transpose_a = true});
  const auto expect = naive(a, b, true, false);
  const auto got = c.to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expect[i], 1e-12);
}

TEST(Gemm, EmptyDimensions) {
  const Tensor c = Tensor::full({3, 4}, 5.0);
  ops::gemm(Tensor::zeros({3, 0}), Tensor::zeros({0, 4}), c, {.beta = 1.0f});
  for (float v : c.to_vector<float>())
    EXPECT_EQ(v, 5.0f);  // beta * C, plus nothing
  EXPECT_EQ(ops::matmul(Tensor::zeros({0, 3}), Tensor::zeros({3, 2})).numel(), 0);
}

TEST(Gemm, BadOperandsAreClearErrors) {
  // Batch sizes differ.
  EXPECT_THROW(ops::batched_gemm(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5}),
                                 Tensor::zeros({2, 3, 5})),
               Error);
  // Transposed views need unit stride in their last dimension: use the transpose flag.
  try {
    ops::gemm(Tensor::zeros({4, 3}).transpose(0, 1), Tensor::zeros({4, 5}), Tensor::zeros({3, 5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unit stride"), std::string::npos) << e.what();
  }
  try {
    ops::gemm(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}, DType::F64), Tensor::zeros({2, 4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::gemm(Tensor::zeros({2, 3}, DType::I32), Tensor::zeros({3, 4}, DType::I32),
                         Tensor::zeros({2, 4}, DType::I32)),
               Error);
  EXPECT_THROW(ops::gemm(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}), Tensor::zeros({2, 4, 1})),
               Error);
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
