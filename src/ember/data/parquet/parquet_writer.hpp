// Writes HugeCTR-layout Parquet files: one FLOAT column per label and dense feature, one INT64
// column per slot (a LIST of INT64 for multi-hot slots), no nulls, data pages v1, SNAPPY
// (default), ZSTD, GZIP or no compression. Floats are PLAIN; keys are dictionary-encoded per
// column chunk where values repeat (at most 2^16 distinct values, each seen 4 times on average),
// PLAIN otherwise: a gather from a dictionary that outgrows the caches costs the reader more than
// a PLAIN value. Rows are buffered per row group and written
// column chunk by column chunk; close() writes the footer. Other Parquet readers (DuckDB, pyarrow,
// cuDF) read the files; `_metadata.json` and the file list are written by
// write_parquet_dataset_files().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ember/data/output_file.hpp"
#include "ember/data/parquet/compression.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"

namespace ember::data::parquet {

struct ParquetWriterOptions {
  Codec codec = default_write_codec();
  std::int64_t row_group_rows = 131072;
  std::int64_t page_rows = 16384;
  bool dictionary = true;  // dictionary-encode key columns where it pays
  // INT64 (HugeCTR's and NVTabular's type) or INT32 (every key must fit; PLAIN pages of small
  // ids then hold no zero bytes for a compressor to chase, which reads several times faster).
  PhysicalType key_type = PhysicalType::Int64;
  std::vector<std::string> label_names;  // label_dim of them
  std::vector<std::string> dense_names;  // dense_dim
  std::vector<std::string> slot_names;   // one per slot
  std::vector<bool> slot_is_list;  // per slot: list<INT64> (multi-hot) or INT64; empty: all INT64

  // HugeCTR/NVTabular's usual names: "label" (label0, label1, ... for several), I1.., C1..
  static ParquetWriterOptions with_default_names(std::int64_t label_dim, std::int64_t dense_dim,
                                                 std::int64_t slots);
  // The `_metadata.json` columns for these names: labels, conts, cats with their file indices.
  HugeCtrMetadata metadata_columns() const;
};

// Parses "none" / "uncompressed", "snappy", "zstd", "gzip" (ConfigError otherwise).
Codec parse_codec(const std::string& text, const std::string& what);

class ParquetWriter {
 public:
  ParquetWriter(const std::string& path, ParquetWriterOptions options);
  ~ParquetWriter();  // finishes the file if close() was not called (errors logged)
  ParquetWriter(const ParquetWriter&) = delete;
  ParquetWriter& operator=(const ParquetWriter&) = delete;

  // One row: its labels, dense values, per slot its key count and the keys of all slots in
  // order (keys.size() == sum of nnz). A plain (one-hot) slot takes exactly one key.
  void write(std::span<const float> label, std::span<const float> dense,
             std::span<const std::int32_t> nnz, std::span<const std::int64_t> keys);
  // Writes the last row group and the footer.
  void close();
  std::int64_t rows() const { return rows_; }
  const std::string& path() const { return file_.path(); }

 private:
  struct Column {
    std::vector<float> floats;
    std::vector<std::int64_t> ints;
    std::vector<std::int32_t> row_entries;  // list columns: keys per row
  };
  void flush_row_group();
  ColumnChunk write_column(std::size_t c, const Column& column, std::int64_t rows);
  void write_page(std::vector<std::byte>& raw, std::int32_t num_values, Encoding encoding,
                  ColumnMetaData& meta);
  void write_dictionary_page(const std::vector<std::int64_t>& dictionary, ColumnMetaData& meta);
  void append_ints(std::vector<std::byte>& out, const std::int64_t* values, std::size_t n) const;

  ParquetWriterOptions options_;
  OutputFile file_;
  FileMetaData footer_;
  std::vector<Column> columns_;  // labels, dense, slots
  std::int64_t group_rows_ = 0;
  std::int64_t rows_ = 0;
  bool closed_ = false;
  std::vector<std::byte> page_, compressed_, header_;
  std::vector<std::int64_t> dictionary_;
  std::vector<std::uint32_t> indices_;
};

// HugeCTR's layout for a folder of written files: `folder/_metadata.json` (file_stats of
// `files` with their rows, the columns of `options`) and the file list `list_path` (absolute
// paths). Files must lie in `folder`.
struct WrittenFile {
  std::string path;
  std::int64_t rows = 0;
};
void write_parquet_layout(const std::string& folder, const std::string& list_path,
                          const std::vector<WrittenFile>& files,
                          const ParquetWriterOptions& options);

}  // namespace ember::data::parquet
