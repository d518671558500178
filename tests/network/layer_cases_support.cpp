#include "layer_cases_support.hpp"

#include <tuple>

#include "ember/core/error.hpp"

namespace ember::network::testing {

namespace {

InputSpec in(std::string name, Shape shape, bool grad = true, double low = -1, double high = 1) {
  return InputSpec{std::move(name), shape, grad, low, high, false};
}
InputSpec label(std::string name, Shape shape) {
  return InputSpec{std::move(name), shape, false, 0, 1, true};
}
// 0/1 values in the graph's dtype, no gradient (an attention mask).
InputSpec mask(std::string name, Shape shape) {
  InputSpec m{std::move(name), shape, false, 0, 1, false};
  m.binary = true;
  return m;
}

// Gradient-check shapes are small; `b` is the batch.
std::vector<LayerCase> make_cases(std::int64_t b, std::int64_t n, std::int64_t m, std::int64_t k) {
  std::vector<LayerCase> c;
  c.push_back({"ReLU",
               {in("x", {b, n})},
               {R"({"name": "act", "type": "ReLU", "bottom": "x", "top": "y"})"}});
  c.push_back({"Sigmoid",
               {in("x", {b, n}, true, -3, 3)},
               {R"({"name": "act", "type": "Sigmoid", "bottom": "x", "top": "y"})"}});
  c.push_back({"ELU",
               {in("x", {b, n}, true, -2, 2)},
               {R"({"name": "act", "type": "ELU", "bottom": "x", "top": "y",
                    "elu_param": {"alpha": 0.7}})"}});
  c.push_back({"PReLU_Dice",
               {in("x", {b, n}, true, -2, 2)},
               {R"({"name": "dice", "type": "PReLU_Dice", "bottom": "x", "top": "y",
                    "prelu_dice_param": {"alpha": 0.25, "epsilon": 0.001}})"}});
  c.push_back({"Dropout",
               {in("x", {b, n})},
               {R"({"name": "drop", "type": "Dropout", "bottom": "x", "top": "y", "rate": 0.3})"}});
  // DeepFM's deep branch: on CUDA the dropout's backward applies fc1's ReLU gradient.
  c.push_back({"FcDropoutFc",
               {in("x", {b, n})},
               {cat(R"({"name": "fc1", "type": "FusedInnerProduct", "bottom": "x", "top": "h",
                    "fc_param": {"num_output": )",
                    m, R"(, "bias_init": "Uniform"}})"),
                R"({"name": "drop", "type": "Dropout", "bottom": "h", "top": "d", "rate": 0.3})",
                R"({"name": "fc2", "type": "InnerProduct", "bottom": "d", "top": "y",
                    "fc_param": {"num_output": 1}})"}});
  // One output over rows a multiple of 16 bytes long (the CUDA kernels' packed path), and over
  // more rows than one chunk of the column sums with rows wider than one panel of the CUDA
  // backward (1096 features at the device cases' largest size).
  c.push_back({"OneOutput",
               {in("x", {b, 16}), in("z", {b, 200}), in("v", {4 * b + 3, 2 * n + 74})},
               {R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "y1",
                    "fc_param": {"num_output": 1, "bias_init": "Uniform"}})",
                R"({"name": "fc2", "type": "InnerProduct", "bottom": "z", "top": "y2",
                    "fc_param": {"num_output": 1, "bias_init": "Uniform"}})",
                R"({"name": "fc3", "type": "InnerProduct", "bottom": "v", "top": "y3",
                    "fc_param": {"num_output": 1, "bias_init": "Uniform"}})"}});
  c.push_back({"BatchNorm",
               {in("x", {b, n}, true, -2, 3)},
               {R"({"name": "bn", "type": "BatchNorm", "bottom": "x", "top": "y",
                    "bn_param": {"factor": 0.9, "eps": 1e-5, "gamma_init": "XavierUniform",
                                 "beta_init": "Uniform"}})"}});
  c.push_back({"InnerProduct",
               {in("x", {b, n})},
               {cat(R"({"name": "fc", "type": "InnerProduct", "bottom": "x", "top": "y",
                    "fc_param": {"num_output": )",
                    m, R"(, "bias_init": "Uniform"}})")}});
  c.push_back({"FusedInnerProduct",
               {in("x", {b, n})},
               {cat(R"({"name": "fc", "type": "FusedInnerProduct", "bottom": "x", "top": "y",
                    "fc_param": {"num_output": )",
                    m, R"(, "weight_init": "XavierUniform",
                                 "bias_init": "Uniform"}})")}});
  c.push_back({"FusedInnerProduct3D",
               {in("x", {2, b, n})},
               {cat(R"({"name": "fc", "type": "FusedInnerProduct", "bottom": "x", "top": "y",
                    "fc_param": {"num_output": )",
                    m, R"(}})")}});
  c.push_back({"MlpChain",
               {in("x", {b, n}, false)},
               {cat(R"({"name": "fc1", "type": "FusedInnerProduct", "bottom": "x", "top": "h1",
                    "fc_param": {"num_output": )",
                    k, R"(}})"),
                cat(R"({"name": "fc2", "type": "FusedInnerProduct", "bottom": "h1", "top": "h2",
                    "fc_param": {"num_output": )",
                    m, R"(, "bias_init": "Uniform"}})"),
                R"({"name": "fc3", "type": "InnerProduct", "bottom": "h2", "top": "y",
                    "fc_param": {"num_output": 3}})"}});
  // DLRM's first layer reads 13 dense features (26 bytes per row in 16 bits): on CUDA the FC
  // layer runs its products on a zero-padded copy (fully_connected_layer.hpp).
  c.push_back({"BottomMlp",
               {in("x", {b, 13}, false)},
               {cat(R"({"name": "fc1", "type": "FusedInnerProduct", "bottom": "x", "top": "h",
                    "fc_param": {"num_output": )",
                    k, R"(}})"),
                cat(R"({"name": "fc2", "type": "FusedInnerProduct", "bottom": "h", "top": "y",
                    "fc_param": {"num_output": )",
                    m, R"(, "bias_init": "Uniform"}})")}});
  // The chain with every width a multiple of 8: no padding anywhere, so chaining and the plain
  // products run on the layers' own buffers.
  const auto by8 = [](std::int64_t v) { return (v + 7) / 8 * 8; };
  c.push_back({"MlpChainAligned",
               {in("x", {b, by8(n)}, false)},
               {cat(R"({"name": "fc1", "type": "FusedInnerProduct", "bottom": "x", "top": "h1",
                    "fc_param": {"num_output": )",
                    by8(k), R"(}})"),
                cat(R"({"name": "fc2", "type": "FusedInnerProduct", "bottom": "h1", "top": "h2",
                    "fc_param": {"num_output": )",
                    by8(m), R"(, "bias_init": "Uniform"}})"),
                R"({"name": "fc3", "type": "InnerProduct", "bottom": "h2", "top": "y",
                    "fc_param": {"num_output": 8}})"}});
  c.push_back({"Cast",
               {in("x", {b, n})},
               {R"({"name": "cast", "type": "Cast", "bottom": "x", "top": "y"})"}});
  c.push_back({"Concat",
               {in("a", {b, n}), in("c", {b, 2})},
               {R"({"name": "cat", "type": "Concat", "bottom": ["a", "c"], "top": "y"})"}});
  c.push_back({"Concat3D",
               {in("a", {b, 3, 2}), in("c", {b, 3, 4})},
               {R"({"name": "cat", "type": "Concat", "bottom": ["a", "c"], "top": "y",
                    "axis": 2})"}});
  c.push_back({"Reshape",
               {in("x", {b, 6})},
               {R"({"name": "r", "type": "Reshape", "bottom": "x", "top": "v", "leading_dim": 3})",
                R"({"name": "act", "type": "Sigmoid", "bottom": "v", "top": "y"})"}});
  c.push_back({"ReshapeSelected",
               {in("x", {b, 4, 3})},
               {R"({"name": "r", "type": "Reshape", "bottom": "x", "top": "y",
                    "selected": [2, 0, 2]})"}});
  c.push_back({"Slice",
               {in("x", {b, 8})},
               {R"({"name": "s", "type": "Slice", "bottom": "x", "top": ["y0", "y1"],
                    "ranges": [[0, 3], [2, 8]]})"}});
  // DCN's: two tops over the whole width (the backward copies the first instead of zeroing).
  c.push_back({"SliceWhole",
               {in("x", {b, 8})},
               {R"({"name": "s", "type": "Slice", "bottom": "x", "top": ["y0", "y1", "y2"],
                    "ranges": [[1, 5], [0, 8], [0, 8]]})"}});
  // DeepFM's: 11-wide rows into 10 and 1 (the backward puts them back together in one pass).
  c.push_back({"SliceSplit",
               {in("x", {b, 11})},
               {R"({"name": "s", "type": "Slice", "bottom": "x", "top": ["y0", "y1"],
                    "ranges": [[0, 10], [10, 11]]})"}});
  {
    // More bottoms than one CUDA launch of column pieces takes, of widths 1 to 3.
    LayerCase many{"ConcatMany", {}, {}};
    std::string names;
    for (int i = 0; i < 11; ++i) {
      const std::string name = cat("a", i);
      many.inputs.push_back(in(name, {b, 1 + i % 3}));
      names += cat(i == 0 ? "" : ", ", "\"", name, "\"");
    }
    many.layers.push_back(
        cat(R"({"name": "cat", "type": "Concat", "bottom": [)", names, R"(], "top": "y"})"));
    c.push_back(std::move(many));
  }
  c.push_back({"Interaction",
               {in("mlp", {b, 4}), in("emb", {b, 5, 4})},
               {R"({"name": "i", "type": "Interaction", "bottom": ["mlp", "emb"], "top": "y"})"}});
  c.push_back({"FmOrder2",
               {in("x", {b, 12})},
               {R"({"name": "fm", "type": "FmOrder2", "bottom": "x", "top": "y", "out_dim": 4})"}});
  c.push_back({"MultiCross",
               {in("x", {b, n})},
               {R"({"name": "mc", "type": "MultiCross", "bottom": "x", "top": "y",
                    "mc_param": {"num_layers": 3, "bias_init": "Uniform"}})"}});
  c.push_back({"WeightMultiply",
               {in("x", {b, 4})},
               {R"({"name": "wm", "type": "WeightMultiply", "bottom": "x", "top": "y",
                    "weight_dims": [4, 5]})"}});
  c.push_back({"Add",
               {in("a", {b, n}), in("c", {b, n}), in("d", {b, n})},
               {R"({"name": "add", "type": "Add", "bottom": ["a", "c", "d"], "top": "y"})"}});
  c.push_back({"Sub",
               {in("a", {b, n}), in("c", {b, n})},
               {R"({"name": "sub", "type": "Sub", "bottom": ["a", "c"], "top": "y"})"}});
  c.push_back({"ElementwiseMultiply",
               {in("a", {b, n}), in("c", {b, n}), in("d", {b, n})},
               {R"({"name": "mul", "type": "ElementwiseMultiply", "bottom": ["a", "c", "d"],
                    "top": "y"})"}});
  c.push_back({"DotProduct",
               {in("a", {b, n}), in("c", {b, n})},
               {R"({"name": "dot", "type": "DotProduct", "bottom": ["a", "c"], "top": "y"})"}});
  c.push_back({"ReduceSum",
               {in("x", {b, 3, 4})},
               {R"({"name": "rs", "type": "ReduceSum", "bottom": "x", "top": "y", "axis": 1})"}});
  c.push_back({"ReduceMean",
               {in("x", {b, 3, 4})},
               {R"({"name": "rm", "type": "ReduceMean", "bottom": "x", "top": "y", "axis": 2})"}});
  c.push_back({"Softmax",
               {in("x", {b, n}, true, -3, 3)},
               {R"({"name": "sm", "type": "Softmax", "bottom": "x", "top": "y"})"}});
  c.push_back({"ScaleAxis0",
               {in("x", {b, n})},
               {R"({"name": "sc", "type": "Scale", "bottom": "x", "top": "y",
                    "scale_param": {"axis": 0, "factor": 3}})"}});
  c.push_back({"ScaleAxis1",
               {in("x", {b, n})},
               {R"({"name": "sc", "type": "Scale", "bottom": "x", "top": "y",
                    "scale_param": {"axis": 1, "factor": 2}})"}});
  c.push_back(
      {"Gather", {in("x", {6, n})}, {R"({"name": "g", "type": "Gather", "bottom": "x", "top": "y",
                    "indices": [4, 1, 4, 0]})"}});
  c.push_back({"MatrixMultiply",
               {in("a", {3, n}), in("c", {n, 5})},
               {R"({"name": "mm", "type": "MatrixMultiply", "bottom": ["a", "c"], "top": "y"})"}});
  c.push_back({"MatrixMultiply3D",
               {in("a", {b, 3, 4}), in("c", {b, 4, 2})},
               {R"({"name": "mm", "type": "MatrixMultiply", "bottom": ["a", "c"], "top": "y"})"}});
  c.push_back({"FusedReshapeConcat",
               {in("a", {b, 3, 2}), in("c", {b, 3, 3})},
               {R"({"name": "frc", "type": "FusedReshapeConcat", "bottom": ["a", "c"],
                    "top": ["item", "ad"]})"}});
  c.push_back({"ReLUHalf",
               {in("x", {b, n})},
               {R"({"name": "act", "type": "ReLUHalf", "bottom": "x", "top": "y"})"}});
  c.push_back({"FusedReshapeConcatGeneral",
               {in("a", {b, 3, 2}), in("c", {b, 3, 3})},
               {R"({"name": "frcg", "type": "FusedReshapeConcatGeneral", "bottom": ["a", "c"],
                    "top": "y"})"}});
  // GRU over [batch, SeqLength, vector_size] and over the flat [batch, SeqLength * vector_size].
  c.push_back({"GRU",
               {in("x", {b, 3, n})},
               {cat(R"({"name": "gru", "type": "GRU", "bottom": "x", "top": "y",
                    "gru_param": {"num_output": )",
                    k, R"(, "batchsize": )", b, R"(, "SeqLength": 3, "vector_size": )", n,
                    R"(, "bias_init": "Uniform"}})")}});
  c.push_back({"GRUFlat",
               {in("x", {b, 8})},
               {cat(R"({"name": "gru", "type": "GRU", "bottom": "x", "top": "y",
                    "gru_param": {"num_output": 3, "batchsize": )",
                    b, R"(, "SeqLength": 4, "vector_size": 2, "weight_init": "Uniform"}})")}});
  // A GRU between 16-bit layers: the network casts around it.
  c.push_back({"GRUInMlp",
               {in("x", {b, 6}, false)},
               {R"({"name": "fc1", "type": "InnerProduct", "bottom": "x", "top": "h",
                    "fc_param": {"num_output": 8}})",
                R"({"name": "gru", "type": "GRU", "bottom": "h", "top": "s",
                    "gru_param": {"num_output": 5, "batchsize": 1, "SeqLength": 2,
                                  "vector_size": 4, "bias_init": "Uniform"}})",
                R"({"name": "fc2", "type": "InnerProduct", "bottom": "s", "top": "y",
                    "fc_param": {"num_output": 3}})"}});
  c.push_back({"MultiHeadAttention",
               {in("q", {b, 3, 8}), in("k", {b, 5, 8}), in("v", {b, 5, 8})},
               {R"({"name": "mha", "type": "MultiHeadAttention", "bottom": ["q", "k", "v"],
                    "top": "y", "num_attention_heads": 2})"}});
  c.push_back(
      {"MultiHeadAttentionMasked",
       {in("q", {b, 3, 8}), in("k", {b, 5, 8}), in("v", {b, 5, 8}), mask("m", {b, 1, 3, 5})},
       {R"({"name": "mha", "type": "MultiHeadAttention", "bottom": ["q", "k", "v", "m"],
                    "top": "y", "num_attention_heads": 4, "transpose_b": true})"}});
  // More positions than a warp has lanes, wider heads.
  c.push_back({"MultiHeadAttentionWide",
               {in("q", {b, 7, 64}), in("k", {b, 37, 64}), in("v", {b, 37, 64})},
               {R"({"name": "mha", "type": "MultiHeadAttention", "bottom": ["q", "k", "v"],
                    "top": "y", "num_attention_heads": 4})"}});
  c.push_back({"BinaryCrossEntropyLoss",
               {in("x", {b, 1}, true, -4, 4), label("label", {b, 1})},
               {R"({"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["x", "label"],
                    "top": "loss"})"}});
  c.push_back({"CrossEntropyLoss",
               {in("x", {b, 2}, true, -3, 3), label("label", {b, 1})},
               {R"({"name": "loss", "type": "CrossEntropyLoss", "bottom": ["x", "label"],
                    "top": "loss"})"}});
  c.push_back({"MultiCrossEntropyLoss",
               {in("x", {b, 3}, true, -3, 3), label("label", {b, 3})},
               {R"({"name": "loss", "type": "MultiCrossEntropyLoss", "bottom": ["x", "label"],
                    "top": "loss", "target_weight": [0.5, 1.0, 2.0]})"}});
  c.push_back({"MlpWithLoss",
               {in("x", {b, n}, false), label("label", {b, 1})},
               {cat(R"({"name": "fc1", "type": "FusedInnerProduct", "bottom": "x", "top": "h",
                    "fc_param": {"num_output": )",
                    k, R"(}})"),
                R"({"name": "fc2", "type": "InnerProduct", "bottom": "h", "top": "logit",
                    "fc_param": {"num_output": 1}})",
                R"({"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["logit", "label"],
                    "top": "loss"})"}});
  return c;
}

}  // namespace

const std::vector<LayerCase>& gradient_cases() {
  static const std::vector<LayerCase> cases = make_cases(5, 6, 4, 7);
  return cases;
}

const std::vector<LayerCase>& device_cases() {
  static const std::vector<LayerCase> cases = [] {
    std::vector<LayerCase> all;
    for (auto [b, n, m, k] :
         {std::tuple{1, 1, 1, 1}, std::tuple{7, 7, 7, 7}, std::tuple{251, 511, 1023, 129}}) {
      for (auto c : make_cases(b, n, m, k)) {
        c.name = cat(c.name, "_", b, "x", n, "x", m);
        all.push_back(std::move(c));
      }
    }
    return all;
  }();
  return cases;
}

const std::vector<LayerCase>& deep_batch_cases() {
  static const std::vector<LayerCase> cases = [] {
    std::vector<LayerCase> deep;
    for (auto c : make_cases(4099, 40, 16, 24)) {
      if (c.name != "MlpChain" && c.name != "BottomMlp") continue;
      c.name = cat(c.name, "_4099x40x16");
      deep.push_back(std::move(c));
    }
    return deep;
  }();
  return cases;
}

}  // namespace ember::network::testing
