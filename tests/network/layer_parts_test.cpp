// The parts of a model its layers belong to (layer_parts.hpp), and DenseNetwork's per-part
// timing and input hooks (where another stream would hand over the embeddings) on the CPU.
#include "ember/network/layer_parts.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/core/part_timer.hpp"
#include "ember/network/dense_network.hpp"
#include "ember/tensor/ops.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

struct HostNetwork {
  std::shared_ptr<ParameterStore> store = std::make_shared<ParameterStore>(Place::host());
  std::unique_ptr<BuildContext> ctx;
  std::map<std::string, BlobPtr> inputs;
  std::unique_ptr<DenseNetwork> network;

  HostNetwork(const char* layers_json, std::int64_t rows, std::int64_t slots, std::int64_t width) {
    BuildOptions o;
    ctx = std::make_unique<BuildContext>(o, store);
    inputs["label"] = make_input_blob("label", {rows, 1}, DType::F32, Place::host(), false);
    inputs["dense"] = make_input_blob("dense", {rows, 13}, DType::F32, Place::host(), false);
    inputs["emb"] = make_input_blob("emb", {rows, slots, width}, DType::F32, Place::host(), true);
    std::vector<nlohmann::json> layers;
    for (const auto& l : nlohmann::json::parse(layers_json))
      layers.push_back(l);
    network = std::make_unique<DenseNetwork>(layers, inputs, *ctx);
    ctx->allocate();
    store->initialize(3);
    network->bind();
  }
  std::map<std::string, LayerPart> parts() const {
    std::map<std::string, LayerPart> out;
    const auto p = classify_layer_parts(network->layers());
    for (std::size_t i = 0; i < p.size(); ++i)
      out[network->layers()[i]->name()] = p[i];
    return out;
  }
};

constexpr const char* kDlrm = R"([
  {"name": "fc1", "type": "FusedInnerProduct", "bottom": "dense", "top": "fc1",
   "fc_param": {"num_output": 16}},
  {"name": "fc2", "type": "FusedInnerProduct", "bottom": "fc1", "top": "fc2",
   "fc_param": {"num_output": 8}},
  {"name": "interaction1", "type": "Interaction", "bottom": ["fc2", "emb"], "top": "inter"},
  {"name": "fc3", "type": "FusedInnerProduct", "bottom": "inter", "top": "fc3",
   "fc_param": {"num_output": 16}},
  {"name": "fc4", "type": "InnerProduct", "bottom": "fc3", "top": "fc4",
   "fc_param": {"num_output": 1}},
  {"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc4", "label"], "top": "loss"}
])";

// DCN's shape: the deep branch runs beside the cross network, not after it.
constexpr const char* kDcn = R"([
  {"name": "reshape1", "type": "Reshape", "bottom": "emb", "top": "flat", "leading_dim": 24},
  {"name": "concat1", "type": "Concat", "bottom": ["flat", "dense"], "top": "x0"},
  {"name": "slice1", "type": "Slice", "bottom": "x0", "ranges": [[0, 37], [0, 37]],
   "top": ["a", "b"]},
  {"name": "cross", "type": "MultiCross", "bottom": "a", "top": "cross", "mc_param": {"num_layers": 2}},
  {"name": "fc1", "type": "FusedInnerProduct", "bottom": "b", "top": "fc1",
   "fc_param": {"num_output": 16}},
  {"name": "concat2", "type": "Concat", "bottom": ["fc1", "cross"], "top": "both"},
  {"name": "fc2", "type": "InnerProduct", "bottom": "both", "top": "fc2",
   "fc_param": {"num_output": 1}},
  {"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc2", "label"], "top": "loss"}
])";

// Random dense features and embedding outputs, labels 1.
void fill_random(HostNetwork& n) {
  auto rng = testing::make_rng();
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const char* name : {"dense", "emb"}) {
    const Tensor& v = n.inputs[name]->value();
    for (std::int64_t i = 0; i < v.numel(); ++i)
      v.data<float>()[i] = u(rng);
  }
  ops::fill(n.inputs["label"]->value(), 1.0);
}

TEST(LayerParts, DlrmHasABottomMlpBeforeAndATopMlpAfterTheInteraction) {
  HostNetwork n(kDlrm, 5, 3, 8);
  const auto parts = n.parts();
  EXPECT_EQ(parts.at("fc1"), LayerPart::BottomMlp);
  EXPECT_EQ(parts.at("fc2"), LayerPart::BottomMlp);
  EXPECT_EQ(parts.at("interaction1"), LayerPart::Interaction);
  EXPECT_EQ(parts.at("fc3"), LayerPart::TopMlp);
  EXPECT_EQ(parts.at("fc4"), LayerPart::TopMlp);
  EXPECT_EQ(parts.at("loss"), LayerPart::Loss);
}

TEST(LayerParts, ABranchBesideTheInteractionIsBottomAndWhatJoinsItIsTop) {
  HostNetwork n(kDcn, 4, 3, 8);
  const auto parts = n.parts();
  EXPECT_EQ(parts.at("reshape1"), LayerPart::Other);
  EXPECT_EQ(parts.at("concat1"), LayerPart::Other);
  EXPECT_EQ(parts.at("cross"), LayerPart::Interaction);
  EXPECT_EQ(parts.at("fc1"), LayerPart::BottomMlp);
  EXPECT_EQ(parts.at("concat2"), LayerPart::Other);
  EXPECT_EQ(parts.at("fc2"), LayerPart::TopMlp);
  EXPECT_EQ(parts.at("loss"), LayerPart::Loss);
  EXPECT_STREQ(layer_part_name(LayerPart::TopMlp), "top MLP");
}

