#include "ember/data/parquet/column_cursor.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ember/core/error.hpp"
#include "ember/data/parquet/column_cursor_detail.hpp"
#include "ember/data/parquet/snappy_decoder.hpp"

namespace ember::data::parquet {

namespace {
using detail::load;
using detail::value_width;
}  // namespace

std::string ColumnCursor::where() const {
  return cat("Parquet file '", binding_->file, "': column '", binding_->name, "'");
}

void ColumnCursor::fail(const std::string& problem) const {
  EMBER_THROW_AS(DataError, where(), ": ", problem);
}

void ColumnCursor::fail_null(std::int64_t row) const {
  EMBER_THROW_AS(DataError, where(), ": row ", row,
                 " is null; HugeCTR's Parquet data has no nulls (fill them when preprocessing)");
}

void ColumnCursor::fail_short() const {
  EMBER_THROW_AS(DataError, where(), ": its pages end after row ", row_,
                 " but the row group of rows ", first_row_, " to ", first_row_ + rows_ - 1,
                 " claims ", rows_, " rows (the metadata's num_rows does not match the data)");
}

void ColumnCursor::fail_key(std::int64_t row, std::int64_t value, const KeyRange& range) const {
  if (binding_->is_unsigned && value < 0) {
    EMBER_THROW_AS(DataError, where(), ": row ", row, " holds ", static_cast<std::uint64_t>(value),
                   ", outside ", range.vocabulary, " (", range.min, " to ", range.max, ")");
  }
  EMBER_THROW_AS(DataError, where(), ": row ", row, " holds key ", value, ", outside ",
                 range.vocabulary, " (", range.min, " to ", range.max, ")");
}

void ColumnCursor::start(const ColumnBinding& binding, const std::byte* file, std::size_t data_end,
                         const ColumnMetaData& meta, std::int64_t rows, std::int64_t first_row,
                         Decompressor& decompressor) {
  binding_ = &binding;
  file_ = file;
  decompressor_ = &decompressor;
  codec_ = meta.codec;
  type_ = binding.leaf->type;
  max_def_ = binding.leaf->max_definition;
  max_rep_ = binding.leaf->max_repetition;
  rows_ = rows;
  first_row_ = first_row;
  row_ = first_row;
  page_index_ = 0;
  data_seen_ = false;
  pending_skip_ = 0;
  page_left_ = 0;
  level_at_ = 0;
  rep_levels_.clear();
  def_levels_.clear();
  row_open_ = false;
  dict_ints_.clear();
  dict_floats_.clear();
  has_dictionary_ = false;
  what_ = where();
  if (!codec_readable(codec_)) fail(codec_support_problem(codec_, false));
  std::int64_t begin = meta.data_page_offset;
  if (meta.dictionary_page_offset && *meta.dictionary_page_offset > 0 &&
      *meta.dictionary_page_offset < begin) {
    begin = *meta.dictionary_page_offset;
  }
  const std::int64_t size = meta.total_compressed_size;
  if (begin < 4 || size < 0 || static_cast<std::uint64_t>(begin) > data_end ||
      static_cast<std::uint64_t>(size) > data_end - static_cast<std::uint64_t>(begin)) {
    fail(cat("its column chunk (", size, " bytes at byte ", begin,
             ") lies outside the file's data (", data_end, " bytes before the footer)"));
  }
  pos_ = file + begin;
  end_ = pos_ + size;
}

const std::byte* ColumnCursor::page_bytes(const PageHeader& header, const std::byte* body,
                                          std::size_t compressed, std::size_t uncompressed,
                                          std::vector<std::byte>& buffer) {
  if (codec_ == Codec::Uncompressed) {
    if (compressed != uncompressed) {
      fail(cat("page ", page_index_, " is uncompressed but its sizes differ (", compressed, " and ",
               uncompressed, " bytes)"));
    }
    return body;  // decoded in place from the mapping
  }
  (void)header;
  if (codec_ == Codec::Snappy) {
    if (const std::byte* in_place = snappy_single_literal(body, compressed, uncompressed)) {
      return in_place;  // a page snappy could not compress: read where it lies
    }
  }
  Decompressor::check_size(codec_, body, compressed, uncompressed,
                           cat(what_, ", page ", page_index_));
  if (buffer.size() < uncompressed) buffer.resize(uncompressed);
  decompressor_->decompress(codec_, body, compressed, buffer.data(), uncompressed,
                            cat(what_, ", page ", page_index_));
  return buffer.data();
}

void ColumnCursor::load_dictionary(const PageHeader& h, const std::byte* body) {
  if (data_seen_ || has_dictionary_) {
    fail(cat("page ", page_index_, " is a second dictionary page, or one after data pages"));
  }
  const auto& d = *h.dictionary_page;
  if (d.encoding != Encoding::Plain && d.encoding != Encoding::PlainDictionary) {
    fail(cat("its dictionary page is ", to_string(d.encoding), "-encoded (PLAIN expected)"));
  }
  const std::size_t width = value_width(type_);
  const auto count = static_cast<std::size_t>(std::max(0, d.num_values));
  const auto size = static_cast<std::size_t>(h.uncompressed_page_size);
  if (count * width > size) {
    fail(cat("its dictionary page holds ", size, " bytes, too few for ", count, " values"));
  }
  const std::byte* p =
      page_bytes(h, body, static_cast<std::size_t>(h.compressed_page_size), size, page_buffer_);
  // The dictionary is converted once to what the batch stores: floats, or raw integer keys.
  if (binding_->role == ColumnRole::Float) {
    dict_floats_.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::byte* v = p + i * width;
      switch (type_) {
        case PhysicalType::Float:
          dict_floats_[i] = load<float>(v);
          break;
        case PhysicalType::Double:
          dict_floats_[i] = static_cast<float>(load<double>(v));
          break;
        case PhysicalType::Int32:
          dict_floats_[i] = binding_->is_unsigned ? static_cast<float>(load<std::uint32_t>(v))
                                                  : static_cast<float>(load<std::int32_t>(v));
          break;
        default:
          dict_floats_[i] = binding_->is_unsigned ? static_cast<float>(load<std::uint64_t>(v))
                                                  : static_cast<float>(load<std::int64_t>(v));
      }
    }
  } else {
    dict_ints_.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::byte* v = p + i * width;
      if (type_ == PhysicalType::Int32) {
        dict_ints_[i] = binding_->is_unsigned ? load<std::uint32_t>(v) : load<std::int32_t>(v);
      } else {
        dict_ints_[i] = load<std::int64_t>(v);
      }
    }
  }
  has_dictionary_ = true;
  ++dictionary_generation_;
}

