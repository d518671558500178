// HugeCTR's Raw format (../shared/spec/formats.md): one file, no header. A sample is
// label_dim + dense_dim 4-byte values (int32, or float32 with float_label_dense) then one int32
// key per slot. The key used is value + slot_offset[slot], slot_offset being the exclusive prefix
// sum of slot_size_array. Training reads batch-size chunks in shuffled order; evaluation in order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ember/data/data_source.hpp"
#include "ember/data/mapped_file.hpp"
#include "ember/data/output_file.hpp"
#include "ember/data/sample_check.hpp"

namespace ember::data {

struct RawOptions {
  std::string path;
  std::int64_t num_samples = 0;
  bool float_label_dense = false;
  // Vocabulary per slot (empty: keys used as stored, only checked to be non-negative).
  std::vector<std::int64_t> slot_size_array;
  // Training order: batch-size chunks shuffled (seeded); evaluation: in order.
  bool shuffle = false;
  std::uint64_t seed = 0;
  // The label and dense checks and the bad-sample policy (unset: none; `ember inspect` shows a
  // file as it is).
  std::optional<SampleChecks> checks = SampleChecks{};
};

class RawSource final : public DataSource {
 public:
  // Maps the file and checks it against the options: a file shorter than num_samples samples is
  // a DataError naming the file and the first missing sample; a layout that is not one-hot or a
  // slot_size_array of the wrong length is a ConfigError.
  RawSource(const RawOptions& options, const BatchLayout& layout);

  const BatchLayout& layout() const override { return layout_; }
  std::string description() const override;
  int max_workers(std::int64_t batch_size) const override;
  std::int64_t num_samples() const override { return options_.num_samples; }
  std::unique_ptr<ShardReader> open_shard(const ShardSpec& spec) const override;

  std::size_t stride() const { return stride_; }
  // Appends samples [first, first + count) to `batch` (bounds are the caller's business) and
  // returns how many it appended: fewer when the checks drop samples (bad_sample_policy "drop",
  // counted in `counters` when given). A key outside its slot's range is a DataError naming the
  // sample, the slot and the value; so is a sample that fails the checks under "error".
  std::int64_t read_samples(std::int64_t first, std::int64_t count, HostBatch& batch,
                            ReadCounters* counters = nullptr) const;
  // Whether a check can drop samples (bad_sample_policy "drop"): a chunk may then hold fewer.
  bool may_drop() const;
  // The order of the batch-size chunks (chunk c = samples [c * batch_size, ...)).
  std::vector<std::int64_t> chunk_order(std::int64_t batch_size) const;

 private:
  template <class Key>
  std::int64_t read_typed(std::int64_t first, std::int64_t count, HostBatch& batch,
                          ReadCounters* counters) const;
  [[noreturn]] void fail_key(std::int64_t sample, std::int64_t slot, std::int32_t value) const;
  // Whether the sample read into row batch.size() goes into the batch (the checks).
  bool accept_sample(const HostBatch& batch, std::int64_t sample, const std::byte* stored,
                     ReadCounters* counters) const;

  RawOptions options_;
  BatchLayout layout_;
  std::shared_ptr<MappedFile> file_;
  std::size_t stride_ = 0;
  std::vector<std::int64_t> slot_offset_;
  std::optional<SampleValidator> validator_;
};

// Writes a Raw file, in int32 or float32 label/dense mode.
class RawWriter {
 public:
  RawWriter(const std::string& path, std::int64_t label_dim, std::int64_t dense_dim,
            std::int64_t slot_num, bool float_label_dense);
  // float_label_dense files.
  void write(std::span<const float> label, std::span<const float> dense,
             std::span<const std::int32_t> keys);
  // int32 files (the reader turns label v into (float)v and dense v into log(v + 1)).
  void write(std::span<const std::int32_t> label, std::span<const std::int32_t> dense,
             std::span<const std::int32_t> keys);
  void close() { file_.close(); }
  std::int64_t records() const { return records_; }
  const std::string& path() const { return file_.path(); }

 private:
  // Checks the sample against the file's shape and mode, then writes it.
  template <class LabelDense>
  void write_sample(std::span<const LabelDense> label, std::span<const LabelDense> dense,
                    std::span<const std::int32_t> keys);
  std::int64_t label_dim_, dense_dim_, slot_num_;
  bool float_label_dense_;
  OutputFile file_;
  std::int64_t records_ = 0;
};

}  // namespace ember::data
