// What the input pipeline reads from, whatever the format: a DataSource describes a dataset and
// opens one ShardReader per reader worker. Norm, Raw and Parquet implement it; the pipeline does
// not need to know which one it drives.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/data/batch.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/sample_check.hpp"

namespace ember::data {

// Counters shared by the readers of one pipeline (or one tool run).
class ReadCounters {
 public:
  std::atomic<std::int64_t> samples{0};  // samples parsed and delivered
  // Samples passed over for another process to parse (shared reading): in the batches, keyless.
  std::atomic<std::int64_t> skipped{0};
  std::atomic<std::int64_t> dropped{0};  // samples dropped by a checksum mismatch
  std::atomic<std::int64_t> bad{0};      // samples dropped by bad_sample_policy "drop"
  std::atomic<std::int64_t> bytes{0};    // bytes of the samples parsed

  // Records a dropped sample; the first few are kept (and logged) with their file and index.
  void record_drop(const std::string& file, std::int64_t sample_index);
  // Records a sample dropped for a bad value; the first few are logged with the problem.
  void record_bad(const std::string& file, std::int64_t sample_index, const std::string& problem);
  struct Drop {
    std::string file;
    std::int64_t sample_index;
  };
  std::vector<Drop> first_drops() const;
  static constexpr std::size_t kKeptDrops = 16;

 private:
  mutable std::mutex mutex_;
  std::vector<Drop> drops_;
};

class ShardReader {
 public:
  virtual ~ShardReader() = default;
  // Appends samples to `batch` (empty on entry) until it is full or the reader reaches a
  // boundary: the end of its shard, or (Raw) the end of a chunk. Returns the number appended;
  // 0 only when the shard is exhausted; when repeating, only when it holds no samples at all.
  virtual std::int64_t fill(HostBatch& batch) = 0;
  // Back to the start of the shard, for the next epoch.
  virtual void restart() = 0;
};

struct ShardSpec {
  int worker = 0;
  int num_workers = 1;
  bool repeat = false;          // wrap around the shard forever
  std::int64_t batch_size = 1;  // the pipeline's batch size (Raw reads batch-size chunks)
  ReadCounters* counters = nullptr;
  // Shared reading (key_exchange.hpp): of every full batch, only rows [window->offset,
  // window->offset + window->size) are this process's to parse. A reader may pass over the
  // others (add_rows_parsed_elsewhere), as long as the batch holds the same samples as it would
  // otherwise (samples that a check would drop are still dropped). A batch that ends short (the
  // end of a shard) must be read whole: the collector merges it with others at rows the reader
  // cannot know. Readers that cannot pass over samples cheaply read every row. Unset: every row.
  std::optional<Share> window;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual const BatchLayout& layout() const = 0;
  // For messages and logs, e.g. "Norm file list 'train.txt' (4 files)".
  virtual std::string description() const = 0;
  // The most workers that can usefully share the source (Norm: files; Raw: chunks).
  virtual int max_workers(std::int64_t batch_size) const = 0;
  // Total samples when cheaply known, else -1.
  virtual std::int64_t num_samples() const { return -1; }
  virtual std::unique_ptr<ShardReader> open_shard(const ShardSpec& spec) const = 0;
};

enum class DataSplit { Train, Eval };

// What the user of a source knows that the Data layer does not.
struct DataSourceOptions {
  // The labels the model's loss takes (the training layer sets it from the loss type); unset:
  // any finite label. Every sample's label and dense values are checked, and a bad sample is
  // handled as the Data layer's bad_sample_policy says.
  std::optional<LabelRange> labels;
};

// The source a Data layer describes: Norm or Parquet file list, or Raw file (training or
// evaluation side). Raw training chunks are shuffled with `seed`. Parquet reads the file list
// with the `_metadata.json` of each file's folder, keys offset by slot_size_array when given.
std::shared_ptr<DataSource> make_data_source(const DataConfig& config, DType key_type,
                                             DataSplit split, std::uint64_t seed = 0,
                                             const DataSourceOptions& options = {});

}  // namespace ember::data
