// Every kind of bad input the spec names, each with the message it must give.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/data_test_support.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/norm_writer.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;
using ::testing::HasSubstr;

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a DataError, got: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError, got none";
  return {};
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

SampleShape one_hot_shape() {
  return datatest::one_hot_shape(2, {3});
}

TEST(BadInput, ChecksumMismatchDropsAndCountsTheSample) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = one_hot_shape();
  const auto samples = datatest::random_samples(rng, 6, shape);
  const std::string path = dir / "f.data";
  datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::U32);
  // Records after the 69-byte header: 4 + (4 * 3 + 3 * 8) + 1 = 41 bytes each.
  const std::uint64_t record = 41;
  flip_byte(path, 69 + 2 * record + 4 + 1);  // inside sample 2's label
  flip_byte(path, 69 + 5 * record + 40);     // sample 5's checksum byte
  ReadCounters counters;
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  NormFileReader reader(layout, CheckMode::Sum, &counters);
  reader.open(path);
  HostBatch batch(layout, 10);
  EXPECT_EQ(reader.read(batch), 4);
  EXPECT_TRUE(reader.done());
  EXPECT_EQ(reader.dropped(), 2);
  EXPECT_EQ(reader.dropped_indices(), (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(counters.dropped.load(), 2);
  ASSERT_EQ(counters.first_drops().size(), 2u);
  EXPECT_EQ(counters.first_drops()[1].file, path);
  EXPECT_EQ(counters.first_drops()[1].sample_index, 5);
  const std::vector<Sample> expect{samples[0], samples[1], samples[3], samples[4]};
  EXPECT_EQ(datatest::samples_of(batch), expect);
}

TEST(BadInput, HeaderMismatchRejectsTheFileNamingBothValues) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = one_hot_shape();
  const auto samples = datatest::random_samples(rng, 3, shape);
  const std::string sum_file = dir / "sum.data";
  const std::string none_file = dir / "none.data";
  datatest::write_norm(sum_file, samples, shape, CheckMode::Sum, DType::U32);
  datatest::write_norm(none_file, samples, shape, CheckMode::None, DType::U32);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  {
    NormFileReader reader(layout, CheckMode::None);
    const std::string m = error_of([&] { reader.open(sum_file); });
    EXPECT_THAT(m, HasSubstr(sum_file));
    EXPECT_THAT(m, HasSubstr("error_check is 1 (Sum)"));
    EXPECT_THAT(m, HasSubstr("check 0 (None)"));
  }
  {
    NormFileReader reader(layout, CheckMode::Sum);
    const std::string m = error_of([&] { reader.open(none_file); });
    EXPECT_THAT(m, HasSubstr(none_file));
    EXPECT_THAT(m, HasSubstr("error_check is 0 (None)"));
    EXPECT_THAT(m, HasSubstr("check 1 (Sum)"));
  }
  {
    BatchLayout more_slots = layout;
    more_slots.sparse.push_back({"extra", 2, 2, 1});
    NormFileReader reader(more_slots, CheckMode::Sum);
    const std::string m = error_of([&] { reader.open(sum_file); });
    EXPECT_THAT(m, HasSubstr(sum_file));
    EXPECT_THAT(m, HasSubstr("slot_num is 3"));
    EXPECT_THAT(m, HasSubstr("has 5 slots"));
  }
  {
    BatchLayout wider = layout;
    wider.dense_dim = 13;
    NormFileReader reader(wider, CheckMode::Sum);
    const std::string m = error_of([&] { reader.open(sum_file); });
    EXPECT_THAT(m, HasSubstr("label_dim + dense_dim is 1 + 2"));
    EXPECT_THAT(m, HasSubstr("configuration has 1 + 13"));
  }
  {
    // The same mismatch through a file list is reported when the source is built.
    write_file_list(dir / "list.txt", {sum_file});
    const std::string m = error_of([&] { NormSource(dir / "list.txt", CheckMode::None, layout); });
    EXPECT_THAT(m, HasSubstr(sum_file));
  }
  {
    // A corrupted header record (checksum) rejects the file too.
    flip_byte(sum_file, 4 + 8);  // number_of_records
    NormFileReader reader(layout, CheckMode::Sum);
    const std::string m = error_of([&] { reader.open(sum_file); });
    EXPECT_THAT(m, HasSubstr("header checksum mismatch"));
  }
}

