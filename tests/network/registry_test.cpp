// Building layers from JSON: every type in spec/config.md is known, and bad configurations give
// ConfigErrors that name the layer, the key, and expected vs actual shapes.
#include "ember/network/layer_registry.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ember/network/fc_chain.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"
#include "ember/network/layers/loss_layers.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

using testing::Graph;

// Builds `layer_json` on a fresh graph with inputs x [4, 6], e [4, 3, 6], label [4, 1] and
// returns the error message (or fails when nothing is thrown).
std::string error_of(const std::string& layer_json) {
  Graph g(Place::host(), DType::F32);
  g.input("x", {4, 6});
  g.input("e", {4, 3, 6});
  g.input("label", {4, 1}, false, DType::F32);
  try {
    g.add(layer_json);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for " << layer_json;
  return {};
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> needles) {
  for (const char* n : needles) {
    EXPECT_NE(message.find(n), std::string::npos) << "'" << n << "' not in: " << message;
  }
}

TEST(LayerRegistry, KnowsEveryDenseLayerTypeOfTheSpec) {
  for (const char* t : {"InnerProduct",
                        "FusedInnerProduct",
                        "ReLU",
                        "Sigmoid",
                        "ELU",
                        "PReLU_Dice",
                        "Dropout",
                        "BatchNorm",
                        "Concat",
                        "Reshape",
                        "Slice",
                        "Interaction",
                        "FmOrder2",
                        "MultiCross",
                        "WeightMultiply",
                        "Add",
                        "Sub",
                        "ElementwiseMultiply",
                        "DotProduct",
                        "ReduceSum",
                        "ReduceMean",
                        "Softmax",
                        "Scale",
                        "Gather",
                        "Cast",
                        "FusedReshapeConcat",
                        "MatrixMultiply",
                        "GRU",
                        "MultiHeadAttention",
                        "FusedReshapeConcatGeneral",
                        "ReLUHalf",
                        "BinaryCrossEntropyLoss",
                        "CrossEntropyLoss",
                        "MultiCrossEntropyLoss"}) {
    EXPECT_TRUE(is_dense_layer_type(t)) << t;
  }
  EXPECT_FALSE(is_dense_layer_type("Data"));
  EXPECT_FALSE(is_dense_layer_type("DistributedSlotSparseEmbeddingHash"));
  EXPECT_TRUE(is_loss_type("BinaryCrossEntropyLoss"));
  EXPECT_FALSE(is_loss_type("ReLU"));
}

TEST(LayerRegistry, UnknownTypeListsTheKnownTypes) {
  expect_mentions(error_of(R"({"name": "l", "type": "Relu", "bottom": "x", "top": "y"})"),
                  {"'l'", "Relu", "ReLU", "InnerProduct"});
}

TEST(LayerRegistry, UnknownAndMissingKeysNameLayerAndKey) {
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_outputs": 3}})"),
                  {"'fc1'", "InnerProduct", "fc_param.num_output", "missing"});
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_output": 3, "bias": 1}})"),
                  {"'fc1'", "unknown key \"fc_param.bias\""});
  expect_mentions(error_of(R"({"name": "r", "type": "ReLU", "bottom": "x", "top": "y",
                               "alpha": 1})"),
                  {"'r'", "unknown key \"alpha\""});
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_output": "many"}})"),
                  {"'fc1'", "fc_param.num_output", "integer", "many"});
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_output": 3, "weight_init": "Gauss"}})"),
                  {"fc1", "weight_init", "Gauss"});
  expect_mentions(error_of(R"({"name": "e1", "type": "ELU", "bottom": "x", "top": "y"})"),
                  {"'e1'", "elu_param", "missing"});
  expect_mentions(error_of(R"({"name": "loss", "type": "BinaryCrossEntropyLoss",
                               "bottom": ["x", "label"], "top": "l", "regularizer": "L3",
                               "lambda": 0.1})"),
                  {"'loss'", "L3"});
  expect_mentions(error_of(R"({"name": "loss", "type": "BinaryCrossEntropyLoss",
                               "bottom": ["x", "label"], "top": "l", "regularizer": "L2"})"),
                  {"'loss'", "lambda", "missing"});
  expect_mentions(error_of(R"({"type": "ReLU", "bottom": "x", "top": "y"})"), {"name"});
  expect_mentions(error_of(R"({"name": "r", "type": "ReLU", "top": "y"})"), {"'r'", "bottom"});
  // In the configuration reader's format, with the key's path inside the layer.
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_output": 0}})"),
                  {"layer 'fc1' (InnerProduct): \"fc_param.num_output\" must be an integer >= 1, "
                   "got 0"});
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_outputs": 3}})"),
                  {"layer 'fc1' (InnerProduct): \"fc_param.num_output\" is missing (found "
                   "\"fc_param.num_outputs\": a misspelling?)"});
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_output": 3, "bias_int": "Zero"}})"),
                  {"unknown key \"fc_param.bias_int\" (did you mean \"fc_param.bias_init\"?)"});
  expect_mentions(error_of(R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y",
                               "fc_param": {"num_output": 3, "weight_init": "Gauss"}})"),
                  {"\"fc_param.weight_init\" must be \"Uniform\", \"XavierNorm\", "
                   "\"XavierUniform\", \"Zero\" or \"Default\", got \"Gauss\""});
  expect_mentions(error_of(R"({"name": "f", "type": "FusedInnerProduct", "bottom": "x",
                               "top": "y", "activation": "Tanh", "fc_param": {"num_output": 3}})"),
                  {"layer 'f' (FusedInnerProduct): \"activation\" must be \"Relu\" or \"None\", "
                   "got \"Tanh\""});
  expect_mentions(error_of(R"({"name": "loss", "type": "BinaryCrossEntropyLoss",
                               "bottom": ["x", "label"], "top": "l", "regularizer": "L2",
                               "lambda": 0})"),
                  {"\"lambda\" must be a number > 0, got 0"});
  expect_mentions(error_of(R"({"name": "s", "type": "Scale", "bottom": "x", "top": "y",
                               "scale_param": {"axis": 2, "factor": 2}})"),
                  {"layer 's' (Scale): \"scale_param.axis\" must be an integer in [0, 1], got 2"});
  expect_mentions(error_of(R"({"name": "s", "type": "Slice", "bottom": "x", "top": ["a"],
                               "ranges": [[0, 2.5]]})"),
                  {"\"ranges[0][1]\" must be an integer, got 2.5"});
  expect_mentions(error_of(R"({"name": "r", "type": "ReLU", "bottom": [], "top": "y"})"),
                  {"layer 'r' (ReLU): \"bottom\" must be a tensor name or a non-empty list of "
                   "names, got []"});
  expect_mentions(error_of(R"({"type": "ReLU", "bottom": "x", "top": "y"})"),
                  {"the layer {\"bottom\":\"x\",\"top\":\"y\",\"type\":\"ReLU\"}: \"name\" is "
                   "missing"});
}

