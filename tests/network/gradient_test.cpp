// Every layer's backward against central finite differences, in double precision on the CPU.
#include <gtest/gtest.h>

#include "layer_cases_support.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

void fill_inputs(Graph& g, const LayerCase& c, std::mt19937_64& rng) {
  for (const auto& spec : c.inputs) {
    if (!spec.label && !spec.binary) {
      g.randomize(spec.name, rng, spec.low, spec.high);
      continue;
    }
    std::vector<double> v(static_cast<std::size_t>(spec.shape.numel()));
    std::uniform_int_distribution<int> bit(0, 1), mask(0, 4);
    for (auto& x : v)
      x = (spec.label && spec.shape[1] > 1 && mask(rng) == 0) ? -1.0 : bit(rng);
    g.set_values(spec.name, v);
  }
}

Graph build(const LayerCase& c, Place place, DType dtype, std::uint64_t init_seed) {
  Graph g(place, dtype);
  for (const auto& spec : c.inputs) {
    g.input(spec.name, spec.shape, spec.requires_grad,
            spec.label ? std::optional<DType>(DType::F32) : std::nullopt);
  }
  for (const auto& j : c.layers)
    g.add(j);
  g.finalize(init_seed);
  return g;
}

class GradientTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(GradientTest, BackwardMatchesCentralDifferences) {
  const LayerCase& c = GetParam();
  auto rng = ember::testing::make_rng();
  Graph g = build(c, Place::host(), DType::F64, rng());
  fill_inputs(g, c, rng);
  check_gradients(g, rng);
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GradientTest, ::testing::ValuesIn(gradient_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ember::network::testing
