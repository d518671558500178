// A HugeCTR Parquet dataset as a pipeline source: the file list (`_file_list.txt`: a count, then
// paths) and a `_metadata.json` in each data file's folder. Worker w reads files w, w+W, ... (as
// for Norm), each through its own ParquetFileReader. Under shared reading (ShardSpec::window) a
// batch that the worker's remaining files fill is decoded only in the window's rows; one they
// cannot fill, and every batch under bad_sample_policy "drop", is read whole.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/batch_layout.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/sample_check.hpp"

namespace ember::data::parquet {

class ParquetSource final : public DataSource {
 public:
  // Reads the list and every folder's metadata, and opens every file's footer, so a missing
  // column, a wrong type or a num_rows that disagrees is reported before any reading starts.
  // `checks`: as for ParquetFileReader (every reader of the source applies them).
  ParquetSource(const std::string& file_list, const BatchLayout& layout,
                std::vector<std::int64_t> slot_size_array,
                std::optional<SampleChecks> checks = std::nullopt);

  const BatchLayout& layout() const override { return layout_; }
  std::string description() const override;
  int max_workers(std::int64_t) const override { return static_cast<int>(files_.size()); }
  std::int64_t num_samples() const override { return num_samples_; }
  std::unique_ptr<ShardReader> open_shard(const ShardSpec& spec) const override;

  struct File {
    std::string path;
    std::shared_ptr<const HugeCtrMetadata> metadata;
    std::int64_t rows = 0;
  };
  const std::vector<File>& files() const { return files_; }
  const std::vector<std::int64_t>& slot_size_array() const { return slot_size_array_; }
  const std::optional<SampleChecks>& checks() const { return checks_; }

 private:
  FileList list_;
  BatchLayout layout_;
  std::vector<std::int64_t> slot_size_array_;
  std::optional<SampleChecks> checks_;
  std::vector<File> files_;
  std::int64_t num_samples_ = 0;
};

// The metadata of every folder the files of a list live in, read once each.
std::vector<ParquetSource::File> resolve_parquet_files(const FileList& list);

}  // namespace ember::data::parquet