TEST(LayerRegistry, ShapeMismatchesShowExpectedAndActualShapes) {
  expect_mentions(error_of(R"({"name": "i", "type": "Interaction", "bottom": ["e", "x"],
                               "top": "y"})"),
                  {"'i'", "Interaction", "2-D", "[4, 3, 6]"});
  expect_mentions(error_of(R"({"name": "add", "type": "Add", "bottom": ["x", "e"], "top": "y"})"),
                  {"'add'", "[4, 6]", "[4, 3, 6]"});
  expect_mentions(error_of(R"({"name": "loss", "type": "BinaryCrossEntropyLoss",
                               "bottom": ["x", "label"], "top": "l"})"),
                  {"'loss'", "[batch, 1]", "[4, 6]"});
  expect_mentions(error_of(R"({"name": "s", "type": "Slice", "bottom": "x", "top": ["a"],
                               "ranges": [[2, 9]]})"),
                  {"'s'", "[2, 9)", "[0, 6)", "[4, 6]"});
  expect_mentions(error_of(R"({"name": "r", "type": "Reshape", "bottom": "x", "top": "y",
                               "leading_dim": 7})"),
                  {"'r'", "leading_dim 7", "24"});
  expect_mentions(error_of(R"({"name": "fm", "type": "FmOrder2", "bottom": "x", "top": "y",
                               "out_dim": 4})"),
                  {"'fm'", "out_dim 4", "[4, 6]"});
  expect_mentions(error_of(R"({"name": "wm", "type": "WeightMultiply", "bottom": "x", "top": "y",
                               "weight_dims": [5, 2]})"),
                  {"'wm'", "weight_dims[0] = 5", "[4, 6]"});
  expect_mentions(error_of(R"({"name": "mce", "type": "MultiCrossEntropyLoss",
                               "bottom": ["x", "label"], "top": "l", "target_weight": [1]})"),
                  {"'mce'", "[4, 6]", "[4, 1]"});
  expect_mentions(error_of(R"({"name": "g", "type": "GRU", "bottom": "e", "top": "y",
                               "gru_param": {"num_output": 4, "batchsize": 4, "SeqLength": 2,
                                             "vector_size": 6}})"),
                  {"layer 'g' (GRU): bottom 'e' [4, 3, 6] f32 must be [batch, SeqLength, "
                   "vector_size] = [batch, 2, 6] or [batch, SeqLength * vector_size] = [batch, "
                   "12]"});
  expect_mentions(error_of(R"({"name": "g", "type": "GRU", "bottom": "e", "top": "y",
                               "gru_param": {"num_output": 4, "SeqLength": 3,
                                             "vector_size": 6}})"),
                  {"layer 'g' (GRU): \"gru_param.batchsize\" is missing"});
  expect_mentions(error_of(R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["e", "e2"],
                               "top": "y", "num_attention_heads": 4})"),
                  {"'e2'", "does not exist"});
  expect_mentions(error_of(R"({"name": "f", "type": "FusedReshapeConcatGeneral",
                               "bottom": ["e", "x"], "top": "y"})"),
                  {"layer 'f' (FusedReshapeConcatGeneral): bottom 'x' [4, 6] f32 must be 3-D"});
  expect_mentions(error_of(R"({"name": "r", "type": "ReLU", "bottom": "nothing", "top": "y"})"),
                  {"'r'", "nothing", "does not exist"});
  expect_mentions(error_of(R"({"name": "r", "type": "ReLU", "bottom": "x", "top": "x"})"),
                  {"'r'", "'x'", "both a bottom and a top"});
}

