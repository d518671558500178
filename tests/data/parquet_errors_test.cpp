// Bad Parquet input gives one-line DataErrors naming the file, the column and the row: a null, a
// missing column, a wrong column type, a truncated or damaged footer, a corrupt page, a num_rows
// that lies (in _metadata.json, in the footer, in a row group), metadata that does not match the
// configuration, an unsupported codec.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "data/parquet_test_support.hpp"
#include "ember/data/parquet/parquet_file.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;
using parquettest::copy_fixture;
using parquettest::fixture;
using parquettest::fixture_layout;
using parquettest::read_list;

// Runs `read` and expects a DataError of one line holding every one of `parts`.
void expect_error(const std::function<void()>& read, const std::vector<std::string>& parts) {
  try {
    read();
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
    for (const auto& p : parts) {
      EXPECT_NE(m.find(p), std::string::npos) << "message: " << m << "\n  expected: " << p;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another error type: " << e.what();
  }
}

void read_dir(const fs::path& dir, std::int64_t dense = 2) {
  read_list((dir / "_file_list.txt").string(), fixture_layout(dense, 4, 4, DType::I64), {}, 1000);
}

std::vector<char> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<char>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// Rewrites a file's footer after `edit` changed its metadata (the data stays as it is).
void rewrite_footer(const fs::path& file, const std::function<void(parquet::FileMetaData&)>& edit) {
  std::vector<char> b = bytes_of(file);
  std::uint32_t length = 0;
  std::memcpy(&length, b.data() + b.size() - 8, 4);
  const std::size_t start = b.size() - 8 - length;
  auto meta = parquet::parse_file_metadata(reinterpret_cast<const std::byte*>(b.data()) + start,
                                           length, "test");
  edit(meta);
  std::vector<std::byte> footer;
  parquet::append_file_metadata(meta, footer);
  b.resize(start);
  b.insert(b.end(), reinterpret_cast<const char*>(footer.data()),
           reinterpret_cast<const char*>(footer.data()) + footer.size());
  const auto n = static_cast<std::uint32_t>(footer.size());
  b.insert(b.end(), reinterpret_cast<const char*>(&n), reinterpret_cast<const char*>(&n) + 4);
  b.insert(b.end(), {'P', 'A', 'R', '1'});
  write_bytes(file, b);
}

void edit_metadata(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(dir / "_metadata.json");
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  edit(j);
  std::ofstream(dir / "_metadata.json") << j.dump();
}

TEST(ParquetErrors, NullNamesFileColumnAndRow) {
  if (!parquettest::fixture_readable("null"))
    GTEST_SKIP() << "the fixture's codec is not in this build";
  expect_error([] { read_dir(fixture("null")); },
               {"Parquet file '", "null/part_0.parquet': column 'C1': row 123 is null"});
}

TEST(ParquetErrors, WrongColumnType) {
  expect_error([] { read_dir(fixture("wrong_type")); },
               {"wrong_type/part_0.parquet': column 'C2' (\"cats\") is BYTE_ARRAY (string); slot "
                "columns must be INT64 or INT32, or lists of them"});
  // A list column where a dense feature is expected.
  expect_error(
      [] {
        testing::ScratchDir dir;
        copy_fixture("multihot_gzip", dir.path());
        edit_metadata(dir.path(), [](nlohmann::json& j) {
          std::swap(j["conts"][0]["col_name"], j["cats"][1]["col_name"]);
        });
        read_list((dir / "_file_list.txt").string(), fixture_layout(1, 2, 4, DType::U32), {}, 10);
      },
      {"column 'C2' (\"conts\") is list<INT64>; label and dense columns must be FLOAT, DOUBLE, "
       "INT32 or INT64"});
}

TEST(ParquetErrors, MissingColumnAndMetadataProblems) {
  testing::ScratchDir dir;
  copy_fixture("plain", dir.path());
  edit_metadata(dir.path(), [](nlohmann::json& j) { j["cats"][2]["col_name"] = "C9"; });
  expect_error([&] { read_dir(dir.path()); }, {"has no column 'C9' (named in \"cats\" of '",
                                               "_metadata.json'); its columns: "
                                               "label, I1, I2, C1, C2, C3, C4"});

  copy_fixture("plain", dir.path());
  expect_error([&] { read_dir(dir.path(), 3); },
               {"lists 2 \"conts\" columns but the configuration has dense_dim 3"});

  fs::remove(dir / "_metadata.json");
  expect_error([&] { read_dir(dir.path()); }, {"cannot open Parquet metadata '"});

  std::ofstream(dir / "_metadata.json") << "{\"file_stats\": [], \"labels\": []";
  expect_error([&] { read_dir(dir.path()); }, {"_metadata.json' is not valid JSON"});

  copy_fixture("plain", dir.path());
  edit_metadata(dir.path(),
                [](nlohmann::json& j) { j["file_stats"][0]["file_name"] = "x.parquet"; });
  expect_error(
      [&] {
        parquet::ParquetSource((dir / "_file_list.txt").string(),
                               fixture_layout(2, 4, 4, DType::I64), {});
      },
      {"part_0.parquet' has no file_stats entry in '"});
}

TEST(ParquetErrors, TruncatedOrDamagedFooter) {
  EMBER_REQUIRE_READABLE(parquet::Codec::Snappy);
  testing::ScratchDir dir;
  copy_fixture("snappy", dir.path());
  const fs::path file = dir / "part_0.parquet";
  const std::vector<char> good = bytes_of(file);
  auto cut = good;
  cut.resize(good.size() - 100);
  write_bytes(file, cut);
  expect_error([&] { read_dir(dir.path()); },
               {"part_0.parquet' does not end with PAR1: its footer is missing"});

  cut.resize(6);
  write_bytes(file, cut);
  expect_error([&] { read_dir(dir.path()); }, {"part_0.parquet' is 6 bytes, too short"});

  // The footer loses its last 40 bytes but keeps a consistent length word and the magic.
  auto damaged = good;
  std::uint32_t length = 0;
  std::memcpy(&length, good.data() + good.size() - 8, 4);
  damaged.erase(damaged.end() - 8 - 40, damaged.end() - 8);
  length -= 40;
  std::memcpy(damaged.data() + damaged.size() - 8, &length, 4);
  write_bytes(file, damaged);
  expect_error([&] { read_dir(dir.path()); }, {"part_0.parquet': footer: "});

  // A footer length past the start of the file.
  damaged = good;
  length = static_cast<std::uint32_t>(good.size());
  std::memcpy(damaged.data() + damaged.size() - 8, &length, 4);
  write_bytes(file, damaged);
  expect_error([&] { read_dir(dir.path()); }, {"footer length", "does not fit the file"});
}

TEST(ParquetErrors, CorruptCompressedPage) {
  for (const std::string name : {"snappy", "zstd_v2"}) {
    if (!parquettest::fixture_readable(name)) continue;  // that codec is not in this build
    testing::ScratchDir dir;
    copy_fixture(name, dir.path());
    const fs::path file = dir / "part_0.parquet";
    std::int64_t offset = 0;
    {
      const parquet::ParquetFile f(file.string());
      const auto* field = f.schema().find("I2");
      const auto& meta =
          *f.metadata().row_groups[0].columns[static_cast<std::size_t>(field->leaf)].meta_data;
      std::size_t header = 0;
      const auto h =
          parquet::parse_page_header(f.data() + meta.data_page_offset, 4096, "test", header);
      offset = meta.data_page_offset + static_cast<std::int64_t>(header);
      if (h.data_page_v2) {
        offset += h.data_page_v2->repetition_levels_byte_length +
                  h.data_page_v2->definition_levels_byte_length;
      }
    }
    auto b = bytes_of(file);
    for (int k = 0; k < 6; ++k)
      b[static_cast<std::size_t>(offset + k)] = static_cast<char>(0xff);
    write_bytes(file, b);
    expect_error([&] { read_dir(dir.path()); }, {"part_0.parquet': column 'I2', page ",
                                                 name == "snappy" ? "SNAPPY data" : "ZSTD data"});
  }
}

TEST(ParquetErrors, LyingNumRows) {
  EMBER_REQUIRE_READABLE(parquet::Codec::Snappy);
  testing::ScratchDir dir;
  copy_fixture("snappy", dir.path());
  const fs::path file = dir / "part_0.parquet";
  const auto good = bytes_of(file);
  // _metadata.json disagrees with the file.
  edit_metadata(dir.path(), [](nlohmann::json& j) { j["file_stats"][0]["num_rows"] = 2000; });
  expect_error([&] { read_dir(dir.path()); },
               {"part_0.parquet' holds 2100 rows but '", "_metadata.json' says num_rows 2000"});
  copy_fixture("snappy", dir.path());

  // The footer's total disagrees with its row groups.
  rewrite_footer(file, [](parquet::FileMetaData& m) { m.num_rows = 2101; });
  expect_error([&] { read_dir(dir.path()); },
               {"its footer claims 2101 rows but its row groups hold 2100"});

  // A row group that claims fewer rows than its pages hold (every count changed to agree).
  write_bytes(file, good);
  rewrite_footer(file, [](parquet::FileMetaData& m) {
    m.row_groups[0].num_rows -= 1;
    for (auto& c : m.row_groups[0].columns)
      c.meta_data->num_values -= 1;
    m.num_rows -= 1;
  });
  edit_metadata(dir.path(), [](nlohmann::json& j) { j["file_stats"][0]["num_rows"] = 2099; });
  expect_error([&] { read_dir(dir.path()); },
               {"part_0.parquet': column 'label': the row group of rows 0 to 2046 claims 2047 "
                "rows but the column holds more values"});

  // ... and one that claims more.
  write_bytes(file, good);
  rewrite_footer(file, [](parquet::FileMetaData& m) {
    m.row_groups[0].num_rows += 1;
    for (auto& c : m.row_groups[0].columns)
      c.meta_data->num_values += 1;
    m.num_rows += 1;
  });
  edit_metadata(dir.path(), [](nlohmann::json& j) { j["file_stats"][0]["num_rows"] = 2101; });
  expect_error([&] { read_dir(dir.path()); },
               {"column 'label': its pages end after row 2048 but the row group of rows 0 to 2048 "
                "claims 2049 rows"});
}

TEST(ParquetErrors, UnsupportedCodecIsNamed) {
  testing::ScratchDir dir;
  copy_fixture("plain", dir.path());
  rewrite_footer(dir / "part_0.parquet", [](parquet::FileMetaData& m) {
    for (auto& c : m.row_groups[0].columns)
      c.meta_data->codec = parquet::Codec::Lz4;
  });
  expect_error([&] { read_dir(dir.path()); },
               {"column 'label': compression LZ4 is not supported (UNCOMPRESSED, SNAPPY, ZSTD and "
                "GZIP are)"});
}

}  // namespace
}  // namespace ember::data
