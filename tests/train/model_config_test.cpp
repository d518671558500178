// The configuration parser: the sample configurations parse; each bad configuration is refused
// with a message that names the layer and the key or tensor.
#include "ember/train/model_config.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember::train {
namespace {

using nlohmann::json;

// A small valid model: data -> embedding -> bottom MLP -> interaction -> top MLP -> loss.
json base_config() {
  return json::parse(R"({
    "solver": {"max_iter": 10, "batchsize": 64, "display": 5, "eval_interval": 5},
    "optimizer": {"type": "Adam", "adam_hparam": {"learning_rate": 0.001}},
    "layers": [
      {"name": "data", "type": "Data", "source": "train.txt", "eval_source": "eval.txt",
       "check": "Sum", "label": {"top": "label", "label_dim": 1},
       "dense": {"top": "dense", "dense_dim": 13},
       "sparse": [{"top": "data1", "type": "DistributedSlot", "max_feature_num_per_sample": 26,
                   "slot_num": 26}]},
      {"name": "sparse_embedding1", "type": "DistributedSlotSparseEmbeddingHash",
       "bottom": "data1", "top": "sparse_embedding1",
       "sparse_embedding_hparam": {"workspace_size_per_gpu_in_mb": 4, "embedding_vec_size": 8,
                                   "combiner": "sum"}},
      {"name": "fc1", "type": "FusedInnerProduct", "bottom": "dense", "top": "fc1",
       "fc_param": {"num_output": 8}},
      {"name": "interaction1", "type": "Interaction", "bottom": ["fc1", "sparse_embedding1"],
       "top": "interaction1"},
      {"name": "fc2", "type": "InnerProduct", "bottom": "interaction1", "top": "fc2",
       "fc_param": {"num_output": 1}},
      {"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc2", "label"],
       "top": "loss"}
    ]})");
}

json& layer(json& c, const std::string& name) {
  for (json& l : c["layers"]) {
    if (l["name"] == name) return l;
  }
  throw std::runtime_error("no layer " + name);
}

TEST(ModelConfig, SampleConfigsParse) {
  for (const char* name : {"dlrm", "deepfm", "wide_and_deep", "dcn"}) {
    const auto path = testing::source_dir() / "configs" / (std::string(name) + ".json");
    const ModelConfig c = load_model_config(path);
    EXPECT_FALSE(c.embeddings.empty()) << name;
    EXPECT_FALSE(c.dense_layers.empty()) << name;
    EXPECT_EQ(c.loss_top, "loss") << name;
    EXPECT_GT(c.solver.max_iter, 0) << name;
  }
}

TEST(ModelConfig, ReadsTheBlocks) {
  const ModelConfig c = parse_model_config(base_config(), "test");
  EXPECT_EQ(c.solver.batchsize, 64);
  EXPECT_EQ(c.solver.batchsize_eval, 64);
  EXPECT_EQ(c.optimizer.type, optim::OptimizerType::Adam);
  EXPECT_EQ(c.data.dense_dim, 13);
  ASSERT_EQ(c.embeddings.size(), 1u);
  EXPECT_EQ(c.embeddings[0].vec_size, 8);
  EXPECT_EQ(c.embeddings[0].slot_num, 26);
  EXPECT_EQ(c.dense_layers.size(), 4u);
  EXPECT_EQ(c.embedding_reading("data1"), &c.embeddings[0]);
}

TEST(ModelConfig, AcceptsOlderHugeCtrSpellings) {
  json c = base_config();
  c["solver"]["eval_batches"] = 7;
  c["optimizer"]["adam_hparam"] = {{"alpha", 0.005}};
  auto& hp = layer(c, "sparse_embedding1")["sparse_embedding_hparam"];
  hp.erase("workspace_size_per_gpu_in_mb");
  hp["vocabulary_size"] = 10000;
  hp["load_factor"] = 0.75;
  // Keys accepted for compatibility and ignored.
  layer(c, "sparse_embedding1")["plan_file"] = "./all2all_plan_bi_1.json";
  c["all_reduce"] = {{"algo", "Oneshot"}};
  c["solver"]["cuda_graph"] = true;
  c["optimizer"]["sgd_hparam"] = {{"learning_rate", 1}};
  layer(c, "data")["async_param"] = {{"num_threads", 4}};
  const ModelConfig m = parse_model_config(c, "test");
  EXPECT_EQ(m.solver.max_eval_batches, 7);
  EXPECT_FLOAT_EQ(m.optimizer.schedule.base_lr, 0.005f);
  EXPECT_EQ(m.embeddings[0].max_vocabulary_size_per_gpu, 10000);
}

