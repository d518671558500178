// Reading Norm data: NormFileReader parses one file at a time straight into batch buffers from a
// read-only mapping of the file (no copy out of the page cache, no per-sample system call or
// allocation); NormSource is a file list as the
// pipeline's DataSource, worker w reading files w, w+W, w+2W, ... as HugeCTR's workers do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/data_config.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/mapped_file.hpp"
#include "ember/data/norm_format.hpp"
#include "ember/data/sample_check.hpp"

namespace ember::data {

class NormFileReader {
 public:
  // `layout` gives the configured dims, key type and key budgets; `counters` (optional)
  // receives drops and byte counts; `checks` (optional: tools that show a file as it is leave
  // it out) the label and dense checks and what to do with a sample that fails them.
  NormFileReader(const BatchLayout& layout, CheckMode check, ReadCounters* counters = nullptr,
                 std::optional<SampleChecks> checks = std::nullopt);
  ~NormFileReader();
  NormFileReader(const NormFileReader&) = delete;
  NormFileReader& operator=(const NormFileReader&) = delete;

  // Opens `path` and reads its header. Rejects (DataError naming the file and both values) a
  // header whose error_check differs from the configured check, whose slot_num differs from the
  // configured total, or whose label_dim + dense_dim differs from the configured sum, and a file
  // whose first samples parse with the other key width (I32 / I64) but not with the configured
  // one.
  void open(const std::string& path);
  // Back to the first sample of the open file, as open() of the same file would be, but keeping
  // its mapping: a shard that reads one file over and over (Repeat mode) neither unmaps it (a
  // TLB shootdown on every core of the process) nor faults its pages in again on every pass.
  void rewind();
  void close();
  bool is_open() const { return file_ != nullptr; }
  // All of the file's records have been consumed.
  bool done() const { return record_ >= header_.number_of_records; }

  // Parses samples into `batch` until it is full or the file's records are done; returns the
  // number of samples appended. Samples whose checksum fails are dropped and counted; so are
  // samples that fail the checks under bad_sample_policy "drop" (under "error" they are a
  // DataError naming the file, the sample and the column). A file shorter than its header
  // claims, a broken record, a sample with more keys than the configured budget or, under
  // is_fixed_length, another key count than declared is a DataError naming the file and the
  // sample index (0-based); where the record parses with the other key width or without the
  // budget, the message says that the configuration does not match the data. Bytes after the
  // header's number_of_records samples are ignored with a warning (as Raw's are).
  std::int64_t read(HostBatch& batch);

  // Shared reading (ShardSpec::window): the rows of the batch being filled (its row indices, as
  // read() is called on it) whose samples are parsed. The others are passed over: framed by
  // their record length (Sum) or their key counts (None), their checksum verified and, under
  // bad_sample_policy "drop", their label and dense values checked, so that exactly the same
  // samples are dropped, but their keys not read; their rows get no keys (and, unless checked,
  // no label or dense values). Unset: every row is parsed.
  void set_window(std::optional<Share> window) { window_ = window; }
  // Since the reader was made: samples passed over, and samples dropped (checksum, checks).
  std::int64_t passed_over() const { return passed_over_; }
  std::int64_t dropped_in_all() const { return dropped_in_all_; }
  std::int64_t bad_in_all() const { return bad_in_all_; }

  // Where the reader stands in its file, to come back to (seek) and read again.
  struct Position {
    std::size_t byte = 0;
    std::int64_t record = 0;
    std::int64_t dropped = 0;
    std::int64_t bad = 0;
  };
  Position position() const { return {pos_, record_, dropped_, bad_}; }
  void seek(const Position& at);

  const NormHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Index of the next record (sample) in the file.
  std::int64_t record_index() const { return record_; }
  std::int64_t dropped() const { return dropped_; }
  const std::vector<std::int64_t>& dropped_indices() const { return dropped_indices_; }
  // Samples dropped by bad_sample_policy "drop" in the current file.
  std::int64_t bad_samples() const { return bad_; }

