// The dense optimizer over the parameter store's weight block: several steps of every rule
// against an independent reference, the learning-rate schedule, regularisers, the loss scaler,
// and the padding between parameters staying zero.
#include "ember/network/dense_optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

using testing::from_doubles;
using testing::to_doubles;

struct Fixture {
  std::shared_ptr<ParameterStore> store = std::make_shared<ParameterStore>(Place::host());
  ParameterPtr a, b;
  Fixture() {
    // Odd sizes, so the weight block has zero padding between the two parameters.
    a = store->declare("a.weight", {3}, InitSpec{InitKind::Zero});
    b = store->declare("b.weight", {2, 5}, InitSpec{InitKind::Zero});
    store->allocate();
  }
  std::vector<double> weights() const {
    auto va = to_doubles(a->value()), vb = to_doubles(b->value());
    va.insert(va.end(), vb.begin(), vb.end());
    return va;
  }
  void set_weights(const std::vector<double>& w) const {
    from_doubles(a->value(), {w.begin(), w.begin() + 3});
    from_doubles(b->value(), {w.begin() + 3, w.end()});
  }
  void set_grads(const std::vector<double>& g) const {
    from_doubles(a->grad(), {g.begin(), g.begin() + 3});
    from_doubles(b->grad(), {g.begin() + 3, g.end()});
  }
  // Every block element outside the parameters.
  std::vector<double> padding() const {
    const auto all = to_doubles(store->weights());
    std::vector<bool> used(all.size(), false);
    for (const auto& s : store->weight_segments()) {
      for (std::int64_t i = 0; i < s.numel; ++i)
        used[static_cast<std::size_t>(s.offset + i)] = true;
    }
    std::vector<double> out;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (!used[i]) out.push_back(all[i]);
    }
    return out;
  }
};

// The rules of HugeCTR's optimizers, written out again in double.
struct Reference {
  optim::OptimizerType type = optim::OptimizerType::SGD;
  double lr = 0, mu = 0.9, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  double rms_beta = 0.9, ftrl_beta = 0.5, lambda1 = 0.01, lambda2 = 0.1;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& w, const std::vector<double>& g) {
    ++t;
    if (m.empty()) m.assign(w.size(), type == optim::OptimizerType::AdaGrad ? 0.1 : 0.0);
    if (v.empty()) v.assign(w.size(), 0.0);
    for (std::size_t i = 0; i < w.size(); ++i) {
      switch (type) {
        case optim::OptimizerType::SGD:
          w[i] -= lr * g[i];
          break;
        case optim::OptimizerType::MomentumSGD:
          m[i] = mu * m[i] - lr * g[i];
          w[i] += m[i];
          break;
        case optim::OptimizerType::Nesterov: {
          const double prev = m[i];
          m[i] = mu * prev - lr * g[i];
          w[i] += -mu * prev + (1 + mu) * m[i];
          break;
        }
        case optim::OptimizerType::Adam: {
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          const double alpha = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
          w[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
          break;
        }
        case optim::OptimizerType::AdaGrad:
          m[i] += g[i] * g[i];
          w[i] -= lr * g[i] / (std::sqrt(m[i]) + eps);
          break;
        case optim::OptimizerType::RMSProp:
          m[i] = rms_beta * m[i] + (1 - rms_beta) * g[i] * g[i];
          w[i] -= lr * g[i] / (std::sqrt(m[i]) + eps);
          break;
        case optim::OptimizerType::Ftrl: {
          // FTRL-Proximal (McMahan et al. 2013, algorithm 1): m is n, v is z.
          const double n = m[i] + g[i] * g[i];
          const double sigma = (std::sqrt(n) - std::sqrt(m[i])) / lr;
          v[i] += g[i] - sigma * w[i];
          m[i] = n;
          w[i] = std::abs(v[i]) <= lambda1 ? 0.0
                                           : -(v[i] - (v[i] < 0 ? -lambda1 : lambda1)) /
                                                 ((ftrl_beta + std::sqrt(n)) / lr + lambda2);
          break;
        }
      }
    }
  }
};

class DenseOptimizerRules : public ::testing::TestWithParam<optim::OptimizerType> {};

TEST_P(DenseOptimizerRules, SeveralStepsMatchTheReference) {
  auto rng = ember::testing::make_rng();
  std::uniform_real_distribution<double> u(-1, 1);
  Fixture f;
  optim::OptimizerConfig c;
  c.type = GetParam();
  c.schedule.base_lr = 0.05f;
  c.momentum_factor = 0.9f;
  c.initial_accu_value = 0.1f;
  c.rmsprop_beta = 0.9f;
  c.ftrl_beta = 0.5f;
  c.lambda1 = 0.01f;
  c.lambda2 = 0.1f;
  DenseOptimizer opt(c, f.store);
  std::vector<double> w(13);
  for (auto& x : w)
    x = u(rng);
  f.set_weights(w);
  // Round the start to f32 as the store holds it.
  w = f.weights();
  Reference ref;
  ref.type = c.type;
  ref.lr = 0.05;
  for (int step = 0; step < 4; ++step) {
    std::vector<double> g(13);
    for (auto& x : g)
      x = static_cast<float>(u(rng));
    f.set_grads(g);
    EXPECT_FLOAT_EQ(opt.step(), 0.05f);
    ref.step(w, g);
    const auto got = f.weights();
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_NEAR(got[i], w[i], 2e-6 * (1 + std::abs(w[i])))
          << optim::optimizer_name(c.type) << " step " << step + 1 << " weight " << i;
    }
    for (double p : f.padding())
      ASSERT_EQ(p, 0.0) << "padding moved";
  }
  EXPECT_EQ(opt.steps(), 4);
  EXPECT_EQ(opt.state_count(), c.state_count());
}

