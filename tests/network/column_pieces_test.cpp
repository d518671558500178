// join_columns and split_columns on the CPU (Concat's and Slice's passes) against the host
// reference, bit for bit (column_pieces_support.hpp).
#include <gtest/gtest.h>

#include "column_pieces_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

TEST(ColumnPieces, MatchTheReferenceF32) {
  auto rng = ember::testing::make_rng();
  check_column_pieces(false, DType::F32, rng);
}

TEST(ColumnPieces, MatchTheReferenceF64) {
  auto rng = ember::testing::make_rng();
  check_column_pieces(false, DType::F64, rng);
}

}  // namespace
}  // namespace ember::network::testing
