// Reading Norm data: NormFileReader parses one file at a time straight into batch buffers from a
// read-only mapping of the file (no copy out of the page cache, no per-sample system call or
// allocation); NormSource is a file list as the
// pipeline's DataSource, worker w reading files w, w+W, w+2W, ... as HugeCTR's workers do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/data/data_config.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/mapped_file.hpp"
#include "ember/data/norm_format.hpp"

namespace ember::data {

class NormFileReader {
 public:
  // `layout` gives the configured dims, key type and key budgets; `counters` (optional)
  // receives drops and byte counts.
  NormFileReader(const BatchLayout& layout, CheckMode check, ReadCounters* counters = nullptr);
  ~NormFileReader();
  NormFileReader(const NormFileReader&) = delete;
  NormFileReader& operator=(const NormFileReader&) = delete;

  // Opens `path` and reads its header. Rejects (DataError naming the file and both values) a
  // header whose error_check differs from the configured check, whose slot_num differs from the
  // configured total, or whose label_dim + dense_dim differs from the configured sum.
  void open(const std::string& path);
  void close();
  bool is_open() const { return file_ != nullptr; }
  // All of the file's records have been consumed.
  bool done() const { return record_ >= header_.number_of_records; }

  // Parses samples into `batch` until it is full or the file's records are done; returns the
  // number of samples appended. Samples whose checksum fails are dropped and counted. A file
  // shorter than its header claims, a broken record, or a sample with more keys than the
  // configured budget is a DataError naming the file and the sample index (0-based).
  std::int64_t read(HostBatch& batch);

  const NormHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Index of the next record (sample) in the file.
  std::int64_t record_index() const { return record_; }
  std::int64_t dropped() const { return dropped_; }
  const std::vector<std::int64_t>& dropped_indices() const { return dropped_indices_; }

 private:
  [[noreturn]] void fail_truncated(const char* what) const;
  template <class Key>
  std::int64_t read_typed(HostBatch& batch);
  template <class Key, bool Checked>
  const std::byte* parse_sample(const std::byte* p, const std::byte* end, HostBatch& batch);
  [[noreturn]] void fail_nnz(int input, std::int64_t slot_in_input, std::int64_t nnz,
                             std::int64_t keys_so_far) const;

  BatchLayout layout_;
  CheckMode check_;
  ReadCounters* counters_;
  std::vector<std::int64_t> slot_base_;  // global index of each input's first slot
  std::size_t min_sample_bytes_ = 0;     // label + dense + one nnz per slot
  std::size_t max_sample_bytes_ = 0;     // ... plus every input's key budget

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t pos_ = 0;  // next unparsed byte
  NormHeader header_;
  std::int64_t record_ = 0;

  std::int64_t dropped_ = 0;
  std::vector<std::int64_t> dropped_indices_;  // the first few, for reports
};

// A Norm dataset (a file list) as a pipeline source.
class NormSource final : public DataSource {
 public:
  // Reads and checks the list (every file must exist) and the header of every file, so a
  // mismatching file is reported before any reading starts.
  NormSource(const std::string& file_list, CheckMode check, const BatchLayout& layout);

  const BatchLayout& layout() const override { return layout_; }
  std::string description() const override;
  int max_workers(std::int64_t batch_size) const override {
    return static_cast<int>(list_.files.size());
  }
  std::int64_t num_samples() const override { return num_samples_; }
  std::unique_ptr<ShardReader> open_shard(const ShardSpec& spec) const override;

  const FileList& file_list() const { return list_; }
  CheckMode check() const { return check_; }

 private:
  FileList list_;
  CheckMode check_;
  BatchLayout layout_;
  std::int64_t num_samples_ = 0;
};

// Reads the header of a Norm data file written with `check` (DataError naming the file when the
// file is too short or the header record is broken).
NormHeader read_norm_header(const std::string& path, CheckMode check);

}  // namespace ember::data
