#include "ember/data/parquet/parquet_reader.hpp"

#include <algorithm>
#include <limits>

#include "ember/core/error.hpp"

namespace ember::data::parquet {

namespace {

// Rows decoded per column before moving to the next column: the batch rows being written
// (label, dense, offsets and keys of 512 DLRM samples, about 190 KB) stay in L2 while every
// column stores into them, one value per row at the row's stride. Measured on the DLRM shape:
// 512 rows beat 2048 by 5 to 8 % and 128 by about as much (more calls per value).
constexpr std::int64_t kTileRows = 512;

std::string column_list(const ParquetSchema& schema) {
  std::string out;
  for (std::size_t i = 0; i < schema.fields.size(); ++i) {
    if (i == 8) {
      out += cat(", ... (", schema.fields.size(), " in all)");
      break;
    }
    if (i > 0) out += ", ";
    out += schema.fields[i].name;
  }
  return out;
}

ColumnBinding bind_column(const ParquetFile& file, const MetadataColumn& column, const char* group,
                          ColumnRole role, const std::string& metadata_path) {
  const TopLevelField* field = file.schema().find(column.col_name);
  if (field == nullptr) {
    EMBER_THROW_AS(DataError, "Parquet file '", file.path(), "' has no column '", column.col_name,
                   "' (named in \"", group, "\" of '", metadata_path,
                   "'); its columns: ", column_list(file.schema()));
  }
  const auto wrong = [&](const char* expected) {
    EMBER_THROW_AS(DataError, "Parquet file '", file.path(), "': column '", column.col_name,
                   "' (\"", group, "\") is ", describe(file.schema(), *field), "; ", expected);
  };
  ColumnBinding b;
  b.file = file.path();
  b.name = column.col_name;
  b.role = role;
  b.shape = field->shape;
  b.empty_list_definition = field->empty_list_definition;
  if (field->shape == FieldShape::Unsupported) {
    wrong(role == ColumnRole::Float
              ? "label and dense columns must be FLOAT, DOUBLE, INT32 or INT64"
              : "slot columns must be INT64 or INT32, or lists of them (multi-hot)");
  }
  b.leaf = &file.schema().leaves[static_cast<std::size_t>(field->leaf)];
  b.is_unsigned = b.leaf->element->is_unsigned();
  const PhysicalType t = b.leaf->type;
  const bool is_string = b.leaf->element->logical_kind == SchemaElement::kLogicalString;
  if (role == ColumnRole::Float) {
    if (field->shape != FieldShape::Plain ||
        !(t == PhysicalType::Float || t == PhysicalType::Double || t == PhysicalType::Int32 ||
          t == PhysicalType::Int64)) {
      wrong("label and dense columns must be FLOAT, DOUBLE, INT32 or INT64");
    }
  } else if (is_string || !(t == PhysicalType::Int32 || t == PhysicalType::Int64)) {
    wrong("slot columns must be INT64 or INT32, or lists of them (multi-hot)");
  }
  if (b.leaf->max_definition > 255) wrong("its nesting is deeper than Ember reads");
  return b;
}

}  // namespace

KeyRange slot_key_range(const std::vector<std::int64_t>& slot_size_array, std::int64_t slot,
                        DType key_type, bool unsigned_column) {
  KeyRange r;
  if (!slot_size_array.empty()) {
    const auto s = static_cast<std::size_t>(slot);
    for (std::size_t j = 0; j < s; ++j)
      r.offset += slot_size_array[j];
    r.min = 0;
    r.max = slot_size_array[s] - 1;
    r.vocabulary = cat("slot_size_array[", slot, "] = ", slot_size_array[s]);
  } else if (key_type == DType::U32) {
    r.min = 0;
    r.max = std::numeric_limits<std::uint32_t>::max();
    r.vocabulary = "u32 (I32) keys";
  } else {
    r.min = unsigned_column ? 0 : std::numeric_limits<std::int64_t>::min();
    r.max = std::numeric_limits<std::int64_t>::max();
    r.vocabulary = "i64 keys";
  }
  return r;
}

ParquetFileReader::ParquetFileReader(const BatchLayout& layout,
                                     std::vector<std::int64_t> slot_size_array,
                                     ReadCounters* counters, std::optional<SampleChecks> checks)
    : layout_(layout), slot_size_array_(std::move(slot_size_array)), counters_(counters) {
  if (checks) validator_.emplace(std::move(*checks), layout_.label_dim, layout_.dense_dim);
  layout_.validate("Parquet reader");
  std::int64_t base = 0;
  for (const auto& s : layout_.sparse) {
    slot_base_.push_back(base);
    base += s.slot_num;
  }
  if (!slot_size_array_.empty()) {
    if (static_cast<std::int64_t>(slot_size_array_.size()) != base) {
      EMBER_THROW_AS(ConfigError, "Parquet reader: slot_size_array has ", slot_size_array_.size(),
                     " entries but the sparse inputs have ", base, " slots");
    }
    std::int64_t total = 0;
    for (std::size_t i = 0; i < slot_size_array_.size(); ++i) {
      if (slot_size_array_[i] < 1) {
        EMBER_THROW_AS(ConfigError, "Parquet reader: slot_size_array[", i, "] is ",
                       slot_size_array_[i], "; every slot needs a vocabulary of at least 1");
      }
      if (slot_size_array_[i] > std::numeric_limits<std::int64_t>::max() - total) {
        EMBER_THROW_AS(ConfigError, "Parquet reader: slot_size_array sums past 2^63");
      }
      total += slot_size_array_[i];
    }
    if (layout_.key_type == DType::U32 &&
        total > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) + 1) {
      EMBER_THROW_AS(ConfigError, "Parquet reader: slot_size_array sums to ", total,
                     " keys, more than u32 (I32) keys hold; use input_key_type I64");
    }
  }
}

