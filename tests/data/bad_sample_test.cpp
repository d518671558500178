// Samples whose label or dense values would train silently wrong: NaN and infinities anywhere,
// labels outside what the loss takes. Under bad_sample_policy "error" (the default) each is a
// DataError naming the file, the sample and the column; under "drop" it is dropped, counted and
// logged, as a checksum mismatch is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "data/data_test_support.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

SampleShape small_shape() {
  return datatest::one_hot_shape(3, {2});
}

LabelRange binary_labels() {
  LabelRange r;
  r.taken_by = "the BinaryCrossEntropyLoss layer 'loss'";
  return r;
}

// Batches of 5 rows.
std::vector<Sample> read_all(NormFileReader& reader, const BatchLayout& layout) {
  return datatest::read_remaining(reader, layout, 5);
}

TEST(BadSamples, NormLabelOutsideTheLossRangeNamesFileSampleAndColumn) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  auto samples = datatest::random_samples(rng, 9, shape);
  samples[6].label[0] = 2.5f;
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    const std::string path = dir / "labels.data";
    datatest::write_norm(path, samples, shape, check, DType::U32);
    NormFileReader reader(layout, check, nullptr, SampleChecks{{}, binary_labels()});
    reader.open(path);
    EMBER_EXPECT_THROW_WITH(read_all(reader, layout), DataError,
                            "Norm data file '" + path +
                                "': sample 6: label column 0 is 2.5, outside [0, 1], the labels "
                                "the BinaryCrossEntropyLoss layer 'loss' takes (the Data layer's "
                                "\"bad_sample_policy\": \"drop\" drops such samples instead)");
    // Without a loss's range (a tool, or a source made without DataSourceOptions), 2.5 is a
    // finite label like any other.
    NormFileReader any_label(layout, check, nullptr, SampleChecks{});
    any_label.open(path);
    EXPECT_EQ(read_all(any_label, layout), samples);
  }
}

TEST(BadSamples, NormNaNAndInfinityAreErrorsWhateverTheLoss) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const BatchLayout layout = datatest::layout_for(shape, DType::I64);
  struct Case {
    bool label;
    std::size_t column;
    float value;
    const char* text;
  };
  for (const Case& c : {Case{false, 2, kNaN, "dense column 2 is NaN"},
                        Case{false, 0, -kInf, "dense column 0 is -infinity"},
                        Case{true, 0, kInf, "label column 0 is +infinity"},
                        Case{true, 0, kNaN, "label column 0 is NaN"}}) {
    auto samples = datatest::random_samples(rng, 4, shape);
    (c.label ? samples[3].label : samples[3].dense)[c.column] = c.value;
    const std::string path = dir / "nan.data";
    datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::I64);
    NormFileReader reader(layout, CheckMode::Sum, nullptr, SampleChecks{});
    reader.open(path);
    EMBER_EXPECT_THROW_WITH(read_all(reader, layout), DataError,
                            "'" + path + "': sample 3: " + c.text);
  }
}

TEST(BadSamples, DropPolicyDropsCountsAndLogsThem) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  auto samples = datatest::random_samples(rng, 40, shape);
  samples[0].dense[1] = kNaN;
  samples[17].label[0] = -1.0f;
  samples[39].dense[0] = kInf;
  const std::string path = dir / "drop.data";
  datatest::write_norm(path, samples, shape, CheckMode::None, DType::U32);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  ReadCounters counters;
  testing::LogCapture log;
  NormFileReader reader(layout, CheckMode::None, &counters,
                        SampleChecks{BadSamplePolicy::Drop, binary_labels()});
  reader.open(path);
  std::vector<Sample> expect;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (i != 0 && i != 17 && i != 39) expect.push_back(samples[i]);
  }
  EXPECT_EQ(read_all(reader, layout), expect);
  EXPECT_EQ(reader.bad_samples(), 3);
  EXPECT_EQ(counters.bad.load(), 3);
  EXPECT_EQ(counters.dropped.load(), 0);  // that count is the checksum's
  EXPECT_THAT(log.text(), HasSubstr("'" + path + "': sample 0 dropped: dense column 1 is NaN"));
  EXPECT_THAT(log.text(), HasSubstr("sample 17 dropped: label column 0 is -1, outside [0, 1]"));
  EXPECT_THAT(log.text(), HasSubstr("sample 39 dropped: dense column 0 is +infinity"));
}

