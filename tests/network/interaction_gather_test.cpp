// The dot interaction reading its embeddings through a RowGather (tensor/row_gather.hpp) on the
// CPU: every code kind (table row, zeros, a row of the dense bottom) in one batch, against the
// same layer reading the vectors those codes name from a dense bottom. The rows of the dense
// bottom that no code names hold NaN, so reading one fails the comparison; both directions must
// match exactly (the same values, added in the same order).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ember/network/layers/interaction_layers.hpp"
#include "interaction_gather_support.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

class InteractionGather : public ::testing::TestWithParam<DType> {};

TEST_P(InteractionGather, ReadsWhatTheCodesNameExactly) {
  const DType dtype = GetParam();
  auto rng = ember::testing::make_rng();
  for (const GatherCase& c : {GatherCase{1, 1, 1, 1}, GatherCase{7, 5, 4, 11},
                              GatherCase{65, 26, 16, 300}, GatherCase{3, 31, 7, 2}}) {
    SCOPED_TRACE(cat("batch ", c.batch, " F ", c.f, " width ", c.width));
    expect_gather_matches_dense(Place::host(), dtype, c, rng);
  }
}

TEST_P(InteractionGather, AnUndefinedGatherReadsTheBottomAgain) {
  const DType dtype = GetParam();
  const GatherCase c{2, 3, 4, 5};
  auto rng = ember::testing::make_rng();
  const GatherInputs in = make_gather_inputs(c, rng);
  Graph g(Place::host(), dtype);
  build_interaction(g, c);
  auto& layer = dynamic_cast<InteractionLayer&>(g.layer(0));
  const Tensor table = Tensor::empty({c.table_rows, c.width}, dtype, Place::host());
  from_doubles(table, in.table);
  const Tensor codes = Tensor::from_vector(in.codes, Place::host());
  layer.gather_embeddings(RowGather{table.data(), codes.data<std::int32_t>()});
  EXPECT_TRUE(layer.embedding_gather().defined());
  layer.gather_embeddings(RowGather{});
  EXPECT_FALSE(layer.embedding_gather().defined());
  g.set_values("mlp", std::vector<double>(8, 1.0));
  g.set_values("emb", in.named);
  g.forward();
  const auto y = g.values("y");
  for (double v : y)
    EXPECT_FALSE(std::isnan(v));
  EMBER_EXPECT_THROW_WITH(layer.gather_embeddings(RowGather{nullptr, codes.data<std::int32_t>()}),
                          Error, "without a table");
}

INSTANTIATE_TEST_SUITE_P(CpuTypes, InteractionGather, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace ember::network::testing