ParquetFileReader::~ParquetFileReader() = default;

void ParquetFileReader::close() {
  // The cursors stay, unused until start() points them at the next file: their page buffers and
  // scratch are reused instead of being allocated (and faulted in) again for every file.
  bindings_.clear();
  file_.reset();
  total_rows_ = row_ = 0;
  group_ = -1;
  group_end_ = 0;
}

void ParquetFileReader::open(const std::string& path, const HugeCtrMetadata& metadata) {
  close();
  const auto count_error = [&](const char* group, std::size_t got, const char* what,
                               std::int64_t want) {
    EMBER_THROW_AS(DataError, "Parquet metadata '", metadata.path, "' lists ", got, " \"", group,
                   "\" columns but the configuration has ", what, " ", want);
  };
  if (static_cast<std::int64_t>(metadata.labels.size()) != layout_.label_dim) {
    count_error("labels", metadata.labels.size(), "label_dim", layout_.label_dim);
  }
  if (static_cast<std::int64_t>(metadata.conts.size()) != layout_.dense_dim) {
    count_error("conts", metadata.conts.size(), "dense_dim", layout_.dense_dim);
  }
  if (static_cast<std::int64_t>(metadata.cats.size()) != layout_.total_slots()) {
    count_error("cats", metadata.cats.size(), "slots in all (slot_num)", layout_.total_slots());
  }
  file_ = std::make_unique<ParquetFile>(path);
  const std::int64_t listed = metadata.rows_of(path);
  if (listed < 0) {
    EMBER_THROW_AS(DataError, "Parquet metadata '", metadata.path,
                   "' has no file_stats entry for '", path, "'");
  }
  if (listed != file_->num_rows()) {
    EMBER_THROW_AS(DataError, "Parquet file '", path, "' holds ", file_->num_rows(), " rows but '",
                   metadata.path, "' says num_rows ", listed);
  }
  for (const auto& c : metadata.labels) {
    bindings_.push_back(bind_column(*file_, c, "labels", ColumnRole::Float, metadata.path));
  }
  for (const auto& c : metadata.conts) {
    bindings_.push_back(bind_column(*file_, c, "conts", ColumnRole::Float, metadata.path));
  }
  ranges_.clear();
  for (std::size_t s = 0; s < metadata.cats.size(); ++s) {
    bindings_.push_back(
        bind_column(*file_, metadata.cats[s], "cats", ColumnRole::Key, metadata.path));
    ranges_.push_back(slot_key_range(slot_size_array_, static_cast<std::int64_t>(s),
                                     layout_.key_type, bindings_.back().is_unsigned));
  }
  const std::size_t first_slot = static_cast<std::size_t>(layout_.label_dim + layout_.dense_dim);
  input_one_hot_.assign(layout_.sparse.size(), true);
  for (std::size_t i = 0; i < layout_.sparse.size(); ++i) {
    const auto& s = layout_.sparse[i];
    for (std::int64_t k = 0; k < s.slot_num; ++k) {
      const auto& b = bindings_[first_slot + static_cast<std::size_t>(slot_base_[i] + k)];
      if (b.shape == FieldShape::List) input_one_hot_[i] = false;
    }
    if (input_one_hot_[i] && s.slot_num > s.max_feature_num_per_sample) {
      EMBER_THROW_AS(DataError, "Parquet file '", path, "': sparse input ", i, " (\"", s.name,
                     "\") has ", s.slot_num,
                     " one-hot slot columns, more keys than its "
                     "max_feature_num_per_sample ",
                     s.max_feature_num_per_sample);
    }
  }
  cursors_.resize(bindings_.size());
  total_rows_ = file_->num_rows();
  file_->advise_sequential();
}