void ColumnCursor::set_values(Encoding encoding, const std::byte* data, std::size_t size,
                              std::int64_t count) {
  const std::size_t width = value_width(type_);
  switch (encoding) {
    case Encoding::Plain:
      values_ = Values::Plain;
      plain_ = data;
      plain_left_ = size;
      return;
    case Encoding::PlainDictionary:
    case Encoding::RleDictionary: {
      if (!has_dictionary_) {
        fail(cat("page ", page_index_, " is dictionary-encoded but the chunk has no dictionary"));
      }
      values_ = Values::Dictionary;
      if (size == 0) {
        if (count > 0) fail(cat("page ", page_index_, " has no dictionary indices"));
        indices_.reset(data, 0, 0, &what_);
        return;
      }
      indices_.reset(data + 1, size - 1, static_cast<int>(static_cast<std::uint8_t>(data[0])),
                     &what_);
      return;
    }
    case Encoding::DeltaBinaryPacked: {
      if (type_ != PhysicalType::Int32 && type_ != PhysicalType::Int64) break;
      decode_delta_binary_packed(data, size, static_cast<std::size_t>(count),
                                 type_ == PhysicalType::Int32, decoded_ints_,
                                 cat(what_, ", page ", page_index_));
      value_buffer_.resize(decoded_ints_.size() * width);
      for (std::size_t i = 0; i < decoded_ints_.size(); ++i) {
        if (width == 4) {
          const auto v = static_cast<std::int32_t>(decoded_ints_[i]);
          std::memcpy(value_buffer_.data() + 4 * i, &v, 4);
        } else {
          std::memcpy(value_buffer_.data() + 8 * i, &decoded_ints_[i], 8);
        }
      }
      values_ = Values::Plain;
      plain_ = value_buffer_.data();
      plain_left_ = value_buffer_.size();
      return;
    }
    case Encoding::ByteStreamSplit: {
      const auto n = static_cast<std::size_t>(count);
      if (n * width > size) {
        fail(cat("page ", page_index_, " holds ", size, " bytes, too few for ", n, " values"));
      }
      decode_byte_stream_split(data, n, static_cast<int>(width), value_buffer_);
      values_ = Values::Plain;
      plain_ = value_buffer_.data();
      plain_left_ = value_buffer_.size();
      return;
    }
    default:
      break;
  }
  fail(cat("page ", page_index_, " is ", to_string(encoding),
           "-encoded, which Ember does not read ", "for ", to_string(type_),
           " (PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, ",
           "DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT are read)"));
}

