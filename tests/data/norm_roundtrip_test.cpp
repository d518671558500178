// Norm write -> read round trips in every check mode and key type, one-hot and multi-hot, with
// one and several sparse inputs.
#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

#include "data/data_test_support.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;

class NormRoundTrip : public ::testing::TestWithParam<std::tuple<CheckMode, DType>> {};

TEST_P(NormRoundTrip, WriteThenReadGivesTheSameSamples) {
  const auto [check, key_type] = GetParam();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape multi_hot;
  multi_hot.label_dim = 2;
  multi_hot.dense_dim = 5;
  multi_hot.slots_per_input = {3, 1, 4};
  multi_hot.min_nnz = 0;
  multi_hot.max_nnz = 5;
  multi_hot.max_key = key_type == DType::I64 ? (std::int64_t{1} << 40) : 4000000000ll;
  SampleShape one_hot;
  one_hot.label_dim = 1;
  one_hot.dense_dim = 13;
  one_hot.slots_per_input = {26};
  one_hot.min_nnz = 1;
  one_hot.max_nnz = 1;
  SampleShape no_dense;
  no_dense.dense_dim = 0;
  no_dense.slots_per_input = {2};
  for (const SampleShape& shape : {multi_hot, one_hot, no_dense}) {
    for (std::int64_t n : {0, 1, 7, 1023}) {
      const auto samples = datatest::random_samples(rng, n, shape);
      const std::string path = dir / "rt.data";
      datatest::write_norm(path, samples, shape, check, key_type);
      EXPECT_EQ(datatest::read_norm_file(path, shape, check, key_type), samples) << "n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, NormRoundTrip,
                         ::testing::Combine(::testing::Values(CheckMode::Sum, CheckMode::None),
                                            ::testing::Values(DType::U32, DType::I64)));

TEST(NormReader, BoundsCheckedAndUncheckedParsingAgree) {
  // Samples further than the largest possible sample from the end of the file are parsed without
  // per-slot bounds checks; the rest with them. A huge key budget makes every sample take the
  // checked path: both must read the same samples.
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.max_nnz = 9;
  shape.slots_per_input = {5, 2};
  const auto samples = datatest::random_samples(rng, 500, shape);
  for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
    const std::string path = dir / "f.data";
    datatest::write_norm(path, samples, shape, check, DType::U32);
    for (std::int64_t budget : {std::int64_t{0}, std::int64_t{1} << 20}) {
      BatchLayout layout = datatest::layout_for(shape, DType::U32);
      for (auto& s : layout.sparse)
        s.max_feature_num_per_sample += budget;
      NormFileReader reader(layout, check);
      reader.open(path);
      HostBatch batch(layout, 500);
      EXPECT_EQ(reader.read(batch), 500);
      EXPECT_TRUE(reader.done());
      EXPECT_EQ(datatest::samples_of(batch), samples) << "budget " << budget;
    }
  }
}

TEST(NormReader, StopsAtBatchCapacityAndResumes) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  const auto samples = datatest::random_samples(rng, 100, shape);
  const std::string path = dir / "f.data";
  datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::I64);
  const BatchLayout layout = datatest::layout_for(shape, DType::I64);
  NormFileReader reader(layout, CheckMode::Sum);
  reader.open(path);
  HostBatch batch(layout, 33);
  std::vector<Sample> got;
  for (std::int64_t expect : {33, 33, 33, 1}) {
    batch.clear();
    EXPECT_EQ(reader.read(batch), expect);
    for (auto& s : datatest::samples_of(batch))
      got.push_back(s);
  }
  EXPECT_TRUE(reader.done());
  batch.clear();
  EXPECT_EQ(reader.read(batch), 0);
  EXPECT_EQ(got, samples);
}

// A rewound reader reads its file again from the first sample, wherever it stood, as a reader
// that opened the file again would; with no file open it refuses.
TEST(NormReader, RewindReadsTheFileAgainAsReopeningWould) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  for (std::int64_t n : {1, 7, 1023}) {
    const auto samples = datatest::random_samples(rng, n, shape);
    const std::string path = dir / ("f" + std::to_string(n) + ".data");
    datatest::write_norm(path, samples, shape, CheckMode::Sum, DType::U32);
    const BatchLayout layout = datatest::layout_for(shape, DType::U32);
    NormFileReader reader(layout, CheckMode::Sum);
    EXPECT_THROW(reader.rewind(), Error);
    reader.open(path);
    HostBatch batch(layout, 5);
    const auto read_all = [&] {
      std::vector<Sample> got;
      while (!reader.done()) {
        batch.clear();
        reader.read(batch);
        for (auto& s : datatest::samples_of(batch))
          got.push_back(s);
      }
      return got;
    };
    EXPECT_EQ(read_all(), samples);
    reader.rewind();
    EXPECT_FALSE(reader.done());
    EXPECT_EQ(reader.position().record, 0);
    EXPECT_EQ(read_all(), samples) << n << " samples, after the end";
    // Mid-file.
    reader.rewind();
    batch.clear();
    reader.read(batch);
    reader.rewind();
    EXPECT_EQ(read_all(), samples) << n << " samples, from the middle";
  }
}

TEST(HostBatch, AppendRebasesRowOffsets) {
  auto rng = testing::make_rng();
  SampleShape shape;
  shape.slots_per_input = {2, 3};
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  testing::ScratchDir dir;
  const auto samples = datatest::random_samples(rng, 20, shape);
  datatest::write_norm(dir / "a.data", samples, shape, CheckMode::None, DType::U32);
  NormFileReader reader(layout, CheckMode::None);
  reader.open(dir / "a.data");
  HostBatch all(layout, 20);
  reader.read(all);
  HostBatch merged(layout, 20);
  merged.append(all, 5, 12);
  merged.append(all, 0, 5);
  merged.append(all, 12, 20);
  std::vector<Sample> expect(samples.begin() + 5, samples.begin() + 12);
  expect.insert(expect.end(), samples.begin(), samples.begin() + 5);
  expect.insert(expect.end(), samples.begin() + 12, samples.end());
  EXPECT_EQ(datatest::samples_of(merged), expect);
  EXPECT_THROW(merged.append(all, 0, 1), Error);  // full
}

TEST(FileList, WritesAndReadsWithRelativeFallback) {
  testing::ScratchDir dir;
  {
    std::ofstream(dir / "a.data") << "x";
    std::ofstream(dir / "b.data") << "y";
  }
  // Names relative to the list's directory resolve there when not found from the cwd.
  write_file_list(dir / "list.txt", {"a.data", (dir / "b.data").string()});
  const FileList list = read_file_list(dir / "list.txt");
  ASSERT_EQ(list.files.size(), 2u);
  EXPECT_EQ(list.files[0], (dir / "a.data").string());
  EXPECT_EQ(list.files[1], (dir / "b.data").string());
}

}  // namespace
}  // namespace ember::data