TEST(BadInput, TruncatedFileNamesFileAndSampleIndex) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.slots_per_input = {4};
  const auto samples = datatest::random_samples(rng, 50, shape);
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    const std::string path = dir / "t.data";
    datatest::write_norm(path, samples, shape, check, DType::I64);
    const BatchLayout layout = datatest::layout_for(shape, DType::I64);
    // Cut the file half way: some sample near the middle is the first incomplete one, and the
    // number of samples read before the error says which.
    const std::uint64_t size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size / 2);
    NormFileReader reader(layout, check);
    reader.open(path);
    HostBatch batch(layout, 100);
    const std::string m = error_of([&] { reader.read(batch); });
    EXPECT_THAT(m, HasSubstr(path));
    EXPECT_THAT(m, HasSubstr("truncated: sample " + std::to_string(batch.size())));
    EXPECT_THAT(m, HasSubstr("claims 50 samples"));
    EXPECT_GT(batch.size(), 10);
    EXPECT_LT(batch.size(), 40);
    // The samples before the cut were good.
    EXPECT_EQ(datatest::samples_of(batch),
              std::vector<Sample>(samples.begin(), samples.begin() + batch.size()));
  }
  // A file shorter than its header.
  const std::string stub = dir / "stub.data";
  std::ofstream(stub, std::ios::binary) << "abc";
  NormFileReader reader(datatest::layout_for(shape, DType::U32), CheckMode::None);
  const std::string m = error_of([&] { reader.open(stub); });
  EXPECT_THAT(m, HasSubstr(stub));
  EXPECT_THAT(m, HasSubstr("truncated"));
}

TEST(BadInput, TooManyKeysNamesSampleAndSlot) {
  testing::ScratchDir dir;
  const std::string path = dir / "k.data";
  NormWriter w(path, {CheckMode::None, DType::U32, 1, 0, 3});
  const std::vector<float> label{1}, dense{};
  const std::vector<std::int32_t> ok_nnz{1, 2, 1};
  const std::vector<std::uint32_t> ok_keys{1, 2, 3, 4};
  const std::vector<std::int32_t> bad_nnz{2, 2, 3};
  const std::vector<std::uint32_t> bad_keys{1, 2, 3, 4, 5, 6, 7};
  w.write<std::uint32_t>(label, dense, ok_nnz, ok_keys);
  w.write<std::uint32_t>(label, dense, ok_nnz, ok_keys);
  w.write<std::uint32_t>(label, dense, bad_nnz, bad_keys);
  w.close();
  BatchLayout layout;
  layout.label_dim = 1;
  layout.dense_dim = 0;
  layout.sparse = {{"wide", 1, 4, 4}, {"deep", 2, 4, 4}};  // budget 4 keys for slots 1 and 2
  NormFileReader reader(layout, CheckMode::None);
  reader.open(path);
  HostBatch batch(layout, 10);
  const std::string m = error_of([&] { reader.read(batch); });
  EXPECT_THAT(m, HasSubstr(path));
  EXPECT_THAT(m, HasSubstr("sample 2 slot 2 has nnz 3"));
  EXPECT_THAT(m, HasSubstr("sparse input 1 (\"deep\") to 5 keys"));
  EXPECT_THAT(m, HasSubstr("max_feature_num_per_sample 4"));
  EXPECT_EQ(batch.size(), 2);
}

