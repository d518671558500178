// Every layer on CUDA against the CPU: forward outputs, input gradients and parameter gradients,
// f32 (tight; TF32 off) and, where the layer has a mixed-precision version, f16 and bf16 (loose),
// on shapes 1, 7 and 251 x 511 x 1023. Plus the interaction's fast and generic paths, chained
// FC layers, initialisers, the dense optimizer and BCE at large logits on the device.
#include <gtest/gtest.h>

#include <cmath>

#include "ember/network/dense_optimizer.hpp"
#include "ember/network/fc_chain.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"
#include "ember/network/layers/loss_layers.hpp"
#include "layer_cases_support.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::nn::testing {
namespace {

double tolerance(DType t) {
  switch (t) {
    case DType::F16: return 6e-3;
    case DType::BF16: return 4e-2;
    default: return 2e-5;
  }
}

// Rounds values to what `dtype` can hold, so that the CPU reference sees the same inputs.
std::vector<double> rounded(std::vector<double> v, DType dtype) {
  for (auto& x : v) {
    if (dtype == DType::F16) x = static_cast<float>(Half(static_cast<float>(x)));
    if (dtype == DType::BF16) x = static_cast<float>(BFloat16(static_cast<float>(x)));
    if (dtype == DType::F32) x = static_cast<float>(x);
  }
  return v;
}

std::vector<double> random_values(const InputSpec& spec, std::mt19937_64& rng) {
  std::vector<double> v(static_cast<std::size_t>(spec.shape.numel()));
  if (spec.label) {
    std::uniform_int_distribution<int> bit(0, 1), mask(0, 4);
    for (auto& x : v) x = (spec.shape[1] > 1 && mask(rng) == 0) ? -1.0 : bit(rng);
  } else {
    std::uniform_real_distribution<double> u(spec.low, spec.high);
    for (auto& x : v) x = u(rng);
  }
  return v;
}

Graph build(const LayerCase& c, Place place, DType dtype, std::uint64_t init_seed) {
  Graph g(place, dtype);
  for (const auto& spec : c.inputs) {
    g.input(spec.name, spec.shape, spec.requires_grad,
            spec.label ? std::optional<DType>(DType::F32) : std::nullopt);
  }
  for (const auto& j : c.layers) g.add(j);
  g.finalize(init_seed);
  return g;
}

void expect_close(const std::vector<double>& gpu, const std::vector<double>& cpu, double tol,
                  const std::string& what) {
  const double err = relative_error(gpu, cpu);
  EXPECT_LE(err, tol) << what << " (" << gpu.size() << " values)";
}

struct DeviceCase {
  LayerCase c;
  DType dtype;
};
void PrintTo(const DeviceCase& d, std::ostream* os) { *os << d.c.name << " " << dtype_name(d.dtype); }

class LayersOnCuda : public ::testing::TestWithParam<DeviceCase> {};

TEST_P(LayersOnCuda, MatchTheCpu) {
  EMBER_REQUIRE_GPU();
  const LayerCase& c = GetParam().c;
  const DType dtype = GetParam().dtype;
  auto rng = ember::testing::make_rng();
  const std::uint64_t init_seed = rng();
  Graph cpu = build(c, Place::host(), DType::F32, init_seed);
  Graph gpu = build(c, Place::cuda(0), dtype, init_seed);
  const int chained = chain_fully_connected_layers(gpu.layer_ptrs());
  for (const auto& spec : c.inputs) {
    const auto v = rounded(random_values(spec, rng), spec.label ? DType::F32 : dtype);
    cpu.set_values(spec.name, v);
    gpu.set_values(spec.name, v);
  }
  cpu.forward(true);
  gpu.forward(true);
  const double tol = tolerance(dtype);
  const auto outs_cpu = cpu.outputs();
  for (const auto& out : outs_cpu) {
    expect_close(gpu.values(out->name()), cpu.values(out->name()), tol, "forward " + out->name());
  }
  // Losses: the loss value; otherwise random upstream gradients.
  for (const auto& out : outs_cpu) {
    if (!out->requires_grad()) continue;
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> r(static_cast<std::size_t>(out->shape().numel()));
    for (auto& x : r) x = u(rng);
    r = rounded(r, dtype);
    cpu.set_grad(out->name(), r);
    gpu.set_grad(out->name(), r);
  }
  cpu.backward();
  gpu.backward();
  for (const auto& in : cpu.inputs()) {
    if (!in->requires_grad()) continue;
    expect_close(gpu.grad(in->name()), cpu.grad(in->name()), tol, "gradient of " + in->name());
  }
  for (const auto& p : cpu.store().parameters()) {
    if (!p->trainable()) {
      expect_close(to_doubles(gpu.store().find(p->name())->value()), to_doubles(p->value()), tol,
                   "buffer " + p->name());
      continue;
    }
    expect_close(to_doubles(gpu.store().find(p->name())->grad()), to_doubles(p->grad()), tol,
                 "gradient of " + p->name());
  }
  if (c.name.rfind("MlpChain", 0) == 0) {
    RecordProperty("chained_pairs", chained);
    for (Layer* l : gpu.layer_ptrs()) {
      if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l)) {
        std::cout << "  " << fc->name() << ": " << fc->plan_summary() << "\n";
      }
    }
  }
}