void ColumnCursor::load_list_page_levels(std::int64_t count, const std::byte* rep,
                                         std::size_t rep_size, const std::byte* def,
                                         std::size_t def_size) {
  const auto n = static_cast<std::size_t>(count);
  index_scratch_.resize(n);
  rep_levels_.resize(n);
  def_levels_.resize(n);
  RleDecoder d;
  d.reset(rep, rep_size, bit_width_of(static_cast<std::uint64_t>(max_rep_)), &what_);
  if (d.get(index_scratch_.data(), n) != n)
    fail(cat("page ", page_index_, ": repetition levels end early"));
  for (std::size_t i = 0; i < n; ++i) {
    if (index_scratch_[i] > static_cast<std::uint32_t>(max_rep_))
      fail(cat("page ", page_index_, ": a repetition level above the maximum"));
    rep_levels_[i] = static_cast<std::uint8_t>(index_scratch_[i]);
  }
  d.reset(def, def_size, bit_width_of(static_cast<std::uint64_t>(max_def_)), &what_);
  if (d.get(index_scratch_.data(), n) != n)
    fail(cat("page ", page_index_, ": definition levels end early"));
  list_values_count_ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (index_scratch_[i] > static_cast<std::uint32_t>(max_def_))
      fail(cat("page ", page_index_, ": a definition level above the maximum"));
    def_levels_[i] = static_cast<std::uint8_t>(index_scratch_[i]);
    list_values_count_ += def_levels_[i] == max_def_;
  }
  level_at_ = 0;
}

// A data page v1, decompressed whole: [repetition levels][definition levels][values], each
// level stream prefixed by its byte length (RLE; the BIT_PACKED level encoding is long gone).
ColumnCursor::DataPage ColumnCursor::open_v1(const PageHeader& h, const std::byte* body) {
  const DataPageHeader& v1 = *h.data_page;
  DataPage page;
  page.count = v1.num_values;
  page.encoding = v1.encoding;
  const auto uncompressed = static_cast<std::size_t>(h.uncompressed_page_size);
  const std::byte* p = page_bytes(h, body, static_cast<std::size_t>(h.compressed_page_size),
                                  uncompressed, page_buffer_);
  const std::byte* e = p + uncompressed;
  const auto take_levels = [&](Encoding level_encoding, const std::byte*& at, std::size_t& n,
                               const char* which) {
    if (level_encoding != Encoding::Rle) {
      fail(cat("page ", page_index_, ": ", which, " levels are ", to_string(level_encoding),
               "-encoded (RLE expected)"));
    }
    if (e - p < 4) fail(cat("page ", page_index_, ": its ", which, " levels are cut off"));
    const auto length = load<std::uint32_t>(p);
    if (length > static_cast<std::size_t>(e - p - 4)) {
      fail(cat("page ", page_index_, ": its ", which, " levels run past the page"));
    }
    at = p + 4;
    n = length;
    p += 4 + length;
  };
  if (max_rep_ > 0)
    take_levels(v1.repetition_level_encoding, page.rep, page.rep_size, "repetition");
  if (max_def_ > 0)
    take_levels(v1.definition_level_encoding, page.def, page.def_size, "definition");
  page.values = p;
  page.values_size = static_cast<std::size_t>(e - p);
  return page;
}

// A data page v2: levels first and never compressed, then the values, compressed unless the
// header says otherwise.
ColumnCursor::DataPage ColumnCursor::open_v2(const PageHeader& h, const std::byte* body) {
  const DataPageHeaderV2& v2 = *h.data_page_v2;
  DataPage page;
  page.count = v2.num_values;
  page.encoding = v2.encoding;
  const auto compressed = static_cast<std::size_t>(h.compressed_page_size);
  const auto uncompressed = static_cast<std::size_t>(h.uncompressed_page_size);
  const auto rl = static_cast<std::int64_t>(v2.repetition_levels_byte_length);
  const auto dl = static_cast<std::int64_t>(v2.definition_levels_byte_length);
  if (rl < 0 || dl < 0 || rl + dl > static_cast<std::int64_t>(std::min(compressed, uncompressed))) {
    fail(cat("page ", page_index_, " has level lengths outside the page"));
  }
  page.rep = body;
  page.rep_size = static_cast<std::size_t>(rl);
  page.def = body + rl;
  page.def_size = static_cast<std::size_t>(dl);
  const std::byte* v = body + rl + dl;
  const std::size_t vc = compressed - static_cast<std::size_t>(rl + dl);
  const std::size_t vu = uncompressed - static_cast<std::size_t>(rl + dl);
  const std::byte* in_place = nullptr;
  if (v2.is_compressed && codec_ == Codec::Snappy) in_place = snappy_single_literal(v, vc, vu);
  if (in_place != nullptr) {
    page.values = in_place;
  } else if (v2.is_compressed && codec_ != Codec::Uncompressed) {
    Decompressor::check_size(codec_, v, vc, vu, cat(what_, ", page ", page_index_));
    if (value_buffer_for_v2_.size() < vu) value_buffer_for_v2_.resize(vu);
    decompressor_->decompress(codec_, v, vc, value_buffer_for_v2_.data(), vu,
                              cat(what_, ", page ", page_index_));
    page.values = value_buffer_for_v2_.data();
  } else {
    if (vc != vu) fail(cat("page ", page_index_, " is uncompressed but its sizes differ"));
    page.values = v;
  }
  page.values_size = vu;
  return page;
}

