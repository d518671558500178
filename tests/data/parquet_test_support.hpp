// Helpers of the Parquet tests: the DuckDB-written fixtures and the values they hold, reading a
// dataset back through ParquetFileReader, and DuckDB itself (node + @duckdb/node-api) where the
// test machine has it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/data_test_support.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/parquet/compression.hpp"

// Skips the current test (reported as skipped) when this build does not write `codec` (SNAPPY and
// ZSTD need libsnappy / libzstd at build time; the GPU machines have neither), or with
// EMBER_REQUIRE_READABLE does not read it (ZSTD without libzstd; SNAPPY is always read).
#define EMBER_REQUIRE_CODEC(codec)                                          \
  do {                                                                      \
    if (!::ember::data::parquet::codec_supported(codec)) {                  \
      GTEST_SKIP() << ::ember::data::parquet::codec_support_problem(codec); \
    }                                                                       \
  } while (0)
#define EMBER_REQUIRE_READABLE(codec)                                              \
  do {                                                                             \
    if (!::ember::data::parquet::codec_readable(codec)) {                          \
      GTEST_SKIP() << ::ember::data::parquet::codec_support_problem(codec, false); \
    }                                                                              \
  } while (0)

namespace ember::data::parquettest {

// tests/data/fixtures/parquet/<name>
std::filesystem::path fixture(const std::string& name);

// Whether this build can read the fixture (its pages' codec is compiled in).
bool fixture_readable(const std::string& name);

// The rows values.json records for a fixture, as samples: keys raw plus the slot offsets of
// slot_size_array (when given).
std::vector<datatest::Sample> fixture_samples(
    const std::string& name, const std::vector<std::int64_t>& slot_size_array = {});

// The layout of the fixtures: 1 label, `dense` dense, one sparse input of `slots` slots with a
// key budget of `budget`.
BatchLayout fixture_layout(std::int64_t dense, std::int64_t slots, std::int64_t budget,
                           DType key_type);

// Every sample of a file list, read file by file through ParquetFileReader into batches of
// `capacity` samples.
std::vector<datatest::Sample> read_list(const std::string& list, const BatchLayout& layout,
                                        const std::vector<std::int64_t>& slot_size_array,
                                        std::int64_t capacity);

// Copies a fixture's folder to `to` (to edit a file or the metadata in a test).
void copy_fixture(const std::string& name, const std::filesystem::path& to);

// node with @duckdb/node-api: the command prefix that runs duckdb_read.mjs, or nothing (with
// the reason in `why`) when this machine lacks either.
std::optional<std::string> duckdb_reader(std::string& why);

// Rows DuckDB reads from the files, columns in the order given: one vector per row, list
// columns flattened to their keys with the key count first.
std::vector<std::vector<double>> duckdb_rows(const std::string& reader,
                                             const std::vector<std::string>& files,
                                             const std::vector<std::string>& columns);

}  // namespace ember::data::parquettest