INSTANTIATE_TEST_SUITE_P(
    All, DenseOptimizerRules,
    ::testing::Values(optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD,
                      optim::OptimizerType::Nesterov, optim::OptimizerType::Adam,
                      optim::OptimizerType::AdaGrad, optim::OptimizerType::RMSProp,
                      optim::OptimizerType::Ftrl),
    [](const ::testing::TestParamInfo<optim::OptimizerType>& info) {
      return std::string(optim::optimizer_name(info.param));
    });

TEST(DenseOptimizer, HandComputedSgdWithWarmupAndDecay) {
  Fixture f;
  optim::OptimizerConfig c;
  c.schedule = {.base_lr = 1.0f,
                .warmup_steps = 2,
                .decay_start = 4,
                .decay_steps = 2,
                .decay_power = 2.0f,
                .end_lr = 0.1f};
  DenseOptimizer opt(c, f.store);
  f.set_weights(std::vector<double>(13, 1.0));
  f.set_grads(std::vector<double>(13, 0.5));
  // Rates: warm-up 0.5, 1; hold 1, 1; decay 1 * ((4 + 2 - 5) / 2)^2 = 0.25; then end_lr.
  const float rates[] = {0.5f, 1.0f, 1.0f, 1.0f, 0.25f, 0.1f, 0.1f};
  double w = 1.0;
  for (float r : rates) {
    EXPECT_FLOAT_EQ(opt.step(), r);
    w -= r * 0.5;
    EXPECT_NEAR(f.weights()[5], w, 1e-6);
  }
  EXPECT_NEAR(f.weights()[0], 1.0 - 0.5 * 3.95, 1e-6);  // 0.5 + 1 + 1 + 1 + 0.25 + 0.1 + 0.1
}

TEST(DenseOptimizer, LossScalerAndRegularisersAreFoldedIn) {
  Fixture f;
  optim::OptimizerConfig c;
  c.schedule.base_lr = 0.1f;
  DenseOptimizer opt(c, f.store);
  std::vector<double> w{0.5, -0.25, 0.0, 1, 2, 3, -1, -2, -3, 0.125, 4, -4, 0.75};
  f.set_weights(w);
  std::vector<double> g(13, 0.2);
  // Gradients arrive multiplied by the loss scaler (128); L2 with lambda 0.8 over batch 4.
  std::vector<double> scaled(13);
  for (std::size_t i = 0; i < 13; ++i)
    scaled[i] = g[i] * 128;
  f.set_grads(scaled);
  RegularizerConfig l2{RegularizerConfig::Type::L2, 0.8, 4};
  opt.step(nullptr, 128.0f, l2);
  auto got = f.weights();
  for (std::size_t i = 0; i < 13; ++i) {
    EXPECT_NEAR(got[i], w[i] - 0.1 * (g[i] + 0.2 * w[i]), 1e-6) << i;
  }
  // L1: + lambda / B * sign(w), zero for a zero weight.
  w = got;
  f.set_grads(g);
  RegularizerConfig l1{RegularizerConfig::Type::L1, 0.8, 4};
  opt.step(nullptr, 1.0f, l1);
  got = f.weights();
  for (std::size_t i = 0; i < 13; ++i) {
    const double sign = (w[i] > 0) - (w[i] < 0);
    EXPECT_NEAR(got[i], w[i] - 0.1 * (g[i] + 0.2 * sign), 1e-6) << i;
  }
  for (double p : f.padding())
    ASSERT_EQ(p, 0.0) << "padding moved";
}

TEST(DenseOptimizer, RejectsUnallocatedStoresAndF64Masters) {
  auto store = std::make_shared<ParameterStore>(Place::host());
  store->declare("x.w", {4}, InitSpec{});
  EXPECT_THROW(DenseOptimizer(optim::OptimizerConfig{}, store), Error);
  auto f64 = std::make_shared<ParameterStore>(Place::host(), DType::F64, DType::F64);
  f64->declare("x.w", {4}, InitSpec{});
  f64->allocate();
  EXPECT_THROW(DenseOptimizer(optim::OptimizerConfig{}, f64), Error);
}

TEST(ParameterStore, BlocksAreContiguousAlignedAndMirrorEachOther) {
  Fixture f;
  const auto seg = f.store->weight_segments();
  ASSERT_EQ(seg.size(), 2u);
  EXPECT_EQ(seg[0].offset, 0);
  EXPECT_EQ(seg[1].offset, 64) << "256-byte aligned start (64 floats)";
  EXPECT_EQ(f.store->weights_numel(), 64 + 10);
  EXPECT_EQ(f.a->value().data(), f.store->weights().data());
  EXPECT_EQ(static_cast<const float*>(f.b->value().data()) -
                static_cast<const float*>(f.a->value().data()),
            64);
  EXPECT_EQ(
      static_cast<const float*>(f.b->grad().data()) - static_cast<const float*>(f.a->grad().data()),
      64);
  EXPECT_EQ(f.store->grads().numel(), f.store->weights_numel());
  for (double p : f.padding())
    EXPECT_EQ(p, 0.0);
}

}  // namespace
}  // namespace ember::network