bool ColumnCursor::next_page(std::int64_t skippable, std::int64_t& passed) {
  while (pos_ < end_) {
    std::size_t header_bytes = 0;
    const PageHeader h = parse_page_header(pos_, static_cast<std::size_t>(end_ - pos_),
                                           cat(what_, ", page ", page_index_), header_bytes);
    if (h.compressed_page_size < 0 || h.uncompressed_page_size < 0) {
      fail(cat("page ", page_index_, " has a negative size"));
    }
    const std::byte* body = pos_ + header_bytes;
    const auto compressed = static_cast<std::size_t>(h.compressed_page_size);
    const auto uncompressed = static_cast<std::size_t>(h.uncompressed_page_size);
    if (compressed > static_cast<std::size_t>(end_ - body)) {
      fail(cat("page ", page_index_, " (", compressed, " bytes) runs past the end of its chunk"));
    }
    pos_ = body + compressed;
    // Shared reading: a flat column's data page of rows that are all passed over is stepped
    // over by its header (one level entry, so one value count, per row).
    if (max_rep_ == 0 && skippable > passed) {
      std::int64_t rows = -1;
      if (h.type == PageType::DataPage && h.data_page) rows = h.data_page->num_values;
      if (h.type == PageType::DataPageV2 && h.data_page_v2) rows = h.data_page_v2->num_values;
      if (rows >= 0 && rows <= skippable - passed) {
        passed += rows;
        data_seen_ = true;
        ++page_index_;
        ++pages_stepped_over_;
        continue;
      }
    }
    DataPage page;
    if (h.type == PageType::DictionaryPage && h.dictionary_page) {
      load_dictionary(h, body);
      ++page_index_;
      continue;
    } else if (h.type == PageType::DataPage && h.data_page) {
      page = open_v1(h, body);
    } else if (h.type == PageType::DataPageV2 && h.data_page_v2) {
      page = open_v2(h, body);
    } else if (h.type == PageType::IndexPage) {
      ++page_index_;
      continue;
    } else {
      fail(cat("page ", page_index_, " is of type ", static_cast<int>(h.type),
               " without its header, or of an unknown type"));
    }
    const std::int64_t count = page.count;
    if (count < 0) fail(cat("page ", page_index_, " has a negative value count"));
    // Levels are decoded whole for list pages: a count no page of this size could hold is a
    // damaged header, not a reason to allocate gigabytes.
    if (count > (std::int64_t{1} << 20) && count / 64 > static_cast<std::int64_t>(uncompressed)) {
      fail(cat("page ", page_index_, " claims ", count, " values in ", uncompressed, " bytes"));
    }
    data_seen_ = true;
    ++page_index_;
    if (count == 0) continue;
    std::int64_t non_null = count;
    if (binding_->shape == FieldShape::List) {
      load_list_page_levels(count, page.rep, page.rep_size, page.def, page.def_size);
      non_null = static_cast<std::int64_t>(list_values_count_);
    } else if (max_def_ > 0) {
      def_.reset(page.def, page.def_size, bit_width_of(static_cast<std::uint64_t>(max_def_)),
                 &what_);
    }
    set_values(page.encoding, page.values, page.values_size, non_null);
    if (binding_->shape == FieldShape::List) {
      list_values_.resize(list_values_count_);
      decode_raw_ints(list_values_.data(), list_values_count_);
      list_value_at_ = 0;
    }
    page_left_ = count;
    return true;
  }
  return false;
}

void ColumnCursor::finish() {
  settle_skip();
  if (page_left_ > 0 || next_page()) {
    EMBER_THROW_AS(DataError, where(), ": the row group of rows ", first_row_, " to ",
                   first_row_ + rows_ - 1, " claims ", rows_,
                   " rows but the column holds more values (the metadata's num_rows does not "
                   "match the data)");
  }
}

}  // namespace ember::data::parquet
