// Forward results of the sequence layers (GRU, MultiHeadAttention) and the layer types added with
// them (FusedReshapeConcatGeneral, ReLUHalf) against direct formulas, on the CPU in f32 and f64.
// The gradient tests check their backward against these forwards.
#include <gtest/gtest.h>

#include <cmath>

#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

class SequenceForward : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                    const char* what) const {
    const double tol = dtype() == DType::F64 ? 1e-12 : 2e-5;
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
  std::mt19937_64 rng_ = ember::testing::make_rng();
};

std::vector<double> param(const Graph& g, const std::string& name) {
  return to_doubles(g.store().find(name)->value());
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

TEST_P(SequenceForward, GruFollowsCudnnGateEquations) {
  constexpr int B = 3, S = 4, V = 5, H = 6;
  Graph g(Place::host(), dtype());
  g.input("x", {B, S, V});
  g.add(R"({"name": "gru", "type": "GRU", "bottom": "x", "top": "y",
            "gru_param": {"num_output": 6, "batchsize": 3, "SeqLength": 4, "vector_size": 5,
                          "bias_init": "Uniform"}})");
  g.finalize(rng_());
  g.randomize("x", rng_, -2, 2);
  g.forward();
  EXPECT_EQ(g.blob("y")->shape(), (Shape{B, S, H}));
  const auto x = g.values("x"), w = param(g, "gru.weight"), r = param(g, "gru.recurrent_weight"),
             b = param(g, "gru.bias");
  std::vector<double> want(B * S * H);
  for (int n = 0; n < B; ++n) {
    std::vector<double> h(H, 0.0);
    for (int t = 0; t < S; ++t) {
      // Columns: gate k (r, z, n) unit j at k H + j.
      auto xw = [&](int k, int j) {
        double s = b[k * H + j];
        for (int i = 0; i < V; ++i)
          s += x[(n * S + t) * V + i] * w[i * 3 * H + k * H + j];
        return s;
      };
      auto hr = [&](int k, int j) {
        double s = 0;
        for (int i = 0; i < H; ++i)
          s += h[i] * r[i * 3 * H + k * H + j];
        return s;
      };
      std::vector<double> next(H);
      for (int j = 0; j < H; ++j) {
        const double rg = sigmoid(xw(0, j) + hr(0, j));
        const double zg = sigmoid(xw(1, j) + hr(1, j));
        const double ng = std::tanh(xw(2, j) + rg * hr(2, j));
        next[j] = (1 - zg) * ng + zg * h[j];
      }
      h = next;
      for (int j = 0; j < H; ++j)
        want[(n * S + t) * H + j] = h[j];
    }
  }
  expect_close(g.values("y"), want, "GRU");
}

TEST_P(SequenceForward, GruOnAFlatBottomKeepsItsRank) {
  Graph g(Place::host(), dtype());
  g.input("x", {2, 12});
  g.add(R"({"name": "gru", "type": "GRU", "bottom": "x", "top": "y",
            "gru_param": {"num_output": 5, "batchsize": 2, "SeqLength": 3, "vector_size": 4}})");
  EXPECT_EQ(g.blob("y")->shape(), (Shape{2, 15}));
}

