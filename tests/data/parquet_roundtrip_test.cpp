// Ember's Parquet writer, read back by Ember's reader and by DuckDB (an independent reader,
// where node and @duckdb/node-api are installed; skipped with the reason elsewhere): one-hot and
// multi-hot (list) slots, every codec Ember writes, row groups and pages of odd sizes.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/parquet_test_support.hpp"
#include "ember/data/parquet/parquet_file.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;
using datatest::Sample;
using datatest::SampleShape;

struct Written {
  std::string list;
  std::vector<std::string> files;
  std::vector<Sample> samples;
  parquet::ParquetWriterOptions options;
};

// Writes `samples` over `files` files in HugeCTR's layout.
Written write_dataset(const fs::path& dir, std::vector<Sample> samples, const SampleShape& shape,
                      bool multi_hot, parquet::Codec codec, int files, std::int64_t group_rows,
                      std::int64_t page_rows) {
  Written w;
  w.options = parquet::ParquetWriterOptions::with_default_names(shape.label_dim, shape.dense_dim,
                                                                shape.total_slots());
  w.options.codec = codec;
  w.options.row_group_rows = group_rows;
  w.options.page_rows = page_rows;
  if (multi_hot) w.options.slot_is_list.assign(static_cast<std::size_t>(shape.total_slots()), true);
  std::vector<parquet::WrittenFile> written;
  const auto n = static_cast<std::int64_t>(samples.size());
  for (int f = 0; f < files; ++f) {
    const std::string path = (dir / ("part_" + std::to_string(f) + ".parquet")).string();
    parquet::ParquetWriter writer(path, w.options);
    std::vector<std::int32_t> nnz;
    std::vector<std::int64_t> keys;
    for (std::int64_t i = n * f / files; i < n * (f + 1) / files; ++i) {
      const Sample& s = samples[static_cast<std::size_t>(i)];
      nnz.clear();
      keys.clear();
      for (const auto& slot : s.slots) {
        nnz.push_back(static_cast<std::int32_t>(slot.size()));
        keys.insert(keys.end(), slot.begin(), slot.end());
      }
      writer.write(s.label, s.dense, nnz, keys);
    }
    writer.close();
    written.push_back({path, writer.rows()});
    w.files.push_back(path);
  }
  w.list = (dir / "_file_list.txt").string();
  parquet::write_parquet_layout(dir.string(), w.list, written, w.options);
  w.samples = std::move(samples);
  return w;
}

struct Case {
  const char* name;
  SampleShape shape;
  bool multi_hot;
};

std::vector<Case> cases() {
  SampleShape one_hot;
  one_hot.dense_dim = 13;
  one_hot.slots_per_input = {26};
  one_hot.min_nnz = one_hot.max_nnz = 1;
  one_hot.max_key = 1 << 30;
  SampleShape multi;
  multi.label_dim = 2;
  multi.dense_dim = 3;
  multi.slots_per_input = {3, 2};
  multi.min_nnz = 0;
  multi.max_nnz = 4;
  return {{"one-hot", one_hot, false}, {"multi-hot", multi, true}};
}

TEST(ParquetRoundTrip, EmberReadsWhatItWrites) {
  auto rng = testing::make_rng();
  for (const Case& c : cases()) {
    for (auto codec : {parquet::Codec::Uncompressed, parquet::Codec::Snappy, parquet::Codec::Zstd,
                       parquet::Codec::Gzip}) {
      if (!parquet::codec_supported(codec)) continue;  // not in this build
      for (std::int64_t n : {0, 1, 7, 1023}) {
        SCOPED_TRACE(std::string(c.name) + " " + std::string(parquet::to_string(codec)) + " n " +
                     std::to_string(n));
        testing::ScratchDir dir;
        const auto w = write_dataset(dir.path(), datatest::random_samples(rng, n, c.shape), c.shape,
                                     c.multi_hot, codec, n > 1 ? 2 : 1, 100, 37);
        for (DType key_type : {DType::U32, DType::I64}) {
          const auto got =
              parquettest::read_list(w.list, datatest::layout_for(c.shape, key_type), {}, 64);
          EXPECT_EQ(got, w.samples);
        }
        if (n > 0) {
          const parquet::ParquetFile f(w.files[0]);
          EXPECT_EQ(f.metadata().row_groups.size(),
                    static_cast<std::size_t>((f.num_rows() + 99) / 100));
        }
      }
    }
  }
}

