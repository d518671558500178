// Mixed precision's casts (precision.hpp), checked without a GPU: the plan for each kind of layer,
// and networks built for 16-bit activations on a CUDA place, reserving but never allocating, so
// their structure can be inspected on any machine.
#include "ember/network/precision.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ember/network/dense_network.hpp"
#include "ember/network/layer_registry.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

constexpr DType kHalves[] = {DType::F16, DType::BF16};

BuildOptions on_cuda(DType activations) {
  BuildOptions o;
  o.place = Place::cuda(0);
  o.activation_dtype = activations;
  return o;
}

TEST(PlanCasts, NothingOnTheCpuOrInF32Networks) {
  BuildOptions cpu;
  EXPECT_TRUE(plan_casts("GRU", {DType::F32}, cpu).empty());
  EXPECT_TRUE(plan_casts("Concat", {DType::F32, DType::F32}, on_cuda(DType::F32)).empty());
  EXPECT_TRUE(plan_casts("GRU", {DType::F32}, on_cuda(DType::F32)).empty());
}

TEST(PlanCasts, LayersComputingInTheirBottomsDtypeGetNone) {
  for (DType half : kHalves) {
    for (const std::string& type : dense_layer_types()) {
      if (cuda_compute(type) != CudaCompute::BottomDtype || is_loss_type(type)) continue;
      EXPECT_TRUE(plan_casts(type, {half, half, half}, on_cuda(half)).empty()) << type;
    }
    // FusedInnerProduct's extra bottoms are u8 placeholders; losses' labels are f32.
    EXPECT_TRUE(plan_casts("FusedInnerProduct", {half, DType::U8}, on_cuda(half)).empty());
    for (const char* loss : {"BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"})
      EXPECT_TRUE(plan_casts(loss, {half, DType::F32}, on_cuda(half)).empty()) << loss;
  }
}

// Which types compute in f32 only is a deliberate list: a new entry must come with its reason in
// its header and docs/network.md.
TEST(PlanCasts, OnlyGruComputesInF32) {
  std::vector<std::string> f32_only;
  for (const std::string& type : dense_layer_types()) {
    if (cuda_compute(type) == CudaCompute::F32) f32_only.push_back(type);
  }
  EXPECT_EQ(f32_only, std::vector<std::string>{"GRU"});
}

TEST(PlanCasts, F32LayersAreCastAroundAndExplicitF32IsKept) {
  for (DType half : kHalves) {
    const CastPlan plan = plan_casts("GRU", {half}, on_cuda(half));
    ASSERT_EQ(plan.bottoms.size(), 1u);
    EXPECT_EQ(plan.bottoms[0], DType::F32);
    EXPECT_EQ(plan.tops, half);
    // An explicit Cast to f32 before it: the configuration asked for f32, tops stay f32.
    EXPECT_TRUE(plan_casts("GRU", {DType::F32}, on_cuda(half)).empty());
  }
}

TEST(PlanCasts, LabelsBecomeF32AndMixedBottomsTheActivationDtype) {
  for (DType half : kHalves) {
    const CastPlan loss = plan_casts("BinaryCrossEntropyLoss", {half, half}, on_cuda(half));
    EXPECT_EQ(loss.bottoms[0], std::nullopt);
    EXPECT_EQ(loss.bottoms[1], DType::F32);
    EXPECT_EQ(loss.tops, std::nullopt);
    const CastPlan concat = plan_casts("Concat", {DType::F32, half, half}, on_cuda(half));
    EXPECT_EQ(concat.bottoms[0], half);
    EXPECT_EQ(concat.bottoms[1], std::nullopt);
    EXPECT_EQ(concat.bottoms[2], std::nullopt);
    EXPECT_EQ(concat.tops, std::nullopt);
    // An attention mask given in f32 joins its 16-bit queries, keys and values.
    const CastPlan mha =
        plan_casts("MultiHeadAttention", {half, half, half, DType::F32}, on_cuda(half));
    EXPECT_EQ(mha.bottoms[3], half);
  }
}

// A network on a CUDA place without memory: input blobs are never bound, nothing is allocated.
struct DryNetwork {
  std::shared_ptr<ParameterStore> store;
  std::unique_ptr<BuildContext> ctx;
  std::map<std::string, BlobPtr> inputs;
  std::unique_ptr<DenseNetwork> network;

