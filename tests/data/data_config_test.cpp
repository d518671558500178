// Parsing HugeCTR's Data layer strictly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ember/core/error.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/data_config.hpp"

namespace ember::data {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json dlrm_layer() {
  return json::parse(R"({
    "name": "data", "type": "Data", "source": "./train/_file_list.txt",
    "eval_source": "./val/_file_list.txt", "check": "Sum",
    "label": {"top": "label", "label_dim": 1},
    "dense": {"top": "dense", "dense_dim": 13},
    "sparse": [{"top": "data1", "type": "DistributedSlot", "max_feature_num_per_sample": 30,
                "slot_num": 26}]
  })");
}

std::string config_error(const json& j) {
  try {
    parse_data_layer(j, "layers[0] (\"data\")");
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for " << j.dump();
  return {};
}

TEST(DataConfig, ParsesHugeCtrDataLayer) {
  const DataConfig c = parse_data_layer(dlrm_layer(), "layers[0]");
  EXPECT_EQ(c.format, DataFormat::Norm);
  EXPECT_EQ(c.check, CheckMode::Sum);
  EXPECT_EQ(c.source, "./train/_file_list.txt");
  EXPECT_EQ(c.eval_source, "./val/_file_list.txt");
  EXPECT_EQ(c.label_dim, 1);
  EXPECT_EQ(c.dense_dim, 13);
  ASSERT_EQ(c.sparse.size(), 1u);
  EXPECT_EQ(c.sparse[0].top, "data1");
  EXPECT_EQ(c.sparse[0].type, SparseInputType::DistributedSlot);
  EXPECT_EQ(c.sparse[0].max_feature_num_per_sample, 30);
  EXPECT_EQ(c.sparse[0].max_nnz, 30);  // HugeCTR's default
  EXPECT_EQ(c.sparse[0].slot_num, 26);
  EXPECT_EQ(c.total_slots(), 26);
  const BatchLayout layout = BatchLayout::from_config(c, DType::I64);
  EXPECT_EQ(layout.key_type, DType::I64);
  EXPECT_EQ(layout.total_slots(), 26);
}

TEST(DataConfig, ParsesRawWithSlotSizes) {
  json j = dlrm_layer();
  j["format"] = "Raw";
  j["num_samples"] = 1000;
  j["eval_num_samples"] = 100;
  j["check"] = "None";
  j["float_label_dense"] = true;
  j["slot_size_array"] = json::array();
  for (int i = 0; i < 26; ++i)
    j["slot_size_array"].push_back(10 + i);
  j["sparse"][0]["max_nnz"] = 1;
  j["sparse"][0]["type"] = "LocalizedSlot";
  j["num_workers"] = 4;
  j["cache_eval_data"] = true;
  const DataConfig c = parse_data_layer(j, "layers[0]");
  EXPECT_EQ(c.format, DataFormat::Raw);
  EXPECT_EQ(c.num_samples, 1000);
  EXPECT_EQ(c.eval_num_samples, 100);
  EXPECT_TRUE(c.float_label_dense);
  EXPECT_EQ(c.sparse[0].type, SparseInputType::LocalizedSlot);
  EXPECT_EQ(c.sparse[0].max_nnz, 1);
  EXPECT_EQ(c.num_workers, 4);
  EXPECT_EQ(c.cache_eval_data, -1);
  const auto offsets = c.slot_offsets();
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[1], 10);
  EXPECT_EQ(offsets[2], 21);
  // to_json gives back an equivalent layer.
  const DataConfig again = parse_data_layer(to_json(c), "again");
  EXPECT_EQ(again.slot_size_array, c.slot_size_array);
  EXPECT_EQ(again.num_samples, c.num_samples);
  EXPECT_EQ(again.float_label_dense, c.float_label_dense);
  EXPECT_EQ(again.sparse[0].type, c.sparse[0].type);
  EXPECT_EQ(again.check, c.check);
}

TEST(DataConfig, NewerSparseSchemaWithNnzPerSlot) {
  json j = dlrm_layer();
  j["sparse"] = json::parse(R"([{"top": "a", "slot_num": 3, "is_fixed_length": 1,
                                 "nnz_per_slot": [1, 2, 4]},
                                {"top": "b", "slot_num": 2, "nnz_per_slot": 2}])");
  const DataConfig c = parse_data_layer(j, "layers[0]");
  EXPECT_EQ(c.sparse[0].max_feature_num_per_sample, 7);
  EXPECT_EQ(c.sparse[0].max_nnz, 4);
  EXPECT_TRUE(c.sparse[0].is_fixed_length);
  EXPECT_EQ(c.sparse[1].max_feature_num_per_sample, 4);
  EXPECT_EQ(c.total_slots(), 5);
}

