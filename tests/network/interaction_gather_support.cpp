#include "interaction_gather_support.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "ember/network/layers/interaction_layers.hpp"
#include "ember/tensor/row_gather.hpp"

namespace ember::network::testing {

GatherInputs make_gather_inputs(const GatherCase& c, std::mt19937_64& rng) {
  GatherInputs in;
  const auto w = static_cast<std::size_t>(c.width);
  const std::size_t vectors = static_cast<std::size_t>(c.batch * c.f);
  std::uniform_real_distribution<double> u(-1, 1);
  in.table.resize(static_cast<std::size_t>(c.table_rows) * w);
  for (auto& x : in.table)
    x = u(rng);
  in.pooled.assign(vectors * w, std::numeric_limits<double>::quiet_NaN());
  in.named.assign(vectors * w, 0.0);
  std::uniform_int_distribution<int> kind(0, 5);
  std::uniform_int_distribution<std::int64_t> row(0, c.table_rows - 1);
  for (std::size_t v = 0; v < vectors; ++v) {
    const int k = kind(rng);
    double* named = &in.named[v * w];
    if (k == 0) {
      in.codes.push_back(kGatherZeroRow);
    } else if (k == 1) {
      in.codes.push_back(gather_dense_code(static_cast<std::int64_t>(v)));
      for (std::size_t x = 0; x < w; ++x)
        named[x] = in.pooled[v * w + x] = u(rng);
    } else {
      const std::int64_t r = row(rng);
      in.codes.push_back(static_cast<std::int32_t>(r));
      for (std::size_t x = 0; x < w; ++x)
        named[x] = in.table[static_cast<std::size_t>(r) * w + x];
    }
  }
  return in;
}

void build_interaction(Graph& g, const GatherCase& c) {
  g.input("mlp", {c.batch, c.width});
  g.input("emb", {c.batch, c.f, c.width});
  g.add(R"({"name": "i", "type": "Interaction", "bottom": ["mlp", "emb"], "top": "y"})");
  g.finalize();
}

void expect_gather_matches_dense(Place place, DType dtype, const GatherCase& c,
                                 std::mt19937_64& rng) {
  const GatherInputs in = make_gather_inputs(c, rng);
  Graph gathered(place, dtype), plain(place, dtype);
  build_interaction(gathered, c);
  build_interaction(plain, c);
  auto& layer = dynamic_cast<InteractionLayer&>(gathered.layer(0));
  ASSERT_TRUE(layer.can_gather());
  const Tensor table = Tensor::empty({c.table_rows, c.width}, dtype, place);
  from_doubles(table, in.table);
  const Tensor codes = Tensor::from_vector(in.codes, place);
  layer.gather_embeddings(RowGather{table.data(), codes.data<std::int32_t>()});
  std::vector<double> mlp(static_cast<std::size_t>(c.batch * c.width));
  for (auto& x : mlp)
    x = std::uniform_real_distribution<double>(-1, 1)(rng);
  gathered.set_values("mlp", mlp);
  gathered.set_values("emb", in.pooled);
  plain.set_values("mlp", mlp);
  plain.set_values("emb", in.named);
  gathered.forward();
  plain.forward();
  EXPECT_EQ(gathered.values("y"), plain.values("y"));
  std::vector<double> dy(gathered.values("y").size());
  for (auto& x : dy)
    x = std::uniform_real_distribution<double>(-1, 1)(rng);
  gathered.set_grad("y", dy);
  plain.set_grad("y", dy);
  gathered.backward();
  plain.backward();
  EXPECT_EQ(gathered.grad("mlp"), plain.grad("mlp"));
  // The gradient goes to the dense bottom's gradient, whichever row the forward read.
  EXPECT_EQ(gathered.grad("emb"), plain.grad("emb"));
}

}  // namespace ember::network::testing