// HugeCTR's criteo_bin sample reshapes [batch, 26, 64] with leading_dim 64: [batch x 26, 64] rows
// reach the loss, which says how many rows each label got and what to look at.
TEST(LayerRegistry, ALossWhoseRowsAreSlotsFoldedIntoTheBatchSaysSo) {
  Graph g(Place::host(), DType::F32);
  g.input("e", {4, 3, 6});
  g.input("label", {4, 1}, false, DType::F32);
  g.add(R"({"name": "r", "type": "Reshape", "bottom": "e", "top": "r", "leading_dim": 6})");
  g.add(R"({"name": "fc", "type": "InnerProduct", "bottom": "r", "top": "fc",
            "fc_param": {"num_output": 1}})");
  try {
    g.add(R"({"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"],
              "top": "l"})");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    expect_mentions(e.what(), {"labels 'label' [4, 1] f32 must have the batch of 'fc' [12, 1] f32",
                               "(3 rows of it for each label: does a Reshape before it fold slots "
                               "into the batch? Its leading_dim should be slots x width)"});
  }
}

TEST(LayerRegistry, AttentionChecksHeadsShapesAndMask) {
  auto error = [](const std::string& json, bool mask_grad = false) -> std::string {
    Graph g(Place::host(), DType::F32);
    g.input("q", {4, 3, 8});
    g.input("k", {4, 5, 8});
    g.input("v", {4, 5, 6});
    g.input("m", {4, 1, 3, 5}, mask_grad);
    try {
      g.add(json);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no ConfigError for " << json;
    return {};
  };
  expect_mentions(error(R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["q", "k", "k"],
                            "top": "y", "num_attention_heads": 3})"),
                  {"layer 'a' (MultiHeadAttention): num_attention_heads = 3 must divide the "
                   "hidden width 8"});
  expect_mentions(error(R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["q", "k", "v"],
                            "top": "y"})"),
                  {"'a'", "Q [batch, from, hidden]", "'v' [4, 5, 6]"});
  expect_mentions(error(R"({"name": "a", "type": "MultiHeadAttention",
                            "bottom": ["q", "k", "k", "m"], "top": "y"})",
                        true),
                  {"the mask 'm' [4, 1, 3, 5] f32 must not require a gradient"});
  expect_mentions(error(R"({"name": "a", "type": "MultiHeadAttention",
                            "bottom": ["q", "k", "k", "q"], "top": "y"})"),
                  {"the mask 'q' [4, 3, 8] f32 must be [batch, 1, from, to] = [4, 1, 3, 5]"});
  expect_mentions(error(R"({"name": "a", "type": "MultiHeadAttention", "bottom": ["q", "k", "k"],
                            "top": "y", "num_attention_heads": 0})"),
                  {"\"num_attention_heads\" must be an integer >= 1, got 0"});
}