TEST(DataConfig, UnknownKeysNameTheKeyAndTheLayer) {
  json j = dlrm_layer();
  j["sourse"] = "typo";
  std::string m = config_error(j);
  EXPECT_THAT(m, HasSubstr("unknown key \"sourse\""));
  EXPECT_THAT(m, HasSubstr("layers[0] (\"data\")"));
  j = dlrm_layer();
  j["sparse"][0]["slots"] = 3;
  m = config_error(j);
  EXPECT_THAT(m, HasSubstr("layers[0] (\"data\")"));
  EXPECT_THAT(m, HasSubstr("unknown key \"sparse[0].slots\""));
  j = dlrm_layer();
  j["label"]["dim"] = 1;
  EXPECT_THAT(config_error(j), HasSubstr("unknown key \"label.dim\""));
  j = dlrm_layer();
  j["sparse"][0]["max_nzz"] = 1;
  EXPECT_THAT(config_error(j),
              HasSubstr("unknown key \"sparse[0].max_nzz\" (did you mean \"sparse[0].max_nnz\"?)"));
  // async_param is accepted (HugeCTR's GPU-only reader) and ignored.
  j = dlrm_layer();
  j["async_param"] = {{"num_threads", 4}};
  EXPECT_NO_THROW(parse_data_layer(j, "layers[0]"));
}

TEST(DataConfig, MissingOrBadValuesNameTheKey) {
  for (const char* key : {"check", "source", "label", "dense", "sparse"}) {
    json j = dlrm_layer();
    j.erase(key);
    EXPECT_THAT(config_error(j), HasSubstr(std::string("\"") + key + "\" is missing"));
  }
  json j = dlrm_layer();
  j["sparse"][0].erase("max_feature_num_per_sample");
  EXPECT_THAT(config_error(j), HasSubstr("\"sparse[0].max_feature_num_per_sample\" is missing"));
  j = dlrm_layer();
  j["check"] = "CRC";
  EXPECT_THAT(config_error(j),
              HasSubstr("\"check\" must be \"Sum\", \"None\" or \"Non\", got \"CRC\""));
  j = dlrm_layer();
  j["format"] = "Avro";
  EXPECT_THAT(config_error(j),
              HasSubstr("\"format\" must be \"Norm\", \"Raw\" or \"Parquet\", got \"Avro\""));
  j = dlrm_layer();
  j["dense"]["dense_dim"] = "13";
  EXPECT_THAT(config_error(j), HasSubstr("\"dense.dense_dim\" must be an integer"));
  j = dlrm_layer();
  j["label"]["label_dim"] = 0;
  EXPECT_THAT(config_error(j),
              HasSubstr("\"label.label_dim\" must be an integer in [1, 2147483647], got 0"));
  j = dlrm_layer();
  j["sparse"][0]["type"] = "Hashed";
  EXPECT_THAT(config_error(j),
              HasSubstr("\"sparse[0].type\" must be \"DistributedSlot\" or \"LocalizedSlot\", "
                        "got \"Hashed\""));
  j = dlrm_layer();
  j["format"] = "Raw";
  EXPECT_THAT(config_error(j), HasSubstr("\"num_samples\" is missing"));
  j = dlrm_layer();
  j["slot_size_array"] = {1, 2, 3};
  EXPECT_THAT(config_error(j), HasSubstr("\"slot_size_array\" has 3 entries but the sparse "
                                         "inputs have 26 slots"));
  j = dlrm_layer();
  j["sparse"].push_back(j["sparse"][0]);
  EXPECT_THAT(config_error(j), HasSubstr("two sparse inputs have the top \"data1\""));
  j = dlrm_layer();
  j["type"] = "InnerProduct";
  EXPECT_THAT(config_error(j), HasSubstr("\"type\" must be \"Data\", got \"InnerProduct\""));
}

