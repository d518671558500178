// The synthetic data generator: determinism, shape, learnable-but-not-trivial labels, --like.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "data/data_test_support.hpp"
#include "ember/data/auc.hpp"
#include "ember/data/datagen.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/power_law.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using ::testing::HasSubstr;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

DatagenOptions small_options(const std::filesystem::path& dir) {
  DatagenOptions o;
  o.out_dir = dir.string();
  o.samples = 6000;
  o.eval_samples = 3000;
  o.files = 3;
  o.slots_per_input = {5, 3};
  o.dense_dim = 4;
  o.vocabulary = {300};
  o.nnz_min = 1;
  o.nnz_max = 3;
  o.threads = 2;
  return o;
}

TEST(Datagen, SameSeedSameBytesDifferentSeedDifferentData) {
  testing::ScratchDir a, b, c;
  DatagenOptions o = small_options(a.path());
  const DatasetDescription da = generate_dataset(o);
  o.out_dir = b.path().string();
  o.threads = 1;  // thread count must not matter
  o.files = 3;
  const DatasetDescription db = generate_dataset(o);
  ASSERT_EQ(da.train.files.size(), 3u);
  for (std::size_t f = 0; f < da.train.files.size(); ++f) {
    EXPECT_EQ(bytes_of(da.train.files[f]), bytes_of(db.train.files[f])) << f;
  }
  EXPECT_EQ(bytes_of(da.eval.files[0]), bytes_of(db.eval.files[0]));
  EXPECT_EQ(da.extra["teacher_auc"], db.extra["teacher_auc"]);
  o.out_dir = c.path().string();
  o.seed = 2;
  const DatasetDescription dc = generate_dataset(o);
  EXPECT_NE(bytes_of(da.train.files[0]), bytes_of(dc.train.files[0]));
}

TEST(Datagen, WritesTheDescribedShapeWithDisjointSlotRanges) {
  testing::ScratchDir dir;
  DatagenOptions o = small_options(dir.path());
  o.key_type = DType::I64;
  o.check = CheckMode::None;
  o.vocabulary = {10, 20, 30, 40, 50, 60, 70, 80};
  const DatasetDescription d = generate_dataset(o);
  EXPECT_EQ(d.slot_size_array, o.vocabulary);
  EXPECT_EQ(d.slot_num(), 8);
  ASSERT_EQ(d.sparse.size(), 2u);
  EXPECT_EQ(d.sparse[0].slot_num, 5);
  EXPECT_EQ(d.sparse[1].max_feature_num_per_sample, 9);
  EXPECT_EQ(d.train.samples, 6000);
  EXPECT_EQ(d.eval.samples, 3000);
  // The description's Data layer reads the data back through the pipeline.
  const DatasetDescription again = DatasetDescription::read((dir / "dataset.json").string());
  EXPECT_EQ(again.slot_size_array, d.slot_size_array);
  const DataConfig config = again.data_config();
  EXPECT_EQ(config.check, CheckMode::None);
  PipelineOptions po;
  po.batch_size = 512;
  po.mode = PipelineMode::Epochs;
  po.num_workers = 2;
  Pipeline p(make_data_source(config, DType::I64, DataSplit::Train), po);
  std::vector<std::int64_t> offsets{0};
  for (auto v : o.vocabulary)
    offsets.push_back(offsets.back() + v);
  std::int64_t samples = 0;
  std::map<std::int64_t, int> nnz_seen;
  while (auto b = p.next()) {
    for (const auto& s : datatest::samples_of(*b)) {
      ++samples;
      ASSERT_EQ(s.slots.size(), 8u);
      ASSERT_EQ(s.dense.size(), 4u);
      EXPECT_TRUE(s.label[0] == 0.f || s.label[0] == 1.f);
      for (std::size_t k = 0; k < 8; ++k) {
        ++nnz_seen[static_cast<std::int64_t>(s.slots[k].size())];
        for (auto key : s.slots[k]) {
          ASSERT_GE(key, offsets[k]) << "slot " << k;
          ASSERT_LT(key, offsets[k + 1]) << "slot " << k;
        }
      }
      for (float x : s.dense)
        EXPECT_GE(x, 0.f);
    }
  }
  EXPECT_EQ(samples, 6000);
  EXPECT_EQ(nnz_seen.size(), 3u);  // 1, 2 and 3 keys per slot all occur
}