std::vector<DeviceCase> device_params() {
  std::vector<DeviceCase> out;
  for (const auto& c : device_cases()) {
    out.push_back({c, DType::F32});
    if (c.half_ok) {
      out.push_back({c, DType::F16});
      out.push_back({c, DType::BF16});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllLayers, LayersOnCuda, ::testing::ValuesIn(device_params()),
                         [](const ::testing::TestParamInfo<DeviceCase>& info) {
                           return info.param.c.name + "_" +
                                  std::string(dtype_name(info.param.dtype));
                         });

// The FC layers' fallback path (plain products and Ember's own bias, ReLU and column-sum
// kernels), which only runs on the device when cuBLASLt lacks an epilogue, forced here.
TEST(FullyConnectedOnCuda, FallbackWithoutEpiloguesMatchesTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (const auto& c : device_cases()) {
    if (c.name.rfind("MlpWithLoss", 0) != 0 && c.name.rfind("MlpChain", 0) != 0) continue;
    for (DType dtype : {DType::F32, DType::BF16}) {
      Graph cpu = build(c, Place::host(), DType::F32, 5);
      Graph gpu = build(c, Place::cuda(0), dtype, 5);
      for (Layer* l : gpu.layer_ptrs()) {
        if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l)) fc->set_epilogues(false);
      }
      EXPECT_EQ(chain_fully_connected_layers(gpu.layer_ptrs()), 0);
      for (const auto& spec : c.inputs) {
        const auto v = rounded(random_values(spec, rng), spec.label ? DType::F32 : dtype);
        cpu.set_values(spec.name, v);
        gpu.set_values(spec.name, v);
      }
      cpu.forward();
      gpu.forward();
      for (const auto& out : cpu.outputs()) {
        expect_close(gpu.values(out->name()), cpu.values(out->name()), tolerance(dtype),
                     c.name + " forward");
        if (!out->requires_grad()) continue;
        std::vector<double> r(static_cast<std::size_t>(out->shape().numel()), 0.25);
        cpu.set_grad(out->name(), r);
        gpu.set_grad(out->name(), r);
      }
      cpu.backward();
      gpu.backward();
      for (const auto& p : cpu.store().parameters()) {
        expect_close(to_doubles(gpu.store().find(p->name())->grad()), to_doubles(p->grad()),
                     tolerance(dtype), c.name + " gradient of " + p->name());
      }
      for (Layer* l : gpu.layer_ptrs()) {
        if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l)) {
          EXPECT_EQ(fc->plan_summary().find("forward none"), 0u) << fc->plan_summary();
        }
      }
    }
  }
}

// The interaction at DLRM's shape (fast path) and at shapes only the generic kernels take.
TEST(InteractionOnCuda, FastAndGenericPathsMatchTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (auto [batch, emb, width] : {std::tuple{1000, 26, 128}, std::tuple{33, 31, 12},
                                   std::tuple{17, 32, 4}, std::tuple{9, 3, 130},
                                   std::tuple{5, 40, 8}}) {
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      LayerCase c{"Interaction",
                  {InputSpec{"mlp", {batch, width}}, InputSpec{"emb", {batch, emb, width}}},
                  {R"({"name": "i", "type": "Interaction", "bottom": ["mlp", "emb"],
                       "top": "y"})"},
                  true};
      Graph cpu = build(c, Place::host(), DType::F32, 1);
      Graph gpu = build(c, Place::cuda(0), dtype, 1);
      for (const auto& spec : c.inputs) {
        const auto v = rounded(random_values(spec, rng), dtype);
        cpu.set_values(spec.name, v);
        gpu.set_values(spec.name, v);
      }
      cpu.forward();
      gpu.forward();
      const std::string what = std::to_string(batch) + "x" + std::to_string(emb) + "x" +
                               std::to_string(width) + " " + std::string(dtype_name(dtype));
      const auto y = gpu.values("y");
      expect_close(y, cpu.values("y"), tolerance(dtype), "forward " + what);
      const std::int64_t ow = width + emb * (emb + 1) / 2 + 1;
      for (std::int64_t b = 0; b < batch; ++b) {
        ASSERT_EQ(y[static_cast<std::size_t>(b * ow + ow - 1)], 0.0) << "padding, " << what;
      }
      std::vector<double> r(static_cast<std::size_t>(batch * ow));
      std::uniform_real_distribution<double> u(-1, 1);
      for (auto& x : r) x = u(rng);
      r = rounded(r, dtype);
      cpu.set_grad("y", r);
      gpu.set_grad("y", r);
      cpu.backward();
      gpu.backward();
      expect_close(gpu.grad("mlp"), cpu.grad("mlp"), tolerance(dtype), "mlp gradient " + what);
      expect_close(gpu.grad("emb"), cpu.grad("emb"), tolerance(dtype), "emb gradient " + what);
    }
  }
}

