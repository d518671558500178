// Inputs for the dot interaction read through a RowGather (tensor/row_gather.hpp), shared by
// the CPU and GPU tests: codes of every kind over a table, and the dense bottom they imply.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "layer_test_support.hpp"

namespace ember::network::testing {

struct GatherCase {
  std::int64_t batch, f, width, table_rows;
};

// Codes for batch * f vectors: zeros, a row of the dense bottom (`pooled`, whose rows no code
// names hold NaN) and table rows, drawn at random; `named`: the vectors the codes name, as one
// dense bottom.
struct GatherInputs {
  std::vector<std::int32_t> codes;
  std::vector<double> table, pooled, named;
};
GatherInputs make_gather_inputs(const GatherCase& c, std::mt19937_64& rng);

// One Interaction layer "i" over inputs "mlp" [batch, width] and "emb" [batch, f, width].
void build_interaction(Graph& g, const GatherCase& c);

// The layer reading through the codes of fresh inputs against the same layer reading the vectors
// they name from its bottom, at `place` in `dtype`: the forward's output and both gradients
// equal, bit for bit.
void expect_gather_matches_dense(Place place, DType dtype, const GatherCase& c,
                                 std::mt19937_64& rng);

}  // namespace ember::network::testing
