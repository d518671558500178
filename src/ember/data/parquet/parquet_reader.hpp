// Reading HugeCTR-layout Parquet into batches: ParquetFileReader decodes one file's row groups,
// column by column, straight into a HostBatch (the pipeline's pinned buffers), in tiles of rows
// so that the rows being filled stay in cache. The file's columns are found by the names its
// folder's `_metadata.json` gives: labels, then conts (dense), then cats (one slot each, in the
// order of the sparse inputs), each group ordered by its `index`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/batch_layout.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/parquet/column_cursor.hpp"
#include "ember/data/parquet/compression.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_file.hpp"
#include "ember/data/sample_check.hpp"

namespace ember::data::parquet {

class ParquetFileReader {
 public:
  // `slot_size_array` (empty, or one entry per slot): each slot's vocabulary; its keys are then
  // checked to lie in [0, size) and offset by the sizes of the slots before it (HugeCTR's
  // slot_size_array rule). Without it keys are used as stored. A vocabulary that does not fit
  // u32 keys is a ConfigError.
  // `checks`: every row's label and dense values are checked (sample_check.hpp); a bad row is
  // a DataError naming the file and the row, or (policy Drop) left out and counted.
  ParquetFileReader(const BatchLayout& layout, std::vector<std::int64_t> slot_size_array,
                    ReadCounters* counters = nullptr,
                    std::optional<SampleChecks> checks = std::nullopt);
  ~ParquetFileReader();
  ParquetFileReader(const ParquetFileReader&) = delete;
  ParquetFileReader& operator=(const ParquetFileReader&) = delete;

  // Opens `path` and binds its columns by the names in `metadata`. A column that is missing or
  // of a type Ember cannot read, counts that differ from the layout (labels vs label_dim, conts
  // vs dense_dim, cats vs slots), a file_stats num_rows that differs from the file's, or one-hot
  // slots beyond an input's key budget are DataErrors naming the file and the column.
  void open(const std::string& path, const HugeCtrMetadata& metadata);
  void close();
  bool is_open() const { return file_ != nullptr; }
  bool done() const { return row_ >= total_rows_; }

  // Decodes rows into `batch` until it is full or the file ends; returns the rows appended.
  std::int64_t read(HostBatch& batch);

  // Shared reading (ShardSpec::window): the rows of the batch being filled (its row indices, as
  // read() is called on it) that are decoded. The others are passed over (ColumnCursor::
  // skip_rows: no value converted, checked or stored, pages of them alone not even
  // decompressed) and go into the batch with room for the keys the exchange brings and no
  // label or dense values (HostBatch::add_rows_parsed_elsewhere). Not with
  // bad_sample_policy "drop" (which rows a check drops cannot be known without reading them).
  // Unset: every row is decoded.
  void set_window(std::optional<Share> window);
  // Since the reader was made: rows passed over, and data pages stepped over undecoded.
  std::int64_t passed_over() const { return passed_over_; }
  std::int64_t pages_stepped_over() const;
  std::int64_t rows_left() const { return total_rows_ - row_; }

  const ParquetFile& file() const { return *file_; }
  std::int64_t row() const { return row_; }  // next row of the file

 private:
  void start_row_group();
  template <class Key>
  void read_tile(HostBatch& batch, std::int64_t n);
  template <class Key>
  void assemble_multi_hot(HostBatch& batch, int input, std::int64_t n);
  // Checks the rows [first, first + n) of `batch` (file rows row_ ...); with policy Drop takes
  // the bad ones out. Returns the rows kept.
  std::int64_t screen_rows(HostBatch& batch, std::int64_t first, std::int64_t n);
  // Rows the next step takes from row batch.size() on (at most `n`): whether they are passed
  // over (shared reading) and how many, up to the window's next edge.
  std::int64_t window_step(const HostBatch& batch, std::int64_t n, bool& pass) const;

  BatchLayout layout_;
  std::vector<std::int64_t> slot_size_array_;
  ReadCounters* counters_;
  std::optional<SampleValidator> validator_;
  std::unique_ptr<HostBatch> screened_;  // the rows of a tile with bad rows (policy Drop)
  std::vector<std::int64_t> slot_base_;  // first global slot of each input
  std::vector<bool> input_one_hot_;      // every slot column of the input is plain

  std::unique_ptr<ParquetFile> file_;
  std::vector<ColumnBinding> bindings_;  // labels, dense, slots
  std::vector<KeyRange> ranges_;         // per slot
  std::vector<ColumnCursor> cursors_;
  Decompressor decompressor_;
  std::int64_t total_rows_ = 0;
  std::int64_t row_ = 0;
  int group_ = -1;
  std::int64_t group_end_ = 0;  // the current row group's end row
  std::optional<Share> window_;
  std::int64_t passed_over_ = 0;

  // Multi-hot scratch, per slot of the input being assembled.
  std::vector<std::vector<std::int32_t>> counts_;
  std::vector<std::vector<std::int64_t>> keys_;
};

// The key range of one slot (see ParquetFileReader): `slot` is its global index.
KeyRange slot_key_range(const std::vector<std::int64_t>& slot_size_array, std::int64_t slot,
                        DType key_type, bool unsigned_column);

}  // namespace ember::data::parquet