TEST(LayerRegistry, HugeCtrFusedPositionsGetPlaceholderTops) {
  Graph g(Place::host(), DType::F32);
  g.input("x", {4, 6}, false);
  g.add(R"({"name": "fc1", "type": "FusedInnerProduct", "position": "Head",
            "bottom": "x", "top": ["h1", "m1", "d1", "b1"], "fc_param": {"num_output": 8}})");
  g.add(R"({"name": "fc2", "type": "FusedInnerProduct", "position": "Body",
            "bottom": ["h1", "m1", "d1", "b1"], "top": ["h2", "m2", "d2", "b2"],
            "fc_param": {"num_output": 5}})");
  g.add(R"({"name": "fc3", "type": "FusedInnerProduct", "position": "Tail", "activation": "None",
            "bottom": ["h2", "m2", "d2", "b2"], "top": "y", "fc_param": {"num_output": 1}})");
  g.finalize();
  EXPECT_EQ(g.blob("m1")->shape().numel(), 0);
  EXPECT_EQ(g.blob("y")->shape(), (Shape{4, 1}));
  EXPECT_FALSE(dynamic_cast<FullyConnectedLayer&>(g.layer(2)).relu());
  // On the CPU nothing chains (the chains are a CUDA feature).
  EXPECT_EQ(chain_fully_connected_layers(g.layer_ptrs()), 0);
  g.forward();
  g.backward();
  expect_mentions(error_of(R"({"name": "fc", "type": "FusedInnerProduct", "position": "Head",
                               "bottom": "x", "top": "y", "fc_param": {"num_output": 2}})"),
                  {"'fc'", "4 top(s)", "got 1"});
}

TEST(LayerRegistry, LossCarriesItsRegularizer) {
  Graph g(Place::host(), DType::F32);
  g.input("x", {4, 1});
  g.input("label", {4, 1}, false, DType::F32);
  auto& loss = dynamic_cast<LossLayer&>(
      g.add(R"({"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["x", "label"],
                "top": "l", "regularizer": "L2", "lambda": 0.5})"));
  EXPECT_EQ(loss.regularizer().type, RegularizerConfig::Type::L2);
  EXPECT_DOUBLE_EQ(loss.regularizer().lambda, 0.5);
  EXPECT_EQ(loss.regularizer().batch, 4);
  EXPECT_DOUBLE_EQ(loss.regularizer().coefficient(), 0.125);
}

// The loss value includes the regulariser term lambda/(2B) sum w^2 over every trainable weight.
TEST(LayerRegistry, RegularizerTermIsAddedToTheLoss) {
  for (const char* reg : {"L1", "L2"}) {
    Graph g(Place::host(), DType::F64);
    g.input("x", {4, 3}, false);
    g.input("label", {4, 1}, false, DType::F32);
    g.add(R"({"name": "fc", "type": "InnerProduct", "bottom": "x", "top": "z",
              "fc_param": {"num_output": 1}})");
    auto& loss = dynamic_cast<LossLayer&>(g.add(
        std::string(R"({"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["z", "label"],
                        "top": "l", "regularizer": ")") +
        reg + R"(", "lambda": 0.5})"));
    g.finalize(3);
    g.set_values("x", std::vector<double>(12, 0.0));
    g.set_values("label", {1, 0, 1, 0});
    g.forward();
    const auto w = testing::to_doubles(g.store().find("fc.weight")->value());
    const auto b = testing::to_doubles(g.store().find("fc.bias")->value());
    double term = 0;
    for (double v : w)
      term += std::string(reg) == "L1" ? std::abs(v) : v * v;
    term += std::string(reg) == "L1" ? std::abs(b[0]) : b[0] * b[0];
    term *= std::string(reg) == "L1" ? 0.5 / 4 : 0.5 / 8;
    // With x = 0 every logit is the bias.
    const double z = b[0];
    const double bce = std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z)));
    EXPECT_NEAR(loss.read_loss(), (2 * (bce - z) + 2 * bce) / 4 + term, 1e-12) << reg;
  }
}

}  // namespace
}  // namespace ember::network
