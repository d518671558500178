// Reads one column chunk of one row group, page by page, straight into caller buffers: labels
// and dense features as float (from FLOAT, DOUBLE, INT32 or INT64 columns), slot keys as u32 or
// i64 with the slot's offset added (from INT64 or INT32 columns, signed or unsigned), list
// columns as per-row key counts plus keys. Pages are data pages v1 and v2, PLAIN, dictionary
// (PLAIN_DICTIONARY / RLE_DICTIONARY), DELTA_BINARY_PACKED or BYTE_STREAM_SPLIT encoded,
// compressed or not; uncompressed pages are decoded in place from the file mapping.
//
// Any null (a definition level below the maximum), a key outside its range, or a chunk whose
// pages hold fewer or more values than the row group's rows is a DataError naming the file, the
// column and the row (0-based, counted over the whole file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/data/parquet/compression.hpp"
#include "ember/data/parquet/encoding.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"
#include "ember/data/parquet/parquet_schema.hpp"

namespace ember::data::parquet {

// What a slot's raw values may be and what is added to them: with a vocabulary size, raw values
// must lie in [0, size); without, in [0, 2^32) for u32 keys or any int64 for i64 keys.
struct KeyRange {
  std::int64_t offset = 0;
  std::int64_t min = 0;
  std::int64_t max = 0;    // inclusive
  std::string vocabulary;  // for messages: "slot_size_array[3] = 100" or "u32 keys"
};

enum class ColumnRole { Float, Key };

struct ColumnBinding {
  std::string file;  // for messages
  std::string name;
  const LeafColumn* leaf = nullptr;
  FieldShape shape = FieldShape::Plain;
  std::int16_t empty_list_definition = 0;
  ColumnRole role = ColumnRole::Float;
  bool is_unsigned = false;
};

class ColumnCursor {
 public:
  ColumnCursor() = default;
  ColumnCursor(const ColumnCursor&) = delete;
  ColumnCursor& operator=(const ColumnCursor&) = delete;
  ColumnCursor(ColumnCursor&&) = default;
  ColumnCursor& operator=(ColumnCursor&&) = default;

  // Starts on the column's chunk of a row group of `rows` rows whose first row is `first_row`
  // of the file. `file` is the whole mapped file; the chunk must lie in [0, data_end).
  void start(const ColumnBinding& binding, const std::byte* file, std::size_t data_end,
             const ColumnMetaData& meta, std::int64_t rows, std::int64_t first_row,
             Decompressor& decompressor);

  // Plain columns: the next n rows' values to dst[0], dst[stride], ...
  void read_floats(float* dst, std::ptrdiff_t stride, std::int64_t n);
  template <class Key>
  void read_keys(Key* dst, std::ptrdiff_t stride, std::int64_t n, const KeyRange& range);
  // List columns (plain ones too, as lists of one): the next n rows' key counts to counts[0..n)
  // and their keys (offset added) appended to keys. For list columns, counts == nullptr passes
  // over the n rows instead (no keys checked or stored).
  void read_key_lists(std::int64_t n, std::int32_t* counts, std::vector<std::int64_t>& keys,
                      const KeyRange& range);

  // Shared reading: passes over the next n rows without converting, checking or storing their
  // values. The rows are only counted here and passed over by the next read (or finish()), so
  // that consecutive skips (the end of one batch, the start of the next) make one. A data page of
  // a flat column that holds only rows passed over is then stepped over by its header, neither
  // decompressed nor decoded; within a page that is opened, PLAIN values are passed by moving a
  // pointer, dictionary indices and definition levels by moving the run decoder (a compressed
  // page that holds any row read is decompressed whole). List columns walk their levels (and
  // still find nulls). Keys out of range, bad dictionary indices and nulls in flat columns in
  // these rows are left to the process that reads them.
  void skip_rows(std::int64_t n) { pending_skip_ += n; }
  // Data pages stepped over unopened since the cursor was made.
  std::int64_t pages_stepped_over() const { return pages_stepped_over_; }

  [[noreturn]] void fail_key(std::int64_t row, std::int64_t value, const KeyRange& range) const;

  // After the row group's last row: the chunk must hold no further values.
  void finish();

  std::int64_t row() const { return row_; }

 private:
  enum class Values { Plain, Dictionary };