TEST_P(SequenceForward, MultiHeadAttentionWithAndWithoutMask) {
  constexpr int B = 2, F = 3, T = 5, D = 8, heads = 2, d = D / heads;
  for (bool masked : {false, true}) {
    Graph g(Place::host(), dtype());
    g.input("q", {B, F, D});
    g.input("k", {B, T, D});
    g.input("v", {B, T, D});
    g.input("m", {B, 1, F, T}, false);
    g.add(masked ? R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["q", "k", "v", "m"],
                       "top": "y", "num_attention_heads": 2})"
                 : R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["q", "k", "v"],
                       "top": "y", "num_attention_heads": 2})");
    g.finalize();
    for (const char* n : {"q", "k", "v"})
      g.randomize(n, rng_, -2, 2);
    std::vector<double> m(B * F * T);
    std::uniform_int_distribution<int> bit(0, 1);
    for (auto& e : m)
      e = bit(rng_);
    m[0] = m[1] = m[2] = m[3] = m[4] = 0;  // sample 0's first query attends to nothing
    g.set_values("m", m);
    g.forward();
    const auto q = g.values("q"), k = g.values("k"), v = g.values("v");
    std::vector<double> want(B * F * D);
    for (int n = 0; n < B; ++n)
      for (int h = 0; h < heads; ++h)
        for (int f = 0; f < F; ++f) {
          std::vector<double> s(T);
          double top = -1e300;
          for (int t = 0; t < T; ++t) {
            double dot = 0;
            for (int c = 0; c < d; ++c)
              dot += q[(n * F + f) * D + h * d + c] * k[(n * T + t) * D + h * d + c];
            s[t] = dot / std::sqrt(static_cast<double>(d));
            if (masked) s[t] -= 10000 * (1 - m[(n * F + f) * T + t]);
            top = std::max(top, s[t]);
          }
          double sum = 0;
          for (auto& e : s)
            sum += (e = std::exp(e - top));
          for (int c = 0; c < d; ++c) {
            double o = 0;
            for (int t = 0; t < T; ++t)
              o += s[t] / sum * v[(n * T + t) * D + h * d + c];
            want[(n * F + f) * D + h * d + c] = o;
          }
        }
    expect_close(g.values("y"), want, masked ? "masked attention" : "attention");
  }
}

TEST_P(SequenceForward, FusedReshapeConcatGeneralAndReluHalf) {
  Graph g(Place::host(), dtype());
  g.input("a", {2, 3, 2});
  g.input("c", {2, 3, 1});
  g.add(R"({"name": "f", "type": "FusedReshapeConcatGeneral", "bottom": ["a", "c"],
            "top": "y"})");
  g.add(R"({"name": "r", "type": "ReLUHalf", "bottom": "y", "top": "z"})");
  g.finalize();
  std::vector<double> a(12), c(6);
  for (int i = 0; i < 12; ++i)
    a[i] = i - 5;
  for (int i = 0; i < 6; ++i)
    c[i] = 100 + i;
  g.set_values("a", a);
  g.set_values("c", c);
  g.forward();
  EXPECT_EQ(g.blob("y")->shape(), (Shape{6, 3}));
  std::vector<double> want, relu;
  for (int row = 0; row < 6; ++row) {
    for (double e : {a[row * 2], a[row * 2 + 1], c[row]}) {
      want.push_back(e);
      relu.push_back(std::max(e, 0.0));
    }
  }
  expect_close(g.values("y"), want, "FusedReshapeConcatGeneral");
  expect_close(g.values("z"), relu, "ReLUHalf");
}

// An empty batch (the last, partial evaluation batch of some readers) runs forward and backward
// through every new layer: empty tops of the right shapes, and no parameter gradient from it.
TEST_P(SequenceForward, EmptyBatchesPassThroughTheNewLayers) {
  Graph g(Place::host(), dtype());
  g.input("x", {0, 3, 4});
  g.input("c", {0, 3, 2});
  g.add(R"({"name": "gru", "type": "GRU", "bottom": "x", "top": "h",
            "gru_param": {"num_output": 4, "batchsize": 1, "SeqLength": 3, "vector_size": 4}})");
  g.add(R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["h", "x", "x"], "top": "o",
            "num_attention_heads": 2})");
  g.add(R"({"name": "f", "type": "FusedReshapeConcatGeneral", "bottom": ["o", "c"],
            "top": "y"})");
  g.add(R"({"name": "r", "type": "ReLUHalf", "bottom": "y", "top": "z"})");
  g.finalize(rng_());
  g.forward();
  EXPECT_EQ(g.blob("h")->shape(), (Shape{0, 3, 4}));
  EXPECT_EQ(g.blob("o")->shape(), (Shape{0, 3, 4}));
  EXPECT_EQ(g.blob("z")->shape(), (Shape{0, 6}));
  EXPECT_TRUE(g.values("z").empty());
  g.set_grad("z", {});
  g.backward();
  EXPECT_TRUE(g.grad("x").empty());
  for (const char* name : {"gru.weight", "gru.recurrent_weight", "gru.bias"}) {
    for (double v : to_doubles(g.store().find(name)->grad()))
      ASSERT_EQ(v, 0.0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, SequenceForward, ::testing::Values(DType::F32, DType::F64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace ember::network::testing
