// cuda::relu_backward_column_sum (the FC layer's ReLU and bias gradients in one pass) and
// cuda::column_sum (the same kernel without the ReLU) against the host: dx = dy where y > 0, else
// +0, bit for bit (column_sum leaves its input alone); the column sums within f32 rounding of the
// exact (double) sums, and the same bits on a second run (a fixed order). Rows 0, 1, 7,
// 1023 and 65537 (one to 256 chunks, chunks that end part-way through the rows in flight),
// widths of one pack to 1032 columns (partial 32-pack blocks), in place and not, and widths or
// pointers that do not split into 16-byte packs (the two-pass path), in f32, f16 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/half.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/kernels/launchers.hpp"
#include "ember/tensor/tensor.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

struct Shape2 {
  std::int64_t rows, cols;
  bool in_place;
  std::int64_t offset;  // elements from a 256-byte start (1: not 16-byte aligned)
  bool relu = true;     // false: column_sum of dy alone
};

template <class T>
void check(const Shape2& s, std::mt19937_64& rng) {
  const DType dtype = dtype_of<T>();
  const std::string what =
      cat(s.relu ? "ReLU gradient with sums " : "column sum ", s.rows, "x", s.cols,
          s.in_place ? " in place" : "", " offset ", s.offset, " ", dtype_name(dtype));
  const auto n = static_cast<std::size_t>(s.rows * s.cols);
  const auto at = static_cast<std::size_t>(s.offset);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<T> y(n + at), dy(n + at);
  for (std::size_t i = 0; i < n + at; ++i) {
    // A quarter of the outputs exactly 0 (the kink: no gradient) and some -0.
    const float v = u(rng);
    y[i] = T(i % 4 == 0 ? (i % 8 == 0 ? -0.0f : 0.0f) : v);
    dy[i] = T(u(rng));
  }
  std::vector<T> want(n);
  std::vector<double> exact(static_cast<std::size_t>(s.cols), 0.0),
      magnitude(static_cast<std::size_t>(s.cols), 0.0);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const auto i = static_cast<std::size_t>(r * s.cols + c);
      want[i] = !s.relu || static_cast<float>(y[at + i]) > 0.0f ? dy[at + i] : T(0.0f);
      exact[static_cast<std::size_t>(c)] += static_cast<double>(static_cast<float>(want[i]));
      magnitude[static_cast<std::size_t>(c)] += std::fabs(static_cast<float>(want[i]));
    }
  }
  const Tensor y_dev = Tensor::from_vector(y, Place::cuda(0));
  const Tensor dy_dev = Tensor::from_vector(dy, Place::cuda(0));
  const Tensor dx_dev = s.in_place ? dy_dev : Tensor::from_vector(dy, Place::cuda(0));
  const auto cols = static_cast<std::size_t>(s.cols);
  // Not zero to start with: every column must be written, an empty one with 0.
  const Tensor sums = Tensor::from_vector(std::vector<float>(cols, 12345.0f), Place::cuda(0));
  const Tensor workspace =
      Tensor::zeros({std::max<std::int64_t>(cuda::column_sum_workspace(s.rows, s.cols), 1)},
                    DType::F32, Place::cuda(0));
  const auto run = [&] {
    if (s.relu) {
      cuda::relu_backward_column_sum(
          dtype, s.rows, s.cols, y_dev.data<T>() + at, dy_dev.data<T>() + at, dx_dev.data<T>() + at,
          sums.data<float>(), workspace.data<float>(), current_stream(0));
    } else {
      cuda::column_sum(dtype, s.rows, s.cols, dx_dev.data<T>() + at, sums.data<float>(),
                       workspace.data<float>(), current_stream(0));
    }
    synchronize_device(0);
  };
  run();
  const std::vector<T> got = dx_dev.to_vector<T>();
  std::int64_t wrong = 0, first = -1;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[at + i], &want[i], sizeof(T)) != 0) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << what << ": first wrong gradient at " << first;
  const std::vector<float> got_sums = sums.to_vector<float>();
  ASSERT_EQ(got_sums.size(), cols);
  for (std::size_t c = 0; c < cols; ++c) {
    // f32 additions: each rounds by at most 2^-24 of the running sum, which is at most the sum
    // of magnitudes; a few times that covers any order.
    const double tol = 4.0 * static_cast<double>(s.rows) * std::ldexp(magnitude[c], -24) + 1e-30;
    ASSERT_NEAR(got_sums[c], exact[c], tol) << what << ": column " << c;
  }
  if (!s.in_place) {
    // The same inputs again: the same bits (the order of the additions is fixed).
    run();
    const std::vector<float> again = sums.to_vector<float>();
    EXPECT_EQ(std::memcmp(again.data(), got_sums.data(), cols * sizeof(float)), 0) << what;
  }
}

template <class T>
void check_all(std::mt19937_64& rng) {
  constexpr std::int64_t kPack = 16 / static_cast<std::int64_t>(sizeof(T));
  std::vector<Shape2> shapes;
  for (std::int64_t rows : {0, 1, 7, 1023, 65537}) {
    for (std::int64_t cols : {kPack, 3 * kPack, std::int64_t{1024}, std::int64_t{1032}}) {
      shapes.push_back({rows, cols, false, 0});
      shapes.push_back({rows, cols, true, 0});
      shapes.push_back({rows, cols, false, 0, false});
    }
    // Not whole packs, or not aligned: the ReLU-gradient pass and the scalar column sum.
    shapes.push_back({rows, 13, false, 0});
    shapes.push_back({rows, 1, true, 0});
    shapes.push_back({rows, 2 * kPack, false, 1});
    shapes.push_back({rows, 13, false, 0, false});
    shapes.push_back({rows, 2 * kPack, false, 1, false});
  }
  for (const auto& s : shapes)
    check<T>(s, rng);
}

TEST(ColumnSumOnCuda, MatchesTheHostF32) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_all<float>(rng);
}

TEST(ColumnSumOnCuda, MatchesTheHostF16) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_all<Half>(rng);
}

TEST(ColumnSumOnCuda, MatchesTheHostBf16) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_all<BFloat16>(rng);
}

}  // namespace
}  // namespace ember::network