TEST(BadSamples, MaskedLabelsOfAMultiLabelLossPass) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape = small_shape();
  shape.label_dim = 3;
  auto samples = datatest::random_samples(rng, 5, shape);
  samples[1].label = {-1.0f, 1.0f, 0.0f};  // MultiCrossEntropyLoss skips labels below -0.5
  const std::string path = dir / "multi.data";
  datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::U32);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  LabelRange multi;
  multi.masked_below = -0.5f;
  multi.taken_by = "the MultiCrossEntropyLoss layer 'loss'";
  NormFileReader reader(layout, CheckMode::Sum, nullptr, SampleChecks{{}, multi});
  reader.open(path);
  EXPECT_EQ(read_all(reader, layout), samples);
  // -0.25 is neither a label nor a mask.
  samples[2].label[1] = -0.25f;
  datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::U32);
  reader.open(path);
  EMBER_EXPECT_THROW_WITH(read_all(reader, layout), DataError,
                          "sample 2: label column 1 is -0.25, outside [0, 1] (or below -0.5, "
                          "masked), the labels the MultiCrossEntropyLoss layer 'loss' takes");
}

TEST(BadSamples, RawNamesTheStoredValueBehindAConvertedOne) {
  testing::ScratchDir dir;
  const std::string path = dir / "r.bin";
  RawWriter w(path, 1, 2, 1, /*float_label_dense=*/false);
  const std::vector<std::int32_t> key{3};
  w.write(std::vector<std::int32_t>{1}, std::vector<std::int32_t>{4, 0}, key);
  w.write(std::vector<std::int32_t>{0}, std::vector<std::int32_t>{7, -5}, key);  // log(-4)
  w.write(std::vector<std::int32_t>{3}, std::vector<std::int32_t>{1, 1}, key);   // label 3
  w.close();
  BatchLayout layout;
  layout.dense_dim = 2;
  layout.sparse = {{"data", 1, 1, 1}};
  RawOptions raw;
  raw.path = path;
  raw.num_samples = 3;
  raw.checks = SampleChecks{{}, binary_labels()};
  RawSource source(raw, layout);
  HostBatch batch(layout, 3);
  EMBER_EXPECT_THROW_WITH(source.read_samples(0, 3, batch), DataError,
                          "Raw file '" + path +
                              "': sample 1: dense column 1 is NaN (log(v + 1) of the stored "
                              "int32 v = -5)");
  batch.clear();
  EMBER_EXPECT_THROW_WITH(source.read_samples(2, 1, batch), DataError,
                          "sample 2: label column 0 is 3, outside [0, 1], the labels the "
                          "BinaryCrossEntropyLoss layer 'loss' takes (the stored int32 3)");
  // Dropped, the good sample stays and the count says how many went.
  raw.checks->policy = BadSamplePolicy::Drop;
  RawSource dropping(raw, layout);
  ReadCounters counters;
  batch.clear();
  EXPECT_EQ(dropping.read_samples(0, 3, batch, &counters), 1);
  EXPECT_EQ(batch.size(), 1);
  EXPECT_EQ(batch.label()[0], 1.0f);
  EXPECT_EQ(batch.dense()[0], std::log(5.0f));
  EXPECT_EQ(counters.bad.load(), 2);
  // `ember inspect` shows a file as stored: no checks.
  raw.checks.reset();
  RawSource as_is(raw, layout);
  batch.clear();
  EXPECT_EQ(as_is.read_samples(0, 3, batch), 3);
  EXPECT_TRUE(std::isnan(batch.dense()[3]));
}

