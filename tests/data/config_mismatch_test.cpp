// A configuration that does not match the data, or a path that is not what it should be: the
// message must name the cause (the key type, the key budget, is_fixed_length, a directory, a
// data file given as a file list, a batch too large), not report a broken file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/data_test_support.hpp"
#include "ember/core/allocator.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_format.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/norm_writer.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;
using datatest::Sample;
using datatest::SampleShape;
using ::testing::HasSubstr;
using ::testing::Not;

// Batches of 16 rows.
std::vector<Sample> read_all(NormFileReader& reader, const BatchLayout& layout) {
  return datatest::read_remaining(reader, layout, 16);
}

DType other(DType key) {
  return key == DType::U32 ? DType::I64 : DType::U32;
}

TEST(ConfigMismatch, KeyWidthOtherThanTheFilesIsNamedAtOpen) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.slots_per_input = {26};
  shape.min_nnz = 0;
  shape.max_nnz = 2;
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    for (DType written : {DType::U32, DType::I64}) {
      const auto samples = datatest::random_samples(rng, 100, shape);
      const std::string path = dir / "keys.data";
      datatest::write_norm(path, samples, shape, check, written);
      NormFileReader reader(datatest::layout_for(shape, other(written)), check);
      const bool wide = written == DType::I64;
      EMBER_EXPECT_THROW_WITH(reader.open(path), DataError,
                              "Norm data file '" + path + "' holds " + (wide ? "64" : "32") +
                                  "-bit keys, but the configuration reads " + (wide ? "32" : "64") +
                                  "-bit ones (solver.input_key_type \"" + (wide ? "I32" : "I64") +
                                  "\")");
      EMBER_EXPECT_THROW_WITH(
          reader.open(path), DataError,
          std::string("set solver.input_key_type to \"") + (wide ? "I64" : "I32") + "\"");
      // The right width reads it.
      NormFileReader right(datatest::layout_for(shape, written), check);
      right.open(path);
      EXPECT_EQ(read_all(right, datatest::layout_for(shape, written)), samples);
    }
  }
}

TEST(ConfigMismatch, KeyWidthOfATinyFileIsNamedAtItsEnd) {
  // One one-hot sample of 64-bit keys (small values) reads as 32-bit keys without a parse error:
  // each key's high half looks like an empty slot. Only the bytes left over at the end tell.
  testing::ScratchDir dir;
  const SampleShape shape = datatest::one_hot_shape(2, {4});
  const std::vector<Sample> samples{{{1.0f}, {0.5f, 2.0f}, {{3}, {17}, {40}, {5}}}};
  const std::string path = dir / "tiny.data";
  datatest::write_norm(path, samples, shape, CheckMode::None, DType::I64);
  const BatchLayout narrow = datatest::layout_for(shape, DType::U32);
  NormFileReader reader(narrow, CheckMode::None);
  reader.open(path);
  EMBER_EXPECT_THROW_WITH(read_all(reader, narrow), DataError,
                          "holds 64-bit keys, but the configuration reads 32-bit ones");
  reader.open(path);
  EMBER_EXPECT_THROW_WITH(read_all(reader, narrow), DataError, "fill it exactly with 64-bit keys");
}

TEST(ConfigMismatch, KeyBudgetTooSmallIsNamedAsTheConfigurations) {
  testing::ScratchDir dir;
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    const std::string path = dir / "budget.data";
    NormWriter w(path, {check, DType::U32, 1, 1, 2});
    const std::vector<float> label{1}, dense{0.5f};
    w.write<std::uint32_t>(label, dense, std::vector<std::int32_t>{1, 1},
                           std::vector<std::uint32_t>{1, 2});
    // Six keys where the configuration allows four (the record is longer than any it allows).
    w.write<std::uint32_t>(label, dense, std::vector<std::int32_t>{3, 3},
                           std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6});
    w.close();
    BatchLayout layout;
    layout.dense_dim = 1;
    layout.sparse = {{"clicks", 2, 4, 2}};
    NormFileReader reader(layout, check);
    reader.open(path);
    EMBER_EXPECT_THROW_WITH(
        read_all(reader, layout), DataError,
        "the sample is well formed with 6 keys in sparse input 0 (\"clicks\"), more than its "
        "max_feature_num_per_sample 4: the configuration's key budget is too small for this data "
        "(raise max_feature_num_per_sample of sparse input 0 to at least 6)");
  }
}