TEST(InitializersOnCuda, SameSeedGivesIdenticalValues) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  const std::uint64_t seed = rng();
  for (DType compute : {DType::F32, DType::BF16}) {
    ParameterStore host(Place::host());
    ParameterStore dev(Place::cuda(0), DType::F32, compute);
    for (ParameterStore* s : {&host, &dev}) {
      s->declare("a.w", {37, 11}, InitSpec{InitKind::XavierNorm, 37, 11});
      s->declare("a.b", {1, 11}, InitSpec{InitKind::Uniform, 0, 11});
      s->declare("c.w", {1023}, InitSpec{InitKind::XavierUniform, 1023, 1});
      s->allocate();
      s->initialize(seed);
    }
    EXPECT_EQ(dev.weights().to_vector<float>(), host.weights().to_vector<float>());
    if (compute == DType::BF16) {
      const auto masters = host.weights().to_vector<float>();
      const auto copy = to_doubles(dev.compute_weights());
      for (std::size_t i = 0; i < masters.size(); ++i) {
        ASSERT_EQ(copy[i], static_cast<float>(BFloat16(masters[i]))) << i;
      }
    }
  }
}

TEST(DenseOptimizerOnCuda, EveryRuleMatchesTheCpuOverSeveralSteps) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (OptimizerType type : {OptimizerType::SGD, OptimizerType::MomentumSGD,
                             OptimizerType::Nesterov, OptimizerType::Adam,
                             OptimizerType::AdaGrad}) {
    auto host = std::make_shared<ParameterStore>(Place::host());
    auto dev = std::make_shared<ParameterStore>(Place::cuda(0), DType::F32, DType::F16);
    for (auto* s : {host.get(), dev.get()}) {
      s->declare("a.w", {251, 7}, InitSpec{InitKind::XavierUniform, 251, 7});
      s->declare("a.b", {1, 7}, InitSpec{InitKind::Uniform, 0, 7});
      s->allocate();
      s->initialize(11);
    }
    OptimizerConfig c;
    c.type = type;
    c.schedule.base_lr = 0.01f;
    c.schedule.warmup_steps = 3;
    c.momentum_factor = 0.9f;
    c.initial_accu_value = 0.5f;
    DenseOptimizer on_host(c, host), on_dev(c, dev);
    const RegularizerConfig l2{RegularizerConfig::Type::L2, 0.3, 64};
    for (int step = 0; step < 5; ++step) {
      std::vector<double> g(static_cast<std::size_t>(host->weights_numel()));
      std::uniform_real_distribution<double> u(-1, 1);
      for (auto& x : g) x = static_cast<float>(u(rng) * 1024);
      // Padding gradients stay zero.
      std::vector<double> mask(g.size(), 0.0);
      for (const auto& s : host->weight_segments()) {
        for (std::int64_t i = 0; i < s.numel; ++i) mask[static_cast<std::size_t>(s.offset + i)] = 1;
      }
      for (std::size_t i = 0; i < g.size(); ++i) g[i] *= mask[i];
      from_doubles(host->grads(), g);
      from_doubles(dev->grads(), g);
      EXPECT_FLOAT_EQ(on_dev.step(nullptr, 1024.0f, l2), on_host.step(nullptr, 1024.0f, l2));
      synchronize_device(0);
      expect_close(to_doubles(dev->weights()), to_doubles(host->weights()), 1e-6,
                   std::string(optimizer_name(type)) + " weights");
      for (int s = 0; s < on_host.state_count(); ++s) {
        expect_close(to_doubles(on_dev.state(s)), to_doubles(on_host.state(s)), 1e-6,
                     std::string(optimizer_name(type)) + " state");
      }
    }
    const auto masters = to_doubles(dev->weights());
    const auto copy = to_doubles(dev->compute_weights());
    for (std::size_t i = 0; i < masters.size(); ++i) {
      ASSERT_EQ(copy[i], static_cast<float>(Half(static_cast<float>(masters[i])))) << i;
    }
  }
}

TEST(LossOnCuda, BinaryCrossEntropyIsStableAtLargeLogits) {
  EMBER_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Graph g(Place::cuda(0), dtype);
    g.input("x", {4, 1});
    g.input("y", {4, 1}, false, DType::F32);
    auto& loss = dynamic_cast<LossLayer&>(g.add(
        R"({"name": "l", "type": "BinaryCrossEntropyLoss", "bottom": ["x", "y"], "top": "v"})"));
    g.finalize();
    g.set_values("x", {50, -50, 50, -50});
    g.set_values("y", {1, 1, 0, 0});
    g.forward();
    const double small = std::log1p(std::exp(-50.0));
    EXPECT_NEAR(loss.read_loss(), (2 * small + 2 * (50 + small)) / 4, 1e-4) << dtype_name(dtype);
    g.backward();
    const auto gx = g.grad("x");
    const std::vector<double> want{0.0, -0.25, 0.25, 0.0};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(gx[i], want[i], 1e-3) << dtype_name(dtype) << " " << i;
  }
}

}  // namespace
}  // namespace ember::nn::testing
