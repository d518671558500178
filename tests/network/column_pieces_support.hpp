// join_columns and split_columns (network/layers/copy_util.hpp: Concat's and Slice's passes)
// against a host reference, shared by the CPU and the CUDA suites.
#pragma once

#include <random>

#include "ember/core/dtype.hpp"

namespace ember::network::testing {

// Every case (DeepFM's 10 + 1 split of 11-wide rows, DCN's and DeepFM's two whole-width tops,
// overlapping pieces, columns no piece covers, no piece at all, more pieces than one CUDA launch
// takes, 1 to 100003 rows, a destination or source off 16-byte alignment, accumulation), on the
// CPU (f32, f64) or on CUDA device 0 (f32, f16, bf16). A join sums in f32 (f64 for f64) in piece
// order and rounds once; the reference does the same, so results must match bit for bit.
void check_column_pieces(bool cuda, DType dtype, std::mt19937_64& rng);

}  // namespace ember::network::testing