void ParquetFileReader::start_row_group() {
  const auto& groups = file_->metadata().row_groups;
  std::int64_t bytes = 0;
  do {
    ++group_;
    const RowGroup& g = groups[static_cast<std::size_t>(group_)];
    for (std::size_t c = 0; c < bindings_.size(); ++c) {
      const auto& meta = *g.columns[static_cast<std::size_t>(bindings_[c].leaf->chunk)].meta_data;
      cursors_[c].start(bindings_[c], file_->data(), file_->data_end(), meta, g.num_rows, row_,
                        decompressor_);
      bytes += meta.total_compressed_size;
      // A group of no rows still must hold no values.
      if (g.num_rows == 0) cursors_[c].finish();
    }
    group_end_ = row_ + g.num_rows;
  } while (group_end_ == row_ && group_ + 1 < static_cast<int>(groups.size()));
  if (counters_ != nullptr) counters_->bytes.fetch_add(bytes, std::memory_order_relaxed);
}

template <class Key>
void ParquetFileReader::read_tile(HostBatch& batch, std::int64_t n) {
  const std::int64_t r0 = batch.size();
  const auto ld = layout_.label_dim, dd = layout_.dense_dim;
  std::size_t c = 0;
  for (std::int64_t j = 0; j < ld; ++j)
    cursors_[c++].read_floats(batch.label() + r0 * ld + j, ld, n);
  for (std::int64_t j = 0; j < dd; ++j)
    cursors_[c++].read_floats(batch.dense() + r0 * dd + j, dd, n);
  for (int i = 0; i < batch.num_inputs(); ++i) {
    if (!input_one_hot_[static_cast<std::size_t>(i)]) {
      assemble_multi_hot<Key>(batch, i, n);
      continue;
    }
    const std::int64_t slots = layout_.sparse[static_cast<std::size_t>(i)].slot_num;
    std::int64_t* off = batch.row_offsets(i) + r0 * slots;
    const std::int64_t base = off[0];
    for (std::int64_t k = 1; k <= n * slots; ++k)
      off[k] = base + k;
    Key* values = batch.values_as<Key>(i) + base;
    const std::size_t first = c + static_cast<std::size_t>(slot_base_[static_cast<std::size_t>(i)]);
    for (std::int64_t k = 0; k < slots; ++k) {
      const std::size_t col = first + static_cast<std::size_t>(k);
      cursors_[col].read_keys<Key>(values + k, slots, n, ranges_[col - c]);
    }
  }
}

template <class Key>
void ParquetFileReader::assemble_multi_hot(HostBatch& batch, int input, std::int64_t n) {
  const auto& s = layout_.sparse[static_cast<std::size_t>(input)];
  const auto slots = static_cast<std::size_t>(s.slot_num);
  const std::size_t first_col =
      static_cast<std::size_t>(layout_.label_dim + layout_.dense_dim) +
      static_cast<std::size_t>(slot_base_[static_cast<std::size_t>(input)]);
  const std::size_t first_slot =
      static_cast<std::size_t>(slot_base_[static_cast<std::size_t>(input)]);
  counts_.resize(std::max(counts_.size(), slots));
  keys_.resize(std::max(keys_.size(), slots));
  for (std::size_t k = 0; k < slots; ++k) {
    counts_[k].resize(static_cast<std::size_t>(n));
    keys_[k].clear();
    cursors_[first_col + k].read_key_lists(n, counts_[k].data(), keys_[k], ranges_[first_slot + k]);
  }
  const std::int64_t r0 = batch.size();
  std::int64_t* off = batch.row_offsets(input);
  Key* values = batch.values_as<Key>(input);
  std::vector<std::size_t> at(slots, 0);
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t row = r0 + r;
    const std::int64_t first = off[row * s.slot_num];
    std::int64_t pos = first;
    for (std::size_t k = 0; k < slots; ++k) {
      const std::int32_t c = counts_[k][static_cast<std::size_t>(r)];
      if (pos - first + c > s.max_feature_num_per_sample) {
        EMBER_THROW_AS(DataError, "Parquet file '", file_->path(), "': row ", row_ + r, " has ",
                       pos - first + c, " keys in sparse input ", input, " (\"", s.name,
                       "\") by its slot column '", bindings_[first_col + k].name,
                       "', above its max_feature_num_per_sample ", s.max_feature_num_per_sample);
      }
      const std::int64_t* src = keys_[k].data() + at[k];
      for (std::int32_t j = 0; j < c; ++j)
        values[pos + j] = static_cast<Key>(src[j]);
      at[k] += static_cast<std::size_t>(c);
      pos += c;
      off[row * s.slot_num + static_cast<std::int64_t>(k) + 1] = pos;
    }
  }
}

