// The 16-bit tensor-core interaction reading its embeddings through a RowGather on CUDA: against
// the same kernels reading the vectors the codes name from a dense bottom, bit for bit (the same
// 16-bit values reach the same products in the same order; only where they are staged from
// differs), forward and backward, in f16 and bf16. Shapes: DLRM's (26 embeddings of width 128)
// at batches 7 and 8191 (past the resident warps: the grid-stride loop and the codes loaded a
// sample ahead), one and two row tiles (F1 = 16 and 17) at width 16, F1 = 32 (the most a warp
// stages) at width 32, and one embedding. Rows of the dense bottom that no code names hold NaN.
// Shapes the gather cannot take are refused by name.
#include <gtest/gtest.h>

#include <vector>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/interaction_layers.hpp"
#include "interaction_gather_support.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

TEST(InteractionGatherOnCuda, ReadsWhatTheCodesNameBitForBit) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (const DType dtype : {DType::F16, DType::BF16}) {
    for (const GatherCase& c : {GatherCase{7, 26, 128, 500}, GatherCase{8191, 26, 128, 70001},
                                GatherCase{1023, 15, 16, 3}, GatherCase{65, 16, 16, 1},
                                GatherCase{33, 31, 32, 1024}, GatherCase{1, 1, 16, 2}}) {
      SCOPED_TRACE(cat(dtype_name(dtype), " batch ", c.batch, " F ", c.f, " width ", c.width));
      expect_gather_matches_dense(Place::cuda(0), dtype, c, rng);
    }
  }
}

TEST(InteractionGatherOnCuda, ShapesWithoutTensorCoresAreRefused) {
  EMBER_REQUIRE_GPU();
  // f32 activations and a 16-bit width that is not a multiple of 16 take other kernels.
  for (const auto& [dtype, width] :
       std::vector<std::pair<DType, std::int64_t>>{{DType::F32, 16}, {DType::F16, 8}}) {
    const GatherCase c{3, 4, width, 5};
    Graph g(Place::cuda(0), dtype);
    build_interaction(g, c);
    auto& layer = dynamic_cast<InteractionLayer&>(g.layer(0));
    EXPECT_FALSE(layer.can_gather()) << dtype_name(dtype) << " width " << width;
    const Tensor table = Tensor::empty({c.table_rows, c.width}, dtype, Place::cuda(0));
    const Tensor codes = Tensor::from_vector(std::vector<std::int32_t>(12, 0), Place::cuda(0));
    EMBER_EXPECT_THROW_WITH(
        layer.gather_embeddings(RowGather{table.data(), codes.data<std::int32_t>()}), Error,
        "cannot read its embeddings through an index");
  }
}

}  // namespace
}  // namespace ember::network::testing