 private:
  [[noreturn]] void fail_truncated(const char* what) const;
  template <class Key>
  std::int64_t read_typed(HostBatch& batch);
  template <class Key, bool Checked>
  const std::byte* parse_sample(const std::byte* p, const std::byte* end, HostBatch& batch);
  // Whether the sample just parsed into row batch.size() goes into the batch (the checks).
  bool accept_sample(const HostBatch& batch);
  // Shared reading: whether row batch.size() is another process's.
  bool passes_over(const HostBatch& batch) const {
    return window_ &&
           (batch.size() < window_->offset || batch.size() >= window_->offset + window_->size);
  }
  // Commits a sample passed over at `sample` (its label and dense values first): keyless, after
  // the checks that could drop it. Returns whether it went into the batch.
  bool pass_over(HostBatch& batch, const std::byte* sample);
  // The end of the sample at p (None mode: walking its key counts), or nullptr for anything a
  // parse would report (the caller then parses it, which reports it).
  template <class Key>
  const std::byte* frame_sample(const std::byte* p, const std::byte* end) const;
  [[noreturn]] void fail_nnz(int input, std::int64_t slot_in_input, std::int64_t nnz,
                             std::int64_t keys_so_far, const std::byte* sample) const;
  [[noreturn]] void fail_fixed(int input, std::int64_t slot_in_input, std::int64_t nnz) const;
  [[noreturn]] void fail_record(const std::byte* payload, std::int64_t length,
                                const std::string& why) const;
  // A well-formed sample over its key budget; `found` says what the reader met first.
  [[noreturn]] void fail_budget(int input, std::int64_t keys, const std::string& found) const;
  // The diagnoses (norm_diagnosis.hpp): throw the key-width mismatch when the evidence says so.
  void check_key_width_at_open() const;
  void check_key_width_of_file(const std::string& symptom) const;
  void check_trailing_bytes() const;
  std::size_t other_key_size() const { return layout_.key_size() == 4 ? 8 : 4; }

  BatchLayout layout_;
  CheckMode check_;
  ReadCounters* counters_;
  std::vector<std::int64_t> slot_base_;  // global index of each input's first slot
  std::size_t min_sample_bytes_ = 0;     // label + dense + one nnz per slot
  std::size_t max_sample_bytes_ = 0;     // ... plus every input's key budget
  std::optional<SampleValidator> validator_;

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t pos_ = 0;         // next unparsed byte
  std::size_t data_begin_ = 0;  // the first sample's byte
  // Where the sample being parsed must end at the latest: its record's end (Sum), the file's.
  const std::byte* sample_limit_ = nullptr;
  NormHeader header_;
  std::int64_t record_ = 0;
  bool end_checked_ = false;

  std::optional<Share> window_;
  std::int64_t passed_over_ = 0;
  std::int64_t dropped_in_all_ = 0;
  std::int64_t bad_in_all_ = 0;

  std::int64_t dropped_ = 0;
  std::int64_t bad_ = 0;
  std::vector<std::int64_t> dropped_indices_;  // the first few, for reports
};

// A Norm dataset (a file list) as a pipeline source.
class NormSource final : public DataSource {
 public:
  // Reads and checks the list (every file must exist) and the header of every file, so a
  // mismatching file is reported before any reading starts. `checks`: what the readers check in
  // every sample (make_data_source passes the Data layer's policy and the loss's labels).
  NormSource(const std::string& file_list, CheckMode check, const BatchLayout& layout,
             SampleChecks checks = {});

  const BatchLayout& layout() const override { return layout_; }
  std::string description() const override;
  int max_workers(std::int64_t batch_size) const override {
    return static_cast<int>(list_.files.size());
  }
  std::int64_t num_samples() const override { return num_samples_; }
  std::unique_ptr<ShardReader> open_shard(const ShardSpec& spec) const override;

  const FileList& file_list() const { return list_; }
  CheckMode check() const { return check_; }
  const SampleChecks& checks() const { return checks_; }

 private:
  FileList list_;
  CheckMode check_;
  BatchLayout layout_;
  SampleChecks checks_;
  std::int64_t num_samples_ = 0;
};

// Reads the header of a Norm data file written with `check` (DataError naming the file when the
// file is too short or the header record is broken).
NormHeader read_norm_header(const std::string& path, CheckMode check);

}  // namespace ember::data