TEST(Datagen, TeacherAucIsWellAboveChanceAndBelowOne) {
  testing::ScratchDir dir;
  DatagenOptions o = small_options(dir.path());
  o.samples = 2000;
  o.eval_samples = 20000;
  o.slots_per_input = {26};
  o.dense_dim = 13;
  o.vocabulary = {2000};
  o.nnz_max = 1;
  const DatasetDescription d = generate_dataset(o);
  const double auc = d.extra["teacher_auc"].get<double>();
  EXPECT_GT(auc, 0.72);  // the defaults aim at about 0.79
  EXPECT_LT(auc, 0.88);
  const double rate = d.extra["positive_rate"].get<double>();
  EXPECT_GT(rate, 0.15);
  EXPECT_LT(rate, 0.5);
}

TEST(Datagen, KeysFollowAPowerLaw) {
  PowerLawSampler sampler(1000, 1.1, 3);
  std::vector<int> count(1000, 0);
  auto rng = testing::make_rng();
  std::uniform_real_distribution<double> u(0, 1);
  std::set<std::int64_t> ids;
  for (int i = 0; i < 200000; ++i)
    ++count[static_cast<std::size_t>(sampler.rank(u(rng)))];
  for (std::int64_t r = 0; r < 1000; ++r)
    ids.insert(sampler.id_of_rank(r));
  EXPECT_EQ(ids.size(), 1000u);  // ranks map onto ids one to one
  EXPECT_GT(count[0], 10 * count[99]);
  EXPECT_GT(count[0] + count[1] + count[2], 200000 / 5);  // hot keys dominate
  EXPECT_GT(count[999] + count[998], 0);                  // the tail is reachable
  PowerLawSampler uniform(10, 0.0, 1);
  std::vector<int> flat(10, 0);
  for (int i = 0; i < 100000; ++i)
    ++flat[static_cast<std::size_t>(uniform.rank(u(rng)))];
  for (int c : flat)
    EXPECT_NEAR(c, 10000, 600);
}

TEST(Datagen, RawFormatRoundTripsThroughTheRawReader) {
  testing::ScratchDir dir;
  DatagenOptions o = small_options(dir.path());
  o.format = DataFormat::Raw;
  o.nnz_max = 1;
  o.vocabulary = {7, 9, 11, 13, 17, 19, 23, 29};
  const DatasetDescription d = generate_dataset(o);
  EXPECT_TRUE(d.float_label_dense);
  EXPECT_EQ(std::filesystem::file_size(d.train.files[0]), 6000u * 4 * (1 + 4 + 8));
  const DataConfig c = d.data_config();
  EXPECT_EQ(c.format, DataFormat::Raw);
  EXPECT_EQ(c.num_samples, 6000);
  PipelineOptions po;
  po.batch_size = 1000;
  po.mode = PipelineMode::Epochs;
  Pipeline p(make_data_source(c, DType::U32, DataSplit::Eval), po);
  std::int64_t n = 0;
  while (auto b = p.next())
    n += b->global_size;
  EXPECT_EQ(n, 3000);
  o.nnz_max = 2;
  EXPECT_THROW(generate_dataset(o), ConfigError);
}

// HugeCTR's Raw default stores label and dense as int32 (dense as counts v, read as log(v + 1)):
// the same draws read back as from the f32 file, the dense values within a float's rounding.
TEST(Datagen, RawInt32LabelDenseReadsAsTheFloatFile) {
  testing::ScratchDir a, b;
  DatagenOptions o = small_options(a.path());
  o.format = DataFormat::Raw;
  o.nnz_max = 1;
  o.samples = 1023;
  o.eval_samples = 7;
  const DatasetDescription floats = generate_dataset(o);
  o.out_dir = b.path().string();
  o.float_label_dense = false;
  const DatasetDescription ints = generate_dataset(o);
  EXPECT_TRUE(floats.float_label_dense);
  EXPECT_FALSE(ints.float_label_dense);
  EXPECT_FALSE(ints.data_config().float_label_dense);
  for (DataSplit split : {DataSplit::Train, DataSplit::Eval}) {
    const auto want = datatest::read_split(floats, split, DType::U32);
    const auto got = datatest::read_split(ints, split, DType::U32);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got.size(), split == DataSplit::Train ? 1023u : 7u);
    std::int64_t nonzero = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].label, want[i].label) << "sample " << i;
      EXPECT_EQ(got[i].slots, want[i].slots) << "sample " << i;
      ASSERT_EQ(got[i].dense.size(), want[i].dense.size());
      for (std::size_t j = 0; j < got[i].dense.size(); ++j) {
        EXPECT_NEAR(got[i].dense[j], want[i].dense[j], 1e-6f * std::max(1.f, want[i].dense[j]))
            << "sample " << i << ", dense " << j;
        nonzero += want[i].dense[j] != 0;
      }
    }
    EXPECT_GT(nonzero, 0);
  }
}