TEST(ParquetRoundTrip, Int32KeyColumns) {
  auto rng = testing::make_rng();
  for (const Case& c : cases()) {
    testing::ScratchDir dir;
    auto o = parquet::ParquetWriterOptions::with_default_names(c.shape.label_dim, c.shape.dense_dim,
                                                               c.shape.total_slots());
    o.key_type = parquet::PhysicalType::Int32;
    if (c.multi_hot) o.slot_is_list.assign(static_cast<std::size_t>(c.shape.total_slots()), true);
    const auto samples = datatest::random_samples(rng, 300, c.shape);
    const std::string path = (dir / "part_0.parquet").string();
    {
      parquet::ParquetWriter w(path, o);
      for (const Sample& s : samples) {
        std::vector<std::int32_t> nnz;
        std::vector<std::int64_t> keys;
        for (const auto& slot : s.slots) {
          nnz.push_back(static_cast<std::int32_t>(slot.size()));
          keys.insert(keys.end(), slot.begin(), slot.end());
        }
        w.write(s.label, s.dense, nnz, keys);
      }
      w.close();
      parquet::write_parquet_layout(dir.path().string(), (dir / "_file_list.txt").string(),
                                    {{path, w.rows()}}, o);
    }
    const parquet::ParquetFile f(path);
    EXPECT_EQ(f.schema().leaves.back().type, parquet::PhysicalType::Int32);
    EXPECT_EQ(parquettest::read_list((dir / "_file_list.txt").string(),
                                     datatest::layout_for(c.shape, DType::U32), {}, 77),
              samples)
        << c.name;
  }
  // A key that does not fit is refused, naming it.
  testing::ScratchDir dir;
  auto o = parquet::ParquetWriterOptions::with_default_names(1, 0, 1);
  o.key_type = parquet::PhysicalType::Int32;
  parquet::ParquetWriter w((dir / "x.parquet").string(), o);
  const std::vector<float> label = {1.f};
  const std::vector<std::int32_t> nnz = {1};
  const std::vector<std::int64_t> keys = {std::int64_t{1} << 40};
  EMBER_EXPECT_THROW_WITH(w.write(label, {}, nnz, keys), DataError,
                          "key 1099511627776 of slot 'C1' does not fit INT32 key columns");
}

TEST(ParquetDuckDb, ReadsWhatEmberWrites) {
  std::string why;
  const auto reader = parquettest::duckdb_reader(why);
  if (!reader) GTEST_SKIP() << "DuckDB round trip skipped: " << why;
  auto rng = testing::make_rng();
  for (const Case& c : cases()) {
    for (auto codec :
         {parquet::Codec::Uncompressed, parquet::Codec::Snappy, parquet::Codec::Zstd}) {
      if (!parquet::codec_supported(codec)) continue;  // not in this build
      SCOPED_TRACE(std::string(c.name) + " " + std::string(parquet::to_string(codec)));
      testing::ScratchDir dir;
      const auto w = write_dataset(dir.path(), datatest::random_samples(rng, 501, c.shape), c.shape,
                                   c.multi_hot, codec, 2, 128, 50);
      std::vector<std::string> columns = w.options.label_names;
      columns.insert(columns.end(), w.options.dense_names.begin(), w.options.dense_names.end());
      columns.insert(columns.end(), w.options.slot_names.begin(), w.options.slot_names.end());
      const auto rows = parquettest::duckdb_rows(*reader, w.files, columns);
      ASSERT_EQ(rows.size(), w.samples.size());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        std::vector<double> want;
        const Sample& s = w.samples[i];
        for (float v : s.label)
          want.push_back(v);
        for (float v : s.dense)
          want.push_back(v);
        for (const auto& slot : s.slots) {
          if (c.multi_hot) want.push_back(static_cast<double>(slot.size()));
          for (auto k : slot)
            want.push_back(static_cast<double>(k));
        }
        ASSERT_EQ(rows[i], want) << "row " << i;
      }
      // And Ember reads the same samples DuckDB saw.
      EXPECT_EQ(parquettest::read_list(w.list, datatest::layout_for(c.shape, DType::I64), {}, 100),
                w.samples);
    }
  }
}

}  // namespace
}  // namespace ember::data
