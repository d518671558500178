#include "ember/data/parquet/parquet_file.hpp"

#include <cstring>
#include <fstream>

#include "ember/core/error.hpp"

namespace ember::data::parquet {

bool has_parquet_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  return in.gcount() == 4 && std::memcmp(head, kParquetMagic, 4) == 0;
}

ParquetFile::ParquetFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const std::byte* d = file_->data();
  const std::size_t size = file_->size();
  if (size < 12) {
    EMBER_THROW_AS(DataError, "Parquet file '", path, "' is ", size,
                   " bytes, too short for a Parquet file (truncated?)");
  }
  if (std::memcmp(d, kParquetMagic, 4) != 0) {
    EMBER_THROW_AS(DataError, "'", path, "' is not a Parquet file (it does not start with PAR1)");
  }
  if (std::memcmp(d + size - 4, kParquetMagic, 4) != 0) {
    EMBER_THROW_AS(DataError, "Parquet file '", path,
                   "' does not end with PAR1: its footer is missing (truncated file?)");
  }
  std::uint32_t footer = 0;
  std::memcpy(&footer, d + size - 8, 4);
  if (footer == 0 || footer > size - 12) {
    EMBER_THROW_AS(DataError, "Parquet file '", path, "': footer length ", footer,
                   " does not fit the file's ", size, " bytes (truncated or corrupt footer)");
  }
  data_end_ = size - 8 - footer;
  metadata_ = parse_file_metadata(d + data_end_, footer, cat("Parquet file '", path, "': footer"));
  schema_ = build_schema(metadata_, cat("Parquet file '", path, "'"));
  check_row_groups();
}

void ParquetFile::check_row_groups() const {
  const std::string& path = file_->path();
  std::int64_t rows = 0;
  for (std::size_t g = 0; g < metadata_.row_groups.size(); ++g) {
    const RowGroup& group = metadata_.row_groups[g];
    if (group.num_rows < 0) {
      EMBER_THROW_AS(DataError, "Parquet file '", path, "': row group ", g, " has ", group.num_rows,
                     " rows");
    }
    if (group.columns.size() != schema_.leaves.size()) {
      EMBER_THROW_AS(DataError, "Parquet file '", path, "': row group ", g, " has ",
                     group.columns.size(), " column chunks but the schema has ",
                     schema_.leaves.size(), " columns");
    }
    for (std::size_t c = 0; c < group.columns.size(); ++c) {
      const ColumnChunk& chunk = group.columns[c];
      const LeafColumn& leaf = schema_.leaves[c];
      if (!chunk.file_path.empty()) {
        EMBER_THROW_AS(DataError, "Parquet file '", path, "': column '", leaf.path.back(),
                       "' of row group ", g, " lives in another file ('", chunk.file_path,
                       "'), which Ember does not follow");
      }
      if (!chunk.meta_data) {
        EMBER_THROW_AS(DataError, "Parquet file '", path, "': column '", leaf.path.back(),
                       "' of row group ", g, " has no metadata (encrypted file?)");
      }
      if (chunk.meta_data->type != leaf.type) {
        EMBER_THROW_AS(DataError, "Parquet file '", path, "': column '", leaf.path.back(),
                       "' of row group ", g, " is ", to_string(chunk.meta_data->type),
                       " but the schema says ", to_string(leaf.type));
      }
      if (leaf.max_repetition == 0 && chunk.meta_data->num_values != group.num_rows) {
        EMBER_THROW_AS(DataError, "Parquet file '", path, "': column '", leaf.path.back(),
                       "' of row group ", g, " holds ", chunk.meta_data->num_values,
                       " values but the row group claims ", group.num_rows, " rows");
      }
    }
    rows += group.num_rows;
  }
  if (rows != metadata_.num_rows) {
    EMBER_THROW_AS(DataError, "Parquet file '", path, "': its footer claims ", metadata_.num_rows,
                   " rows but its row groups hold ", rows);
  }
}

}  // namespace ember::data::parquet
