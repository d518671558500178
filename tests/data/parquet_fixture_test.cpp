// Parquet files written by DuckDB (tests/data/fixtures/parquet, make_fixtures.mjs), read back
// exactly: SNAPPY, ZSTD, GZIP and uncompressed; data pages v1 and v2; PLAIN, dictionary,
// DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT values; several row groups; columns stored in
// another order than the metadata's; INT32, UINT32 and UINT64 keys; DOUBLE and INT32 dense
// columns; a list (multi-hot) column with empty lists. Then the pipeline over a Parquet source.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/parquet_test_support.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/pipeline.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using parquettest::fixture;
using parquettest::fixture_layout;
using parquettest::fixture_samples;
using parquettest::read_list;

const std::vector<std::int64_t> kSlotSizes = {50, 100000, 1000003, 70000};

std::string list_of(const std::string& name) {
  return (fixture(name) / "_file_list.txt").string();
}

TEST(ParquetFixtures, ReadBackExactlyWhateverTheBatchSize) {
  for (const std::string name : {"snappy", "zstd_v2", "plain"}) {
    if (!parquettest::fixture_readable(name)) continue;  // that codec is not in this build
    const auto expected = fixture_samples(name);
    ASSERT_FALSE(expected.empty());
    for (DType key_type : {DType::U32, DType::I64}) {
      // Batch sizes that split tiles, pages and row groups every way.
      for (std::int64_t capacity : {1, 7, 1023, 2049, 65537}) {
        SCOPED_TRACE(name + " " + std::string(dtype_name(key_type)) + " batch " +
                     std::to_string(capacity));
        const auto got = read_list(list_of(name), fixture_layout(2, 4, 4, key_type), {}, capacity);
        ASSERT_EQ(got.size(), expected.size());
        for (std::size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], expected[i]) << "row " << i;
      }
    }
  }
}

TEST(ParquetFixtures, SlotOffsetsFromSlotSizeArray) {
  EMBER_REQUIRE_READABLE(parquet::Codec::Snappy);
  const auto expected = fixture_samples("snappy", kSlotSizes);
  for (DType key_type : {DType::U32, DType::I64}) {
    const auto got =
        read_list(list_of("snappy"), fixture_layout(2, 4, 4, key_type), kSlotSizes, 512);
    EXPECT_EQ(got, expected);
  }
  // Slot 2's keys start after 50 + 100000 keys of slots 0 and 1.
  EXPECT_EQ(expected[1].slots[2][0], 427799 + 50 + 100000);
}

TEST(ParquetFixtures, MultiHotListColumn) {
  const auto expected = fixture_samples("multihot_gzip");
  bool empty_seen = false, three_seen = false;
  for (const auto& s : expected) {
    empty_seen |= s.slots[1].empty();
    three_seen |= s.slots[1].size() == 3;
  }
  ASSERT_TRUE(empty_seen && three_seen) << "the fixture should hold empty and 3-key lists";
  for (DType key_type : {DType::U32, DType::I64}) {
    for (std::int64_t capacity : {1, 3, 400, 1000}) {
      const auto got =
          read_list(list_of("multihot_gzip"), fixture_layout(1, 2, 4, key_type), {}, capacity);
      EXPECT_EQ(got, expected) << "batch " << capacity;
    }
  }
}

TEST(ParquetFixtures, MultiHotKeysBeyondTheBudgetAreAnError) {
  // Row 3 has C1 plus three list keys: four keys, one more than a budget of 3.
  EMBER_EXPECT_THROW_WITH(
      read_list(list_of("multihot_gzip"), fixture_layout(1, 2, 3, DType::U32), {}, 64), DataError,
      "row 3 has 4 keys in sparse input 0 (\"data1\") by its slot column 'C2', above its "
      "max_feature_num_per_sample 3");
}

TEST(ParquetFixtures, KeyOutsideItsVocabularyNamesFileColumnRowAndValue) {
  std::vector<std::int64_t> sizes = kSlotSizes;
  sizes[1] = 9458;  // row 2 holds 9458 in C2
  EMBER_EXPECT_THROW_WITH(
      read_list(list_of("plain"), fixture_layout(2, 4, 4, DType::U32), sizes, 100), DataError,
      "column 'C2': row 2 holds key 9458, outside slot_size_array[1] = 9458 (0 to 9457)");
}

TEST(ParquetFixtures, PipelineDeliversEverySampleOncePerEpoch) {
  EMBER_REQUIRE_READABLE(parquet::Codec::Snappy);
  const auto expected = fixture_samples("snappy", kSlotSizes);
  for (int workers : {1, 2}) {
    PipelineOptions o;
    o.batch_size = 333;
    o.num_workers = workers;
    o.mode = PipelineMode::Epochs;
    o.num_epochs = 2;
    Pipeline p(std::make_shared<parquet::ParquetSource>(
                   list_of("snappy"), fixture_layout(2, 4, 4, DType::I64), kSlotSizes),
               o);
    std::vector<Sample> epoch, all;
    int epochs = 0;
    while (auto b = p.next()) {
      const auto got = datatest::samples_of(*b);
      epoch.insert(epoch.end(), got.begin(), got.end());
      if (b->end_of_epoch) {
        std::sort(epoch.begin(), epoch.end());
        auto want = expected;
        std::sort(want.begin(), want.end());
        EXPECT_EQ(epoch, want) << workers << " workers, epoch " << epochs;
        epoch.clear();
        ++epochs;
      }
    }
    EXPECT_EQ(epochs, 2);
  }
}

TEST(ParquetFixtures, SourceCountsSamplesAndUsesOneWorkerPerFile) {
  EMBER_REQUIRE_READABLE(parquet::Codec::Snappy);
  parquet::ParquetSource source(list_of("snappy"), fixture_layout(2, 4, 4, DType::U32), {});
  EXPECT_EQ(source.num_samples(), 2400);
  EXPECT_EQ(source.max_workers(65536), 2);
  EXPECT_NE(source.description().find("Parquet file list"), std::string::npos);
}

}  // namespace
}  // namespace ember::data