TEST(BadInput, RawKeyOutOfItsSlotRangeNamesSampleSlotAndValue) {
  testing::ScratchDir dir;
  const std::string path = dir / "r.bin";
  RawWriter w(path, 1, 1, 3, false);
  const std::vector<std::int32_t> label{1}, dense{5};
  w.write(std::span<const std::int32_t>(label), std::span<const std::int32_t>(dense),
          std::vector<std::int32_t>{0, 9, 3});
  w.write(std::span<const std::int32_t>(label), std::span<const std::int32_t>(dense),
          std::vector<std::int32_t>{1, 10, 3});
  w.close();
  RawOptions raw;
  raw.path = path;
  raw.num_samples = 2;
  raw.slot_size_array = {5, 10, 4};
  BatchLayout layout;
  layout.dense_dim = 1;
  layout.sparse = {{"data", 3, 3, 1}};
  RawSource source(raw, layout);
  HostBatch batch(layout, 2);
  const std::string m = error_of([&] { source.read_samples(0, 2, batch); });
  EXPECT_THAT(m, HasSubstr(path));
  EXPECT_THAT(m, HasSubstr("sample 1 slot 1 has key 10"));
  EXPECT_THAT(m, HasSubstr("[0, 10)"));
  // Negative keys are reported the same way without a slot_size_array.
  RawWriter neg(dir / "n.bin", 1, 1, 3, false);
  neg.write(std::span<const std::int32_t>(label), std::span<const std::int32_t>(dense),
            std::vector<std::int32_t>{0, -4, 3});
  neg.close();
  raw.path = dir / "n.bin";
  raw.num_samples = 1;
  raw.slot_size_array.clear();
  RawSource neg_source(raw, layout);
  batch.clear();
  EXPECT_THAT(error_of([&] { neg_source.read_samples(0, 1, batch); }),
              HasSubstr("sample 0 slot 1 has key -4"));
}

TEST(BadInput, TruncatedRawFileNamesTheFirstMissingSample) {
  testing::ScratchDir dir;
  const std::string path = dir / "r.bin";
  RawWriter w(path, 1, 2, 2, true);
  for (int i = 0; i < 5; ++i) {
    w.write(std::vector<float>{1}, std::vector<float>{0.5f, 2}, std::vector<std::int32_t>{1, 2});
  }
  w.close();
  RawOptions raw;
  raw.path = path;
  raw.num_samples = 7;
  raw.float_label_dense = true;
  BatchLayout layout;
  layout.dense_dim = 2;
  layout.sparse = {{"data", 2, 2, 1}};
  const std::string m = error_of([&] { RawSource(raw, layout); });
  EXPECT_THAT(m, HasSubstr(path));
  EXPECT_THAT(m, HasSubstr("num_samples is 7"));
  EXPECT_THAT(m, HasSubstr("sample 5 is the first one missing"));
}

TEST(BadInput, MissingFilesInAListNameTheListAndTheLine) {
  testing::ScratchDir dir;
  std::ofstream(dir / "a.data") << "x";
  {
    std::ofstream list(dir / "list.txt");
    list << "3\n"
         << (dir / "a.data").string() << "\n"
         << (dir / "gone.data").string() << "\n"
         << (dir / "a.data").string() << "\n";
  }
  std::string m = error_of([&] { read_file_list(dir / "list.txt"); });
  EXPECT_THAT(m, HasSubstr((dir / "list.txt").string()));
  EXPECT_THAT(m, HasSubstr("line 3"));
  EXPECT_THAT(m, HasSubstr("gone.data"));
  EXPECT_THAT(m, HasSubstr("does not exist"));
  {
    std::ofstream list(dir / "short.txt");
    list << "4\n" << (dir / "a.data").string() << "\n";
  }
  m = error_of([&] { read_file_list(dir / "short.txt"); });
  EXPECT_THAT(m, HasSubstr("announces 4 data files on line 1 but ends at line 2"));
  {
    std::ofstream list(dir / "nocount.txt");
    list << "files\n";
  }
  m = error_of([&] { read_file_list(dir / "nocount.txt"); });
  EXPECT_THAT(m, HasSubstr("line 1"));
  EXPECT_THAT(error_of([&] { read_file_list(dir / "absent.txt"); }), HasSubstr("absent.txt"));
}

}  // namespace
}  // namespace ember::data