  // A data page's parts, found by open_v1 / open_v2 (levels and values in the file mapping or
  // in a decompression buffer).
  struct DataPage {
    std::int64_t count = 0;  // values, nulls included (levels, for lists)
    Encoding encoding = Encoding::Plain;
    const std::byte* rep = nullptr;
    const std::byte* def = nullptr;
    const std::byte* values = nullptr;
    std::size_t rep_size = 0, def_size = 0, values_size = 0;
  };
  // Opens the next data page, loading a dictionary page on the way; false at the chunk's end.
  // Data pages of a flat column that hold no more than `skippable` rows (their value count, one
  // level entry per row) are stepped over unopened, their rows added to `passed`.
  bool next_page(std::int64_t skippable, std::int64_t& passed);
  bool next_page() {
    std::int64_t passed = 0;
    return next_page(0, passed);
  }
  // Passes over the rows skip_rows() counted.
  void settle_skip();
  void skip_values(std::int64_t n);
  DataPage open_v1(const PageHeader& header, const std::byte* body);
  DataPage open_v2(const PageHeader& header, const std::byte* body);
  void load_dictionary(const PageHeader& header, const std::byte* body);
  void set_values(Encoding encoding, const std::byte* data, std::size_t size, std::int64_t count);
  const std::byte* page_bytes(const PageHeader& header, const std::byte* body,
                              std::size_t compressed, std::size_t uncompressed,
                              std::vector<std::byte>& buffer);
  void check_no_nulls(std::int64_t n);
  // The next n dictionary indices of the page to idx, each checked to lie in the dictionary.
  void next_indices(std::uint32_t* idx, std::size_t n, std::size_t dict_size);
  void decode_raw_ints(std::int64_t* out, std::size_t n);
  template <class Key>
  const Key* keyed_dictionary(const KeyRange& range);
  template <class Key>
  bool read_keys_fast(Key* dst, std::ptrdiff_t stride, std::int64_t m, const KeyRange& range);
  void decode_floats(float* out, std::ptrdiff_t stride, std::size_t n);
  void load_list_page_levels(std::int64_t count, const std::byte* rep, std::size_t rep_size,
                             const std::byte* def, std::size_t def_size);
  [[noreturn]] void fail_null(std::int64_t row) const;
  [[noreturn]] void fail_short() const;
  [[noreturn]] void fail(const std::string& problem) const;
  std::string where() const;

  const ColumnBinding* binding_ = nullptr;
  const std::byte* file_ = nullptr;
  const std::byte* pos_ = nullptr;  // next page header
  const std::byte* end_ = nullptr;  // the chunk's end
  Decompressor* decompressor_ = nullptr;
  Codec codec_ = Codec::Uncompressed;
  PhysicalType type_ = PhysicalType::Int64;
  std::int16_t max_def_ = 0, max_rep_ = 0;
  std::int64_t rows_ = 0, first_row_ = 0, row_ = 0;  // row_: next row, over the file
  int page_index_ = 0;
  bool data_seen_ = false;
  std::int64_t pending_skip_ = 0;  // rows to pass over before the next read
  std::int64_t pages_stepped_over_ = 0;

  // The current data page.
  std::int64_t page_left_ = 0;  // entries (levels) not yet consumed
  RleDecoder def_;
  Values values_ = Values::Plain;
  const std::byte* plain_ = nullptr;  // PLAIN values not yet consumed
  std::size_t plain_left_ = 0;        // bytes of them
  RleDecoder indices_;

  // List pages: levels decoded whole, values on demand.
  std::vector<std::uint8_t> rep_levels_, def_levels_;
  std::size_t level_at_ = 0;
  bool row_open_ = false;

  std::vector<std::int64_t> list_values_;  // the page's present values, raw
  std::size_t list_values_count_ = 0;
  std::size_t list_value_at_ = 0;

  bool has_dictionary_ = false;
  std::vector<std::int64_t> dict_ints_;  // Key columns: raw values
  std::vector<float> dict_floats_;       // Float columns: converted
  // Key columns: the dictionary as final keys (offset added) for one range, when every entry
  // lies in it; rebuilt when the dictionary or the range changes.
  std::vector<std::uint32_t> dict_u32_;
  std::vector<std::int64_t> dict_i64_;
  std::uint64_t dictionary_generation_ = 0, keyed_generation_ = ~std::uint64_t{0};
  std::int64_t keyed_min_ = 0, keyed_max_ = 0, keyed_offset_ = 0;
  bool keyed_u32_ = false, keyed_valid_ = false;
  std::vector<std::byte> page_buffer_, value_buffer_, value_buffer_for_v2_;
  std::vector<std::int64_t> decoded_ints_;
  std::vector<std::uint32_t> index_scratch_;
  std::vector<std::int64_t> raw_scratch_;
  std::string what_;  // "'file': column 'C1', page 3" for the decoders' messages
};

}  // namespace ember::data::parquet