TEST(ConfigMismatch, DamageIsStillCalledDamage) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.slots_per_input = {3};
  const auto samples = datatest::random_samples(rng, 20, shape);
  const std::string path = dir / "damaged.data";
  datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::U32);
  // Sample 0's record length becomes 1000: no key width or budget fills that.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(69);
    const std::int32_t length = 1000;
    f.write(reinterpret_cast<const char*>(&length), 4);
  }
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  NormFileReader reader(layout, CheckMode::Sum);
  reader.open(path);
  try {
    read_all(reader, layout);
    ADD_FAILURE() << "a damaged record was read";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sample 0 has a broken record"));
    EXPECT_THAT(e.what(), Not(HasSubstr("key")));
  }
}

TEST(ConfigMismatch, FixedLengthInputsAreChecked) {
  testing::ScratchDir dir;
  const std::string path = dir / "fixed.data";
  NormWriter w(path, {CheckMode::None, DType::I64, 1, 0, 3});
  const std::vector<float> label{0}, dense{};
  w.write<std::int64_t>(label, dense, std::vector<std::int32_t>{1, 2, 1},
                        std::vector<std::int64_t>{1, 2, 3, 4});
  w.write<std::int64_t>(label, dense, std::vector<std::int32_t>{1, 1, 1},
                        std::vector<std::int64_t>{1, 2, 3});
  w.close();
  // The configuration as HugeCTR's: is_fixed_length with nnz_per_slot [1, 2, 1].
  const nlohmann::json j = nlohmann::json::parse(R"({
      "format": "Norm", "source": "x", "check": "None",
      "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 0},
      "sparse": [{"top": "s", "slot_num": 3, "is_fixed_length": true, "nnz_per_slot": [1, 2, 1]}]
  })");
  const BatchLayout layout = BatchLayout::from_config(parse_data_layer(j, "data"), DType::I64);
  ASSERT_EQ(layout.sparse[0].fixed_nnz, (std::vector<std::int64_t>{1, 2, 1}));
  NormFileReader reader(layout, CheckMode::None);
  reader.open(path);
  HostBatch batch(layout, 4);
  EMBER_EXPECT_THROW_WITH(reader.read(batch), DataError,
                          "sample 1 slot 1 has nnz 1, but sparse input 0 (\"s\") is declared "
                          "is_fixed_length with 2 keys in that slot");
  EXPECT_EQ(batch.size(), 1);
  // Raw holds one key per slot: a fixed length of 2 cannot be.
  RawOptions raw;
  raw.path = path;
  raw.num_samples = 1;
  EMBER_EXPECT_THROW_WITH(RawSource(raw, layout), ConfigError,
                          "is declared is_fixed_length with 2 keys in a slot; Raw holds exactly "
                          "one key per slot");
}

// Rewrites a Norm file's number_of_records (and the header record's checksum under Sum).
void set_record_count(const std::string& path, CheckMode check, std::int64_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::streamoff header = check == CheckMode::Sum ? 4 : 0;
  NormHeader h;
  f.seekg(header);
  f.read(reinterpret_cast<char*>(&h), sizeof h);
  h.number_of_records = n;
  f.seekp(header);
  f.write(reinterpret_cast<const char*>(&h), sizeof h);
  if (check == CheckMode::Sum) {
    const std::uint8_t sum = norm_checksum(&h, sizeof h);
    f.write(reinterpret_cast<const char*>(&sum), 1);
  }
}

TEST(ConfigMismatch, SamplesBeyondTheHeadersCountAreIgnoredWithAWarning) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.slots_per_input = {3};
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    const auto samples = datatest::random_samples(rng, 10, shape);
    const std::string path = dir / (check == CheckMode::Sum ? "sum.data" : "none.data");
    datatest::write_norm(path, samples, shape, check, DType::U32);
    set_record_count(path, check, 7);
    const BatchLayout layout = datatest::layout_for(shape, DType::U32);
    testing::LogCapture log;
    for (int pass = 0; pass < 2; ++pass) {
      NormFileReader reader(layout, check);
      reader.open(path);
      EXPECT_EQ(read_all(reader, layout),
                std::vector<Sample>(samples.begin(), samples.begin() + 7));
    }
    const std::string text = log.text();
    EXPECT_THAT(text, HasSubstr("Norm data file '" + path +
                                "': its header says number_of_records 7 but the file holds"));
    EXPECT_THAT(text, HasSubstr("(3 more samples)"));
    EXPECT_THAT(text, HasSubstr("they are ignored"));
    // Once per file, not at every pass.
    EXPECT_EQ(text.find("number_of_records 7"), text.rfind("number_of_records 7"));
  }
}