TEST(DataConfig, JsonNamesAreHugeCtrsExactlyTheCommandLineTakesAnyCase) {
  json j = dlrm_layer();
  j["format"] = "norm";
  EXPECT_THAT(config_error(j), HasSubstr("got \"norm\""));
  EXPECT_EQ(parse_data_format("raw", "--format"), DataFormat::Raw);
  EXPECT_EQ(parse_check_mode("SUM", "--check"), CheckMode::Sum);
  EXPECT_EQ(to_string(DataFormat::Parquet), "Parquet");
  EXPECT_EQ(to_string(SparseInputType::LocalizedSlot), "LocalizedSlot");
  try {
    parse_data_format("avro", "--format");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--format: unknown format \"avro\" (expected Norm, Raw or "
                                    "Parquet)"));
  }
  // Whole floats count as integers, 0/1 as booleans; fractions and strings do not.
  j = dlrm_layer();
  j["dense"]["dense_dim"] = 13.0;
  j["sparse"][0]["is_fixed_length"] = 0;
  const DataConfig c = parse_data_layer(j, "layers[0]");
  EXPECT_EQ(c.dense_dim, 13);
  EXPECT_FALSE(c.sparse[0].is_fixed_length);
  j["dense"]["dense_dim"] = 13.5;
  EXPECT_THAT(config_error(j), HasSubstr("\"dense.dense_dim\" must be an integer in [0, "
                                         "2147483647], got 13.5"));
  j = dlrm_layer();
  j["sparse"][0]["is_fixed_length"] = 2;
  EXPECT_THAT(config_error(j), HasSubstr("\"sparse[0].is_fixed_length\" must be true or false"));
}

TEST(DataConfig, HugeCtrsNonSpellingOfTheCheckIsNone) {
  // hugectr.Check_t.Non is how HugeCTR's Python API spells it, and configurations it wrote do.
  json j = dlrm_layer();
  j["check"] = "Non";
  const DataConfig c = parse_data_layer(j, "layers[0]");
  EXPECT_EQ(c.check, CheckMode::None);
  EXPECT_EQ(to_string(c.check), "None");  // written back as None
  EXPECT_EQ(to_json(c)["check"], "None");
  EXPECT_EQ(parse_check_mode("non", "--check"), CheckMode::None);
}

TEST(DataConfig, BadSamplePolicyIsReadAndWrittenBack) {
  json j = dlrm_layer();
  EXPECT_EQ(parse_data_layer(j, "layers[0]").bad_sample_policy, BadSamplePolicy::Error);
  EXPECT_FALSE(to_json(parse_data_layer(j, "layers[0]")).contains("bad_sample_policy"));
  j["bad_sample_policy"] = "drop";
  const DataConfig c = parse_data_layer(j, "layers[0]");
  EXPECT_EQ(c.bad_sample_policy, BadSamplePolicy::Drop);
  EXPECT_EQ(to_json(c)["bad_sample_policy"], "drop");
  EXPECT_EQ(parse_data_layer(to_json(c), "again").bad_sample_policy, BadSamplePolicy::Drop);
  j["bad_sample_policy"] = "skip";
  EXPECT_THAT(config_error(j),
              HasSubstr("\"bad_sample_policy\" must be \"error\" or \"drop\", got \"skip\""));
}

TEST(DataConfig, CacheEvalDataAndFixedLengthAreWrittenBack) {
  json j = dlrm_layer();
  j["cache_eval_data"] = 12;
  j["sparse"][0]["is_fixed_length"] = true;
  j["sparse"][0]["max_nnz"] = 1;
  const DataConfig c = parse_data_layer(j, "layers[0]");
  EXPECT_EQ(c.cache_eval_data, 12);
  EXPECT_EQ(c.sparse[0].fixed_nnz(), std::vector<std::int64_t>(26, 1));  // max_nnz per slot
  const DataConfig again = parse_data_layer(to_json(c), "again");
  EXPECT_EQ(again.cache_eval_data, 12);
  EXPECT_TRUE(again.sparse[0].is_fixed_length);
  j["cache_eval_data"] = true;
  EXPECT_EQ(to_json(parse_data_layer(j, "layers[0]"))["cache_eval_data"], true);
}

TEST(DataConfig, FixedLengthBeyondTheKeyBudgetIsRefused) {
  json j = dlrm_layer();
  j["sparse"][0]["is_fixed_length"] = true;
  j["sparse"][0]["max_nnz"] = 2;  // 26 slots of 2 keys: 52 > 30
  EXPECT_THAT(config_error(j),
              HasSubstr("\"sparse[0].is_fixed_length\" is true, so every sample holds 52 keys "
                        "(max_nnz 2 in each of 26 slots), but max_feature_num_per_sample is 30"));
}

TEST(DataConfig, KeyTypeNames) {
  EXPECT_EQ(parse_key_type("I32", "solver"), DType::U32);
  EXPECT_EQ(parse_key_type("u32", "cli"), DType::U32);
  EXPECT_EQ(parse_key_type("I64", "solver"), DType::I64);
  EXPECT_THROW(parse_key_type("I16", "solver"), ConfigError);
}

}  // namespace
}  // namespace ember::data