// Writes `samples` as a Parquet dataset in dir/pq (one file, HugeCTR's layout: _file_list.txt,
// _metadata.json), small row groups so that a read crosses them.
void write_parquet(const testing::ScratchDir& dir, const std::vector<Sample>& samples,
                   const SampleShape& shape) {
  const std::filesystem::path folder = dir / "pq";
  std::filesystem::create_directories(folder);
  auto o = parquet::ParquetWriterOptions::with_default_names(shape.label_dim, shape.dense_dim,
                                                             shape.total_slots());
  o.row_group_rows = 24;
  const std::string path = (folder / "part_0.parquet").string();
  parquet::ParquetWriter w(path, o);
  for (const Sample& x : samples) {
    std::vector<std::int32_t> nnz;
    std::vector<std::int64_t> keys;
    for (const auto& slot : x.slots) {
      nnz.push_back(static_cast<std::int32_t>(slot.size()));
      keys.insert(keys.end(), slot.begin(), slot.end());
    }
    w.write(x.label, x.dense, nnz, keys);
  }
  w.close();
  parquet::write_parquet_layout(folder.string(), (folder / "_file_list.txt").string(),
                                {{path, w.rows()}}, o);
}

TEST(BadSamples, ParquetRowsAreCheckedToo) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  auto samples = datatest::random_samples(rng, 50, shape);
  samples[3].dense[2] = kNaN;
  samples[4].label[0] = 1.5f;  // next to another bad row: one run of two dropped
  samples[30].dense[0] = -kInf;
  samples[49].label[0] = kInf;  // the last row
  write_parquet(dir, samples, shape);
  const std::string list = (dir / "pq" / "_file_list.txt").string();
  const std::string file = (dir / "pq" / "part_0.parquet").string();
  const BatchLayout layout = datatest::layout_for(shape, DType::I64);
  PipelineOptions o;
  o.batch_size = 7;
  o.mode = PipelineMode::Epochs;
  o.deterministic = true;
  {
    Pipeline p(std::make_shared<parquet::ParquetSource>(list, layout, std::vector<std::int64_t>{},
                                                        SampleChecks{{}, binary_labels()}),
               o);
    EMBER_EXPECT_THROW_WITH(
        while (p.next()){}, DataError,
        "Parquet file '" + file + "': row 3: dense column 2 is NaN (the Data layer's");
  }
  ReadCounters counters;
  testing::LogCapture log;
  parquet::ParquetFileReader reader(layout, {}, &counters,
                                    SampleChecks{BadSamplePolicy::Drop, binary_labels()});
  reader.open(file, parquet::read_hugectr_metadata(dir / "pq" / "_metadata.json"));
  std::vector<Sample> got;
  HostBatch batch(layout, 11);
  while (!reader.done()) {
    batch.clear();
    reader.read(batch);
    for (auto& x : datatest::samples_of(batch))
      got.push_back(std::move(x));
  }
  std::vector<Sample> expect;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (i != 3 && i != 4 && i != 30 && i != 49) expect.push_back(samples[i]);
  }
  EXPECT_EQ(got, expect);
  EXPECT_EQ(counters.bad.load(), 4);
  EXPECT_THAT(log.text(), HasSubstr("'" + file + "': sample 4 dropped: label column 0 is 1.5"));
  EXPECT_THAT(log.text(), HasSubstr("sample 49 dropped: label column 0 is +infinity"));
}