  DryNetwork(const std::vector<nlohmann::json>& layers, DType half,
             const std::map<std::string, std::pair<Shape, DType>>& input_shapes) {
    store = std::make_shared<ParameterStore>(Place::cuda(0), DType::F32, half);
    ctx = std::make_unique<BuildContext>(on_cuda(half), store);
    for (const auto& [name, s] : input_shapes) {
      const bool label = s.second == DType::F32;
      inputs[name] = std::make_shared<Blob>(name, s.first, s.second, Place::cuda(0), !label);
    }
    network = std::make_unique<DenseNetwork>(layers, inputs, *ctx);
  }
  const Layer& layer(const std::string& name) const {
    for (const auto& l : network->layers()) {
      if (l->name() == name) return *l;
    }
    throw std::runtime_error("no layer " + name);
  }
};

std::vector<nlohmann::json> parse_all(const std::vector<const char*>& texts) {
  std::vector<nlohmann::json> out;
  for (const char* t : texts)
    out.push_back(nlohmann::json::parse(t));
  return out;
}

TEST(MixedPrecisionNetwork, CastsSurroundAGruBetween16BitLayers) {
  const auto layers = parse_all({
      R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "h",
          "fc_param": {"num_output": 8}})",
      R"({"name": "gru", "type": "GRU", "bottom": "h", "top": "s",
          "gru_param": {"num_output": 5, "batchsize": 4, "SeqLength": 2, "vector_size": 4}})",
      R"({"name": "fc2", "type": "InnerProduct", "bottom": "s", "top": "logit",
          "fc_param": {"num_output": 1}})",
      R"({"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["logit", "label"],
          "top": "loss"})",
  });
  for (DType half : kHalves) {
    DryNetwork d(layers, half, {{"x", {{4, 6}, half}}, {"label", {{4, 1}, DType::F32}}});
    std::vector<std::string> order;
    for (const auto& l : d.network->layers())
      order.push_back(l->name() + ":" + l->type());
    EXPECT_EQ(order, (std::vector<std::string>{"fc1:InnerProduct", "gru/cast/h:Cast", "gru:GRU",
                                               "gru/cast/s:Cast", "fc2:InnerProduct",
                                               "loss:BinaryCrossEntropyLoss"}));
    const Layer& gru = d.layer("gru");
    EXPECT_EQ(gru.bottoms()[0]->name(), "gru/h/f32");
    EXPECT_EQ(gru.bottoms()[0]->dtype(), DType::F32);
    EXPECT_TRUE(gru.bottoms()[0]->requires_grad());
    EXPECT_EQ(gru.tops()[0]->name(), "gru/s/f32");
    EXPECT_EQ(gru.tops()[0]->dtype(), DType::F32);
    // The consumer reads the configured name, in 16 bits.
    const Layer& fc2 = d.layer("fc2");
    EXPECT_EQ(fc2.bottoms()[0]->name(), "s");
    EXPECT_EQ(fc2.bottoms()[0]->dtype(), half);
    EXPECT_EQ(fc2.bottoms()[0]->shape(), (Shape{4, 10}));
    EXPECT_EQ(d.layer("fc1").tops()[0]->dtype(), half);
    EXPECT_EQ(d.network->loss().bottoms()[1]->dtype(), DType::F32);
  }
}

TEST(MixedPrecisionNetwork, NativeLayersGetNoCasts) {
  const auto layers = parse_all({
      R"({"name": "bn", "type": "BatchNorm", "bottom": "x", "top": "b",
          "bn_param": {"factor": 0.9, "eps": 1e-5}})",
      R"({"name": "dice", "type": "PReLU_Dice", "bottom": "b", "top": "d",
          "prelu_dice_param": {"alpha": 0.2, "epsilon": 1e-8}})",
      R"({"name": "mc", "type": "MultiCross", "bottom": "d", "top": "m",
          "mc_param": {"num_layers": 2}})",
      R"({"name": "wm", "type": "WeightMultiply", "bottom": "m", "top": "w",
          "weight_dims": [6, 2]})",
      R"({"name": "sm", "type": "Softmax", "bottom": "w", "top": "p"})",
      R"({"name": "mean", "type": "ReduceMean", "bottom": "p", "top": "rm", "axis": 1})",
      R"({"name": "fc", "type": "InnerProduct", "bottom": "rm", "top": "two",
          "fc_param": {"num_output": 2}})",
      R"({"name": "loss", "type": "CrossEntropyLoss", "bottom": ["two", "label"],
          "top": "loss"})",
  });
  for (DType half : kHalves) {
    DryNetwork d(layers, half, {{"x", {{4, 6}, half}}, {"label", {{4, 1}, DType::F32}}});
    EXPECT_EQ(d.network->layers().size(), layers.size()) << dtype_name(half);
    for (const auto& l : d.network->layers()) {
      if (l.get() == &d.network->loss()) continue;
      for (const auto& t : l->tops())
        EXPECT_EQ(t->dtype(), half) << l->describe();
    }
  }
}

}  // namespace
}  // namespace ember::network