TEST(ModelConfig, HugeCtrsOlderFormatIsNamedAsSuch) {
  json c = base_config();
  c["data"] = {{"source", "./file_list.txt"}, {"eval_source", "./file_list_test.txt"}};
  try {
    (void)parse_model_config(c, "criteo_bn.json");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("criteo_bn.json: a top-level \"data\" object is "
                                         "HugeCTR's older configuration format"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelConfig, MixedPrecisionTakesAScalerAndA16BitType) {
  json c = base_config();
  EXPECT_FALSE(parse_model_config(c, "test").solver.mixed_precision);
  c["solver"]["mixed_precision"] = true;
  ModelConfig m = parse_model_config(c, "test");
  EXPECT_TRUE(m.solver.mixed_precision);
  EXPECT_EQ(m.solver.loss_scaler, 1024.0f);
  EXPECT_EQ(m.solver.mixed_precision_dtype, DType::F16);  // HugeCTR's half
  c["solver"]["mixed_precision"] = 256;
  c["solver"]["mixed_precision_dtype"] = "bf16";
  m = parse_model_config(c, "test");
  EXPECT_EQ(m.solver.loss_scaler, 256.0f);
  EXPECT_EQ(m.solver.mixed_precision_dtype, DType::BF16);
  c["solver"]["mixed_precision_dtype"] = "fp16";
  EXPECT_EQ(parse_model_config(c, "test").solver.mixed_precision_dtype, DType::F16);
}

struct BadCase {
  const char* name;
  std::function<void(json&)> mutate;
  std::vector<const char*> expected;  // substrings of the message
};

TEST(ModelConfig, BadConfigsAreRefusedWithClearMessages) {
  const std::vector<BadCase> cases = {
      {"unknown top-level key", [](json& c) { c["solvr"] = json::object(); }, {"solvr"}},
      {"unknown solver key",
       [](json& c) { c["solver"]["batch_size"] = 3; },
       {"solver", "batch_size"}},
      {"both iteration limits",
       [](json& c) { c["solver"]["num_epochs"] = 1; },
       {"max_iter", "num_epochs"}},
      {"no batch size", [](json& c) { c["solver"].erase("batchsize"); }, {"batchsize", "missing"}},
      {"bad metric",
       [](json& c) { c["solver"]["eval_metrics"] = {"AUC:x"}; },
       {"eval_metrics", "AUC:x"}},
      {"unknown optimizer", [](json& c) { c["optimizer"]["type"] = "Adamax"; }, {"Adamax"}},
      {"first layer not Data",
       [](json& c) { std::swap(c["layers"][0], c["layers"][1]); },
       {"first layer", "Data"}},
      {"unknown layer type",
       [](json& c) { layer(c, "fc1")["type"] = "Convolution"; },
       {"fc1", "Convolution"}},
      {"unknown layer key",
       [](json& c) { layer(c, "fc1")["fc_param"]["num_outputs"] = 3; },
       {"fc1", "num_outputs"}},
      {"missing bottom",
       [](json& c) { layer(c, "fc2")["bottom"] = "nothere"; },
       {"fc2", "nothere", "earlier layer"}},
      {"duplicate top",
       [](json& c) { layer(c, "fc2")["top"] = "fc1"; },
       {"fc2", "fc1", "already produced"}},
      {"own top as bottom", [](json& c) { layer(c, "fc1")["top"] = "dense"; }, {"fc1", "dense"}},
      {"tensor read twice",
       [](json& c) { layer(c, "fc2")["bottom"] = "fc1"; },
       {"fc2", "fc1", "already read"}},
      {"no loss", [](json& c) { c["layers"].erase(c["layers"].size() - 1); }, {"no loss layer"}},
      {"layer after the loss",
       [](json& c) {
         c["layers"].push_back(
             {{"name", "late"}, {"type", "ReLU"}, {"bottom", "loss"}, {"top", "late"}});
       },
       {"late", "after the loss"}},
      {"embedding reads no sparse input",
       [](json& c) { layer(c, "sparse_embedding1")["bottom"] = "dense"; },
       {"sparse_embedding1", "sparse input"}},
      {"unknown embedding key",
       [](json& c) { layer(c, "sparse_embedding1")["sparse_embedding_hparam"]["vec_size"] = 8; },
       {"sparse_embedding1", "vec_size"}},
      {"bad Data check", [](json& c) { layer(c, "data")["check"] = "Crc"; }, {"Crc"}},
      {"missing name", [](json& c) { layer(c, "fc1").erase("name"); }, {"name"}},
      // The configuration reader's format: `where: "key" must be ..., got ...`.
      {"misspelt batchsize",
       [](json& c) {
         c["solver"].erase("batchsize");
         c["solver"]["batch_size"] = 64;
       },
       {"solver: \"batchsize\" is missing (found \"batch_size\": a misspelling?)"}},
      {"negative display",
       [](json& c) { c["solver"]["display"] = -1; },
       {"solver: \"display\" must be an integer >= 0, got -1"}},
      {"solver flag",
       [](json& c) { c["solver"]["enable_tf32_compute"] = "yes"; },
       {"solver: \"enable_tf32_compute\" must be true or false (or 1 or 0), got \"yes\""}},
      {"embedding dtype",
       [](json& c) { c["solver"]["embedding_dtype"] = "fp8"; },
       {"solver: \"embedding_dtype\"", "f16", "bf16", "fp8"}},
      {"embedding rounding",
       [](json& c) { c["solver"]["embedding_rounding"] = "down"; },
       {"solver: \"embedding_rounding\"", "stochastic", "nearest"}},
      {"optimizer hparam",
       [](json& c) { c["optimizer"]["adam_hparam"]["beta1"] = "x"; },
       {"optimizer: \"adam_hparam.beta1\" must be a number, got \"x\""}},
      {"dense layer key path",
       [](json& c) { layer(c, "fc1")["fc_param"]["num_output"] = 2.5; },
       {"layer 'fc1' (FusedInnerProduct): \"fc_param.num_output\" must be an integer >= 1, "
        "got 2.5"}},
      {"data layer key path",
       [](json& c) { layer(c, "data")["dense"]["dense_dim"] = -1; },
       {"layer 'data' (Data): \"dense.dense_dim\" must be an integer in [0, 2147483647], "
        "got -1"}},
      {"embedding key path",
       [](json& c) {
         layer(c, "sparse_embedding1")["sparse_embedding_hparam"]["embedding_vec_size"] = "8";
       },
       {"layer 'sparse_embedding1' (DistributedSlotSparseEmbeddingHash): "
        "\"sparse_embedding_hparam.embedding_vec_size\" must be an integer, got \"8\""}},
      {"16-bit type without mixed precision",
       [](json& c) { c["solver"]["mixed_precision_dtype"] = "bf16"; },
       {"solver: \"mixed_precision_dtype\" is given without \"mixed_precision\""}},
      {"unknown 16-bit type",
       [](json& c) {
         c["solver"]["mixed_precision"] = true;
         c["solver"]["mixed_precision_dtype"] = "fp8";
       },
       {"solver: \"mixed_precision_dtype\" must be \"f16\", \"fp16\" or \"bf16\", got \"fp8\""}},
      {"unknown top-level key with a close spelling",
       [](json& c) { c["all_reduc"] = json::object(); },
       {"test: unknown key \"all_reduc\" (did you mean \"all_reduce\"?)"}},
  };
  for (const BadCase& bad : cases) {
    json c = base_config();
    bad.mutate(c);
    try {
      (void)parse_model_config(c, "test");
      ADD_FAILURE() << bad.name << ": no error";
    } catch (const ConfigError& e) {
      for (const char* s : bad.expected) {
        EXPECT_NE(std::string(e.what()).find(s), std::string::npos)
            << bad.name << ": '" << s << "' not in: " << e.what();
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << bad.name << ": not a ConfigError: " << e.what();
    }
  }
}

TEST(ModelConfig, EmbeddingDtypeReachesEveryEmbedding) {
  json c = base_config();
  EXPECT_EQ(parse_model_config(c, "test").embeddings.at(0).value_dtype, DType::F32);
  c["solver"]["embedding_dtype"] = "bf16";
  c["solver"]["embedding_rounding"] = "nearest";
  const ModelConfig m = parse_model_config(c, "test");
  EXPECT_EQ(m.solver.embedding_dtype, DType::BF16);
  for (const auto& e : m.embeddings) {
    EXPECT_EQ(e.value_dtype, DType::BF16);
    EXPECT_FALSE(e.stochastic_rounding);
  }
}

TEST(ModelConfig, UnusedTopIsAnError) {
  json c = base_config();
  // fc_side reads fc2 and its top is never read; the loss reads fc_side2 instead.
  auto& layers = c["layers"];
  layers.insert(layers.begin() + 5, json{{"name", "split"},
                                         {"type", "Slice"},
                                         {"bottom", "fc2"},
                                         {"top", {"a", "b"}},
                                         {"ranges", {{0, 1}, {0, 1}}}});
  layer(c, "loss")["bottom"] = {"a", "label"};
  try {
    (void)parse_model_config(c, "test");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'b' is never used"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("split"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, OverridesSetValuesByPath) {
  json c = base_config();
  apply_override(c, "solver.batchsize=256");
  apply_override(c, "layers.data.source=/data/x.txt");
  apply_override(c, "layers.4.fc_param.num_output=2");
  apply_override(c, "optimizer.adam_hparam.learning_rate=0.5");
  EXPECT_EQ(c["solver"]["batchsize"], 256);
  EXPECT_EQ(layer(c, "data")["source"], "/data/x.txt");
  EXPECT_EQ(layer(c, "fc2")["fc_param"]["num_output"], 2);
  EXPECT_EQ(c["optimizer"]["adam_hparam"]["learning_rate"], 0.5);
  EXPECT_THROW(apply_override(c, "solver"), ConfigError);
  EXPECT_THROW(apply_override(c, "layers.nosuch.x=1"), ConfigError);
  EXPECT_THROW(apply_override(c, "missing.key=1"), ConfigError);
}

TEST(ModelConfig, SyntaxErrorsNameFileLineAndColumn) {
  testing::ScratchDir dir;
  const auto path = dir / "bad.json";
  std::ofstream(path) << "{\n  \"solver\": {\n    \"max_iter\": 10,,\n  }\n}\n";
  try {
    (void)load_model_config(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json:3:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model_config(dir / "absent.json"), ConfigError);
}

}  // namespace
}  // namespace ember::train
