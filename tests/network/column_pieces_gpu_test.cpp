// join_columns and split_columns on CUDA (one pass for Concat and Slice, 16-byte accesses where
// aligned, one or two launches of pieces, 32-bit indices) against the host reference, bit for
// bit (column_pieces_support.hpp).
#include <gtest/gtest.h>

#include "column_pieces_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

TEST(ColumnPiecesOnCuda, MatchTheReferenceF32) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_column_pieces(true, DType::F32, rng);
}

TEST(ColumnPiecesOnCuda, MatchTheReferenceF16) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_column_pieces(true, DType::F16, rng);
}

TEST(ColumnPiecesOnCuda, MatchTheReferenceBf16) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_column_pieces(true, DType::BF16, rng);
}

}  // namespace
}  // namespace ember::network::testing