TEST(ConfigMismatch, DirectoriesAreNamedAsDirectories) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  fs::create_directory(dir / "sub");
  const std::string sub = dir / "sub";
  EMBER_EXPECT_THROW_WITH(read_file_list(sub), DataError,
                          "file list '" + sub + "' is a directory, not a file");
  EMBER_EXPECT_THROW_WITH(read_file_list(dir / "nope.txt"), DataError, "' does not exist");
  write_file_list(dir / "list.txt", {sub});
  EMBER_EXPECT_THROW_WITH(read_file_list(dir / "list.txt"), DataError,
                          "line 2: data file '" + sub + "' is a directory, not a file");
  EMBER_EXPECT_THROW_WITH(read_norm_header(sub, CheckMode::None), DataError,
                          "Norm data file '" + sub + "' is a directory, not a file");
  BatchLayout layout;
  layout.sparse = {{"data", 1, 1, 1}};
  NormFileReader reader(layout, CheckMode::None);
  EMBER_EXPECT_THROW_WITH(reader.open(sub), DataError,
                          "data file '" + sub + "' is a directory, not a file");
  RawOptions raw;
  raw.path = sub;
  raw.num_samples = 1;
  EMBER_EXPECT_THROW_WITH(RawSource(raw, layout), DataError,
                          "data file '" + sub + "' is a directory, not a file");
  (void)rng;
}

TEST(ConfigMismatch, ADataFileGivenAsAFileListIsNamedAsSuch) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    const std::string path = dir / "train_0.data";
    datatest::write_norm(path, datatest::random_samples(rng, 3, shape), shape, check, DType::U32);
    try {
      read_file_list(path);
      ADD_FAILURE() << "a data file was read as a file list";
    } catch (const DataError& e) {
      EXPECT_THAT(e.what(), HasSubstr("file list '" + path +
                                      "' looks like a data file, not a file list (expected a "
                                      "count then paths"));
      for (const char c : std::string(e.what())) {
        EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "an unprintable byte in the message";
      }
    }
  }
  // A text list whose count is not a number is quoted, a stray control byte escaped.
  std::ofstream(dir / "odd.txt", std::ios::binary)
      << "3\x01x\n/data/criteo/day_0/part_0.data\n/data/criteo/day_0/part_1.data\n"
         "/data/criteo/day_0/part_2.data\n";
  EMBER_EXPECT_THROW_WITH(read_file_list(dir / "odd.txt"), DataError,
                          "line 1: expected a positive number of data files, got '3\\x01x'");
}

// An allocator that refuses anything larger than `limit` bytes, as a machine out of memory.
class SmallAllocator final : public Allocator {
 public:
  explicit SmallAllocator(std::size_t limit) : limit_(limit) {}
  Place place() const override { return Place::host(); }
  std::string name() const override { return "small"; }
  void* allocate(std::size_t bytes) override {
    if (bytes > limit_) {
      EMBER_THROW_AS(OutOfMemoryError, "out of memory: small allocator could not allocate ", bytes,
                     " bytes");
    }
    return host_.allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) noexcept override { host_.deallocate(p, bytes); }

 private:
  std::size_t limit_;
  HostAllocator host_;
};

TEST(ConfigMismatch, ABatchTooLargeForMemoryNamesTheBatchSizeSetting) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  datatest::write_norm(dir / "a.data", datatest::random_samples(rng, 10, shape), shape,
                       CheckMode::Sum, DType::U32);
  write_file_list(dir / "list.txt", {dir / "a.data"});
  SmallAllocator small(1 << 20);
  PipelineOptions o;
  o.batch_size = 1 << 20;
  o.batch_size_name = "solver.batchsize";
  o.host_allocator = &small;
  EMBER_EXPECT_THROW_WITH(
      Pipeline(std::make_shared<NormSource>(dir / "list.txt", CheckMode::Sum,
                                            datatest::layout_for(shape, DType::U32)),
               o),
      OutOfMemoryError,
      "the input pipeline cannot allocate its batches for solver.batchsize 1048576: it needs ");
  try {
    Pipeline(std::make_shared<NormSource>(dir / "list.txt", CheckMode::Sum,
                                          datatest::layout_for(shape, DType::U32)),
             o);
  } catch (const OutOfMemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("host batches of "));
    EXPECT_THAT(e.what(), HasSubstr("small allocator could not allocate"));
    EXPECT_THAT(e.what(), HasSubstr("; lower solver.batchsize"));
  }
}

}  // namespace
}  // namespace ember::data