TEST(Datagen, LikeARawConfigTakesItsSampleCountsAndLabelDenseType) {
  auto config = nlohmann::json::parse(R"({
    "layers": [
      {"name": "data", "type": "Data", "format": "Raw", "source": "t.bin", "eval_source": "e.bin",
       "num_samples": 65537, "eval_num_samples": 7, "check": "None",
       "slot_size_array": [3, 5],
       "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 13},
       "sparse": [{"top": "data1", "type": "LocalizedSlot", "max_feature_num_per_sample": 2,
                   "max_nnz": 1, "slot_num": 2}]}
    ]})");
  DatagenOptions o;
  apply_model_config(config, "kaggle.json", o);
  EXPECT_EQ(o.format, DataFormat::Raw);
  EXPECT_EQ(o.samples, 65537);
  EXPECT_EQ(o.eval_samples, 7);
  EXPECT_FALSE(o.float_label_dense);  // HugeCTR's default: int32 label and dense
  config["layers"][0]["float_label_dense"] = true;
  DatagenOptions f;
  apply_model_config(config, "kaggle.json", f);
  EXPECT_TRUE(f.float_label_dense);
}

TEST(Datagen, LikeTakesTheShapeFromAModelConfig) {
  const auto config = nlohmann::json::parse(R"({
    "solver": {"input_key_type": "I64", "batchsize": 512},
    "optimizer": {"type": "Adam"},
    "layers": [
      {"name": "data", "type": "Data", "source": "t.txt", "eval_source": "e.txt", "check": "None",
       "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 7},
       "sparse": [{"top": "wide", "type": "DistributedSlot", "max_feature_num_per_sample": 4,
                   "slot_num": 2},
                  {"top": "deep", "type": "DistributedSlot", "max_feature_num_per_sample": 30,
                   "max_nnz": 2, "slot_num": 10}]},
      {"name": "e1", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "wide", "top": "w",
       "sparse_embedding_hparam": {"embedding_vec_size": 1, "combiner": "sum",
                                   "slot_size_array": [100, 200]}},
      {"name": "e2", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "deep", "top": "d",
       "sparse_embedding_hparam": {"embedding_vec_size": 16, "combiner": "sum",
                                   "max_vocabulary_size_per_gpu": 5000}}
    ]})");
  DatagenOptions o;
  apply_model_config(config, "model.json", o);
  EXPECT_EQ(o.key_type, DType::I64);
  EXPECT_EQ(o.check, CheckMode::None);
  EXPECT_EQ(o.dense_dim, 7);
  EXPECT_EQ(o.slots_per_input, (std::vector<std::int64_t>{2, 10}));
  EXPECT_EQ(o.nnz_max, 2);  // min(4/2, min(2, 30/10))
  ASSERT_EQ(o.vocabulary.size(), 12u);
  EXPECT_EQ(o.vocabulary[0], 100);
  EXPECT_EQ(o.vocabulary[1], 200);
  EXPECT_EQ(o.vocabulary[2], 500);  // 5000 rows shared by 10 slots
  nlohmann::json bad = config;
  bad["layers"][0]["sparse"][0]["slot_nums"] = 2;
  try {
    apply_model_config(bad, "model.json", o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown key \"sparse[0].slot_nums\""));
    EXPECT_THAT(e.what(), HasSubstr("model.json"));
  }
}

TEST(Auc, MatchesAPairCountWithTiesCountedHalf) {
  auto rng = testing::make_rng();
  for (std::size_t n : {2u, 7u, 1023u}) {
    std::vector<double> scores(n);
    std::vector<float> labels(n);
    std::uniform_int_distribution<int> coarse(0, 9);  // plenty of ties
    for (std::size_t i = 0; i < n; ++i) {
      scores[i] = coarse(rng);
      labels[i] = static_cast<float>(coarse(rng) < 4);
    }
    labels[0] = 1;
    labels[1] = 0;
    double wins = 0, pairs = 0;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        if (labels[i] == 1 && labels[j] == 0) {
          pairs += 1;
          wins += scores[i] > scores[j] ? 1 : scores[i] == scores[j] ? 0.5 : 0;
        }
      }
    }
    EXPECT_NEAR(exact_auc(scores, labels), wins / pairs, 1e-12) << n;
  }
  EXPECT_DOUBLE_EQ(exact_auc(std::vector<double>{0.1, 0.9}, std::vector<float>{0, 1}), 1.0);
  EXPECT_TRUE(std::isnan(exact_auc(std::vector<double>{0.1, 0.9}, std::vector<float>{1, 1})));
  // A NaN score (a diverged model) gives NaN, not a hang.
  EXPECT_TRUE(std::isnan(
      exact_auc(std::vector<double>{0.1, std::nan(""), 0.9}, std::vector<float>{0, 1, 1})));
}

}  // namespace
}  // namespace ember::data
