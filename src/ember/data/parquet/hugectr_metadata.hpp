// HugeCTR's `_metadata.json`, written by NVTabular beside a folder of Parquet files:
//   {"file_stats": [{"file_name": "0.parquet", "num_rows": 6528076}, ...],
//    "labels": [{"col_name": "label", "index": 0}],
//    "conts":  [{"col_name": "I1", "index": 1}, ...],
//    "cats":   [{"col_name": "C1", "index": 14}, ...]}
// Labels then conts are the label and dense features, cats the slots; HugeCTR orders each group
// by `index` (the column's position in the files), so does Ember. Ember then finds the columns
// by name, so files whose columns come in another order read the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::data::parquet {

struct MetadataColumn {
  std::string col_name;
  std::int64_t index = 0;
};

struct FileStats {
  std::string file_name;
  std::int64_t num_rows = 0;
};

struct HugeCtrMetadata {
  std::string path;  // the _metadata.json it came from
  std::vector<FileStats> file_stats;
  std::vector<MetadataColumn> labels, conts, cats;  // each ordered by index

  // Rows that file_stats gives for a data file (matched by its name without the folder); -1
  // when it is not listed.
  std::int64_t rows_of(const std::string& data_file) const;
};

// `folder/_metadata.json` for a data file in `folder`.
std::string metadata_path_for(const std::string& data_file);

// Reads and checks a metadata file: malformed JSON, a missing or mistyped key, a negative
// num_rows, or two columns of one group with the same index or name is a DataError naming the
// file and the entry.
HugeCtrMetadata read_hugectr_metadata(const std::string& path);

void write_hugectr_metadata(const std::string& path, const HugeCtrMetadata& metadata);

}  // namespace ember::data::parquet
