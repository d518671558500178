// One Parquet file, memory-mapped: the "PAR1" magic at both ends, the footer's file metadata and
// the schema built from it. Row groups are read through the mapping (ColumnCursor); nothing is
// copied out of the page cache unless a page is compressed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ember/data/mapped_file.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"
#include "ember/data/parquet/parquet_schema.hpp"

namespace ember::data::parquet {

inline constexpr char kParquetMagic[4] = {'P', 'A', 'R', '1'};

class ParquetFile {
 public:
  // Maps the file and decodes its footer. A file that is too short, lacks the magic, has a
  // footer length outside the file, or a malformed footer or schema is a DataError naming it.
  // The row groups are checked too: every column chunk present and inside the file's data, the
  // row counts adding up to the footer's num_rows.
  explicit ParquetFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const FileMetaData& metadata() const { return metadata_; }
  const ParquetSchema& schema() const { return schema_; }
  const std::byte* data() const { return file_->data(); }
  // Where the footer starts: column chunks lie before it.
  std::size_t data_end() const { return data_end_; }
  std::int64_t num_rows() const { return metadata_.num_rows; }
  void advise_sequential() const { file_->advise_sequential(); }

 private:
  void check_row_groups() const;

  std::unique_ptr<MappedFile> file_;
  FileMetaData metadata_;
  ParquetSchema schema_;
  std::size_t data_end_ = 0;
};

// True when `path` starts with Parquet's magic (for telling a Parquet file from other data).
bool has_parquet_magic(const std::string& path);

}  // namespace ember::data::parquet
