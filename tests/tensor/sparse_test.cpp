#include "ember/tensor/sparse.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace ember {
namespace {

TEST(CsrBuilder, BuildsRowsIncludingEmptyOnes) {
  CsrBuilder<std::uint32_t> b(4, 10);
  b.new_row();
  b.push_back(5);
  b.push_back(6);
  b.new_row();  // empty row
  b.new_row();
  b.push_back(9);
  CsrTensor csr = b.view();
  EXPECT_EQ(csr.rows(), 3);
  EXPECT_EQ(csr.nnz(), 3);
  EXPECT_EQ(csr.row_offsets().to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(csr.values().to_vector<std::uint32_t>(), (std::vector<std::uint32_t>{5, 6, 9}));
  Tensor dense = csr.to_dense(2, 0);
  EXPECT_EQ(dense.to_vector<std::uint32_t>(), (std::vector<std::uint32_t>{5, 6, 0, 0, 9, 0}));
  EXPECT_THROW(csr.to_dense(1), Error);
  b.reset();
  EXPECT_EQ(b.rows(), 0);
  b.new_row();
  EXPECT_EQ(b.view().nnz(), 0);
}

TEST(CsrBuilder, BoundsAreErrors) {
  CsrBuilder<std::int64_t> b(1, 2);
  EXPECT_THROW(b.push_back(1), Error);  // before the first row
  b.new_row();
  b.push_back(1);
  b.push_back(2);
  try {
    b.push_back(3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("capacity of 2 values"), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.new_row(), Error);
}

TEST(CsrTensor, ValidatesStructure) {
  Tensor values = Tensor::from_vector(std::vector<std::uint32_t>{1, 2, 3});
  EXPECT_NO_THROW(CsrTensor(Tensor::from_vector(std::vector<std::int64_t>{0, 1, 3}), values, 3));
  EXPECT_THROW(CsrTensor(Tensor::from_vector(std::vector<std::int64_t>{0, 2, 1}), values, 1),
               Error);
  EXPECT_THROW(CsrTensor(Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3}), values, 3),
               Error);
  EXPECT_THROW(CsrTensor(Tensor::from_vector(std::vector<std::int64_t>{0, 1, 3}), values, 4),
               Error);
  EXPECT_THROW(CsrTensor(Tensor::from_vector(std::vector<std::int32_t>{0, 1, 3}), values, 3),
               Error);
}

// The scan over the row offsets names the first row where they decrease, wherever it is, and
// the numbers; long valid offsets pass.
TEST(CsrTensor, NamesTheFirstDecreasingRow) {
  auto rng = testing::make_rng();
  for (std::int64_t rows : {1, 7, 1023, 65537}) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(rows) + 1, 0);
    for (std::size_t r = 1; r < off.size(); ++r)
      off[r] = off[r - 1] + static_cast<std::int64_t>(rng() % 3);
    const std::int64_t nnz = off.back();
    const Tensor values = Tensor::zeros({std::max<std::int64_t>(nnz, 1)}, DType::U32);
    EXPECT_EQ(CsrTensor(Tensor::from_vector(off), values, nnz).rows(), rows);
    // Two decreases: the message names the first.
    const auto first = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(rows));
    std::vector<std::int64_t> bad = off;
    bad[first + 1] = bad[first] - 1;
    if (first + 2 < bad.size()) bad[bad.size() - 1] = -5;
    try {
      CsrTensor(Tensor::from_vector(bad), values, nnz);
      ADD_FAILURE() << "decreasing offsets accepted, " << rows << " rows";
    } catch (const Error& e) {
      const std::string want = "row offsets decrease at row " + std::to_string(first) + " (" +
                               std::to_string(bad[first]) + " -> " +
                               std::to_string(bad[first + 1]) + ")";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

TEST(CsrTensor, RandomRoundTripThroughDense) {
  auto rng = testing::make_rng();
  const std::int64_t rows = 1023, width = 7;
  CsrBuilder<std::uint32_t> b(rows, rows * width);
  std::vector<std::uint32_t> expect(static_cast<std::size_t>(rows * width), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    b.new_row();
    const auto n = static_cast<std::int64_t>(rng() % (width + 1));
    for (std::int64_t j = 0; j < n; ++j) {
      const auto v = static_cast<std::uint32_t>(1 + rng() % 1000000);
      b.push_back(v);
      expect[static_cast<std::size_t>(r * width + j)] = v;
    }
  }
  EXPECT_EQ(b.view().to_dense(width).to_vector<std::uint32_t>(), expect);
}

}  // namespace
}  // namespace ember