TEST(LayerParts, ANetworkWithATimerTimesEveryPartForwardAndBackward) {
  HostNetwork n(kDlrm, 7, 3, 8);
  fill_random(n);
  PartTimer timer(Place::host());
  n.network->set_part_timer(&timer);
  n.network->forward(true);
  n.network->backward();
  timer.end(nullptr);
  std::set<std::string> names;
  const std::int64_t bottom_intervals = timer.collect().front().intervals;
  EXPECT_EQ(bottom_intervals, 2);  // fc1 and fc2
  for (const auto& p : timer.collect()) {
    names.insert(p.name);
    EXPECT_GE(p.ms, 0.0);
    EXPECT_GE(p.intervals, 1);
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"bottom MLP forward", "interaction forward", "top MLP forward",
                                   "loss forward", "loss backward", "top MLP backward",
                                   "interaction backward", "bottom MLP backward"}));
  // Without the timer nothing more is recorded.
  n.network->set_part_timer(nullptr);
  n.network->forward(true);
  EXPECT_EQ(timer.collect().front().intervals, bottom_intervals);
}

const Blob& top_of(const DenseNetwork& n, const std::string& layer) {
  for (const LayerPtr& l : n.layers())
    if (l->name() == layer) return *l->tops().at(0);
  throw std::runtime_error("no layer " + layer);
}

bool all_nan(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

bool none_nan(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  return std::none_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

// One forward and backward with hooks on `input`, each of which must fire once. The outputs of
// the `poisoned` layers and their gradients start as NaN, so the hooks' checks see which layers
// had run when they fired.
void run_hooked(HostNetwork& n, const Blob* input, const std::vector<std::string>& poisoned,
                const std::function<void()>& before_first_use,
                const std::function<void()>& gradients_final) {
  int before_calls = 0, final_calls = 0;
  DenseNetwork::InputHooks hooks;
  hooks.inputs = {input};
  hooks.before_first_use = [&](StreamHandle) {
    ++before_calls;
    before_first_use();
  };
  hooks.gradients_final = [&](StreamHandle) {
    ++final_calls;
    gradients_final();
  };
  n.network->set_input_hooks(hooks);
  for (const std::string& layer : poisoned) {
    ops::fill(top_of(*n.network, layer).value(), std::nan(""));
    ops::fill(top_of(*n.network, layer).grad(), std::nan(""));
  }
  n.network->forward(true);
  n.network->backward();
  EXPECT_EQ(before_calls, 1);
  EXPECT_EQ(final_calls, 1);
}

TEST(InputHooks, TheLookupLandsBeforeItsFirstReaderAndTheGradientIsTakenBeforeTheBottomMlp) {
  HostNetwork n(kDlrm, 7, 3, 8);
  fill_random(n);
  const Tensor emb = n.inputs["emb"]->value();
  const Tensor looked_up = emb.clone();
  n.network->forward(true);
  n.network->backward();
  const double loss = n.network->loss().read_loss(nullptr);
  const std::vector<float> grad = n.inputs["emb"]->grad().to_vector<float>();

  // Again, with the embeddings written by the hook, as the lookup on another stream would be.
  ops::fill(emb, 0.0);
  std::vector<float> grad_at_hook;
  run_hooked(
      n, n.inputs["emb"].get(), {"fc1", "fc2", "interaction1"},
      [&] {
        EXPECT_TRUE(none_nan(top_of(*n.network, "fc2").value()));          // the bottom MLP ran
        EXPECT_TRUE(all_nan(top_of(*n.network, "interaction1").value()));  // its reader did not
        emb.copy_from(looked_up);
      },
      [&] {
        EXPECT_TRUE(none_nan(top_of(*n.network, "interaction1").grad()));
        EXPECT_TRUE(all_nan(top_of(*n.network, "fc1").grad()));  // the bottom MLP's backward waits
        grad_at_hook = n.inputs["emb"]->grad().to_vector<float>();
      });
  EXPECT_EQ(n.network->loss().read_loss(nullptr), loss);
  EXPECT_EQ(grad_at_hook, grad);
  EXPECT_EQ(n.inputs["emb"]->grad().to_vector<float>(), grad);
  EXPECT_TRUE(none_nan(top_of(*n.network, "fc1").grad()));
}

TEST(InputHooks, AViewAsTheFirstReaderHooksBeforeEveryLayerAndAfterTheWholeBackward) {
  HostNetwork n(kDcn, 4, 3, 8);
  fill_random(n);
  std::vector<float> grad_at_hook;
  run_hooked(
      n, n.inputs["emb"].get(), {"concat1"},
      [&] { EXPECT_TRUE(all_nan(top_of(*n.network, "concat1").value())); },
      [&] {
        EXPECT_TRUE(none_nan(top_of(*n.network, "concat1").grad()));
        grad_at_hook = n.inputs["emb"]->grad().to_vector<float>();
      });
  EXPECT_EQ(grad_at_hook, n.inputs["emb"]->grad().to_vector<float>());
}

TEST(InputHooks, InputsNoLayerReadsAreHookedAfterTheForwardAndBeforeTheBackward) {
  HostNetwork n(kDlrm, 5, 3, 8);
  fill_random(n);
  const BlobPtr unused = make_input_blob("unused", {5, 4}, DType::F32, Place::host(), true);
  run_hooked(
      n, unused.get(), {"fc4"}, [&] { EXPECT_TRUE(none_nan(top_of(*n.network, "fc4").value())); },
      [&] { EXPECT_TRUE(all_nan(top_of(*n.network, "fc4").grad())); });
  EXPECT_TRUE(none_nan(top_of(*n.network, "fc4").grad()));
}

}  // namespace
}  // namespace ember::network