// A Data layer for `format` over the files in `dir` (Norm: list.txt; Raw: r.bin; Parquet:
// pq/_file_list.txt).
DataConfig data_config(const std::string& format, const testing::ScratchDir& dir,
                       const std::string& policy, std::int64_t samples) {
  nlohmann::json j = nlohmann::json::parse(R"({
      "name": "data", "type": "Data", "check": "None",
      "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 3},
      "sparse": [{"top": "data1", "slot_num": 2, "max_feature_num_per_sample": 2}]})");
  j["format"] = format;
  j["source"] = format == "Raw"       ? (dir / "r.bin").string()
                : format == "Parquet" ? (dir / "pq" / "_file_list.txt").string()
                                      : (dir / "list.txt").string();
  if (format == "Raw") {
    j["num_samples"] = samples;
    j["float_label_dense"] = true;
  }
  if (!policy.empty()) j["bad_sample_policy"] = policy;
  return parse_data_layer(j, "layers[0]");
}

TEST(BadSamples, PipelinesApplyTheDataLayersPolicyAndTheLossRange) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  auto samples = datatest::random_samples(rng, 64, shape);
  for (std::size_t i = 5; i < samples.size(); i += 9)
    samples[i].label[0] = 7.0f;
  datatest::write_norm(dir / "a.data", samples, shape, CheckMode::None, DType::U32);
  write_file_list(dir / "list.txt", {dir / "a.data"});
  datatest::write_raw(dir / "r.bin", samples, shape, true);
  write_parquet(dir, samples, shape);
  DataSourceOptions loss;
  loss.labels = binary_labels();
  PipelineOptions o;
  o.batch_size = 8;
  o.mode = PipelineMode::Epochs;
  o.deterministic = true;
  for (const std::string format : {"Norm", "Raw", "Parquet"}) {
    // The default policy: the first bad sample ends the run with its file and index.
    {
      Pipeline p(
          make_data_source(data_config(format, dir, "", 64), DType::U32, DataSplit::Train, 0, loss),
          o);
      try {
        while (p.next()) {
        }
        ADD_FAILURE() << format << ": a label of 7 was read";
      } catch (const DataError& e) {
        EXPECT_THAT(e.what(), HasSubstr(": label column 0 is 7, outside [0, 1]")) << format;
      }
    }
    // "drop": every good sample once, the bad ones counted.
    Pipeline p(make_data_source(data_config(format, dir, "drop", 64), DType::U32, DataSplit::Train,
                                0, loss),
               o);
    std::int64_t got = 0;
    while (auto b = p.next()) {
      for (const Sample& s : datatest::samples_of(*b)) {
        EXPECT_NE(s.label[0], 7.0f);
        ++got;
      }
    }
    EXPECT_EQ(got, 64 - 7) << format;
    EXPECT_EQ(p.stats().bad_samples, 7) << format;
    // Without the loss's range, a label of 7 is read like any other.
    Pipeline any(make_data_source(data_config(format, dir, "", 64), DType::U32, DataSplit::Train),
                 o);
    std::int64_t all = 0;
    while (auto b = any.next())
      all += b->global_size;
    EXPECT_EQ(all, 64) << format;
  }
}

TEST(BadSamples, NothingLeftAfterDroppingEndsWithAnErrorNotAHang) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  auto samples = datatest::random_samples(rng, 20, shape);
  for (auto& s : samples)
    s.dense[0] = kNaN;
  datatest::write_norm(dir / "a.data", samples, shape, CheckMode::None, DType::U32);
  write_file_list(dir / "list.txt", {dir / "a.data"});
  datatest::write_raw(dir / "r.bin", samples, shape, true);
  write_parquet(dir, samples, shape);
  for (const std::string format : {"Norm", "Raw", "Parquet"}) {
    for (PipelineMode mode : {PipelineMode::Repeat, PipelineMode::Epochs}) {
      PipelineOptions o;
      o.batch_size = 4;
      o.mode = mode;
      Pipeline p(
          make_data_source(data_config(format, dir, "drop", 20), DType::U32, DataSplit::Train), o);
      EMBER_EXPECT_THROW_WITH(p.next(), DataError, "has no samples to read");
    }
  }
}

}  // namespace
}  // namespace ember::data
