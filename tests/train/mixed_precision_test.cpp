// Mixed precision for every configuration of the tree, checked without a GPU: each one's dense
// network, built for f16 and bf16 activations on a CUDA place (reserving, never allocating),
// takes 16-bit bottoms in every layer with no cast inserted; and the test-sized configurations
// that session_gpu_test trains in f16 and bf16 train on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "ember/network/dense_network.hpp"
#include "ember/network/layer_registry.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

struct DryGraph {
  std::shared_ptr<network::ParameterStore> store;
  std::unique_ptr<network::BuildContext> ctx;
  std::unique_ptr<network::DenseNetwork> network;
};

// The replica's dense network (replica.cpp) on cuda:0 with `half` activations, unallocated.
DryGraph build_dry(const ModelConfig& c, DType half, bool training) {
  DryGraph g;
  const Place place = Place::cuda(0);
  g.store = std::make_shared<network::ParameterStore>(place, DType::F32, half);
  network::BuildOptions o;
  o.place = place;
  o.activation_dtype = half;
  o.loss_scaler = c.solver.loss_scaler;
  o.build_gradients = training;
  g.ctx = std::make_unique<network::BuildContext>(o, g.store);
  const std::int64_t rows = 64;
  std::map<std::string, network::BlobPtr> inputs;
  inputs[c.data.label_top] = std::make_shared<network::Blob>(
      c.data.label_top, Shape{rows, c.data.label_dim}, DType::F32, place, false);
  if (c.data.dense_dim > 0) {
    inputs[c.data.dense_top] = std::make_shared<network::Blob>(
        c.data.dense_top, Shape{rows, c.data.dense_dim}, half, place, false);
  }
  for (const auto& e : c.embeddings) {
    inputs[e.top] = std::make_shared<network::Blob>(e.top, Shape{rows, e.slot_num, e.vec_size},
                                                    half, place, training);
  }
  g.network = std::make_unique<network::DenseNetwork>(c.dense_layers, inputs, *g.ctx);
  return g;
}

TEST(MixedPrecision, EveryConfigBuildsIn16BitsWithoutCasts) {
  for (const std::string& name : all_config_names()) {
    nlohmann::json json = test_sized_config(name);
    json["solver"]["mixed_precision"] = true;
    const ModelConfig c = parse_model_config(json, name);
    for (DType half : {DType::F16, DType::BF16}) {
      for (bool training : {true, false}) {
        const std::string what = cat(name, " ", dtype_name(half), training ? " train" : " eval");
        const DryGraph g = build_dry(c, half, training);
        const auto& layers = g.network->layers();
        // Every layer of these models computes in 16 bits: nothing to cast.
        EXPECT_EQ(layers.size(), c.dense_layers.size()) << what;
        for (const auto& l : layers) {
          const bool loss = network::is_loss_type(l->type());
          for (std::size_t i = 0; i < l->bottoms().size(); ++i) {
            const DType d = l->bottoms()[i]->dtype();
            if (!is_floating(d)) continue;
            EXPECT_EQ(d, loss && i == 1 ? DType::F32 : half)
                << what << ": " << l->describe() << " bottom " << i;
          }
          for (const auto& t : l->tops()) {
            if (!is_floating(t->dtype())) continue;
            EXPECT_EQ(t->dtype(), loss ? DType::F32 : half) << what << ": " << l->describe();
          }
        }
      }
    }
  }
}

// What session_gpu_test's mixed-precision run uses, at the same sizes, on the CPU in f32: the
// configurations, their generated datasets (Raw for Criteo-Kaggle) and the solver overrides load
// and train.
TEST(MixedPrecision, TestSizedConfigsTrainOnTheCpu) {
  for (const std::string& name : all_config_names()) {
    const nlohmann::json json = test_sized_config(name);
    auto data = make_dataset(json, 2000);
    std::ostringstream sink;
    SessionOptions o;
    o.progress = false;
    o.out = &sink;
    o.device = "cpu";
    Session s(tiny_config(json, *data, 128, 3,
                          {"solver.mixed_precision=true", "solver.mixed_precision_dtype=bf16"}),
              o);
    const auto losses = s.train().losses;
    ASSERT_EQ(losses.size(), 3u) << name;
    for (const auto& [iteration, loss] : losses)
      EXPECT_TRUE(std::isfinite(loss)) << name << " iteration " << iteration;
    EXPECT_GT(s.evaluate().samples, 0) << name;
  }
}

}  // namespace
}  // namespace ember::train