std::int64_t ParquetFileReader::screen_rows(HostBatch& batch, std::int64_t first, std::int64_t n) {
  const auto ld = layout_.label_dim, dd = layout_.dense_dim;
  std::vector<bool> bad;
  for (std::int64_t r = 0; r < n; ++r) {
    const auto problem =
        validator_->find(batch.label() + (first + r) * ld, batch.dense() + (first + r) * dd);
    if (!problem) [[likely]]
      continue;
    const std::string what = validator_->describe(*problem);
    if (validator_->policy() == BadSamplePolicy::Error) {
      EMBER_THROW_AS(DataError, "Parquet file '", file_->path(), "': row ", row_ + r, ": ", what,
                     " ", bad_sample_hint());
    }
    if (counters_ != nullptr) counters_->record_bad(file_->path(), row_ + r, what);
    if (bad.empty()) bad.resize(static_cast<std::size_t>(n), false);
    bad[static_cast<std::size_t>(r)] = true;
  }
  if (bad.empty()) return n;
  // Move the tile aside and bring back its good runs (a rare path: bad data).
  if (!screened_ || screened_->capacity() < n) screened_ = std::make_unique<HostBatch>(layout_, n);
  screened_->clear();
  screened_->append(batch, first, first + n);
  batch.set_size(first);
  for (std::int64_t r = 0; r < n;) {
    if (bad[static_cast<std::size_t>(r)]) {
      ++r;
      continue;
    }
    std::int64_t end = r;
    while (end < n && !bad[static_cast<std::size_t>(end)])
      ++end;
    batch.append(*screened_, r, end);
    r = end;
  }
  return batch.size() - first;
}

void ParquetFileReader::set_window(std::optional<Share> window) {
  EMBER_CHECK(!window || !validator_ || validator_->policy() != BadSamplePolicy::Drop,
              "ParquetFileReader: shared reading with bad_sample_policy \"drop\"");
  window_ = window;
}

std::int64_t ParquetFileReader::pages_stepped_over() const {
  std::int64_t pages = 0;
  for (const auto& cursor : cursors_)
    pages += cursor.pages_stepped_over();
  return pages;
}

std::int64_t ParquetFileReader::window_step(const HostBatch& batch, std::int64_t n,
                                            bool& pass) const {
  pass = false;
  if (!window_) return std::min(n, kTileRows);
  const std::int64_t r = batch.size(), begin = window_->offset, end = begin + window_->size;
  if (r >= begin && r < end) return std::min({n, kTileRows, end - r});
  // Rows passed over cost no stores: as many as reach the window (or the batch's end) at once.
  pass = true;
  return r < begin ? std::min(n, begin - r) : n;
}

std::int64_t ParquetFileReader::read(HostBatch& batch) {
  EMBER_CHECK(is_open(), "ParquetFileReader::read with no file open");
  EMBER_CHECK(batch.layout().key_type == layout_.key_type, "ParquetFileReader: batch of ",
              dtype_name(batch.layout().key_type), " keys for a reader of ",
              dtype_name(layout_.key_type), " keys");
  const std::int64_t start = batch.size();
  const std::int64_t passed_before = passed_over_;
  while (!batch.full() && row_ < total_rows_) {
    if (row_ == group_end_) start_row_group();
    bool pass = false;
    const std::int64_t n =
        window_step(batch, std::min(batch.capacity() - batch.size(), group_end_ - row_), pass);
    if (pass) {
      for (auto& cursor : cursors_)
        cursor.skip_rows(n);
      batch.add_rows_parsed_elsewhere(n);
      passed_over_ += n;
    } else {
      if (layout_.key_type == DType::U32) {
        read_tile<std::uint32_t>(batch, n);
      } else {
        read_tile<std::int64_t>(batch, n);
      }
      const std::int64_t first = batch.size();
      batch.set_size(first + n);
      if (validator_) screen_rows(batch, first, n);
    }
    row_ += n;
    if (row_ == group_end_) {
      for (auto& cursor : cursors_)
        cursor.finish();
    }
  }
  const std::int64_t added = batch.size() - start;
  if (counters_ != nullptr) {
    const std::int64_t passed = passed_over_ - passed_before;
    counters_->samples.fetch_add(added - passed, std::memory_order_relaxed);
    if (passed > 0) counters_->skipped.fetch_add(passed, std::memory_order_relaxed);
  }
  return added;
}

}  // namespace ember::data::parquet
