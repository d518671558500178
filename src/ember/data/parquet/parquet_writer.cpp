#include "ember/data/parquet/parquet_writer.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/parquet/compression.hpp"
#include "ember/data/parquet/encoding.hpp"
#include "ember/data/parquet/parquet_file.hpp"

namespace ember::data::parquet {

ParquetWriterOptions ParquetWriterOptions::with_default_names(std::int64_t label_dim,
                                                              std::int64_t dense_dim,
                                                              std::int64_t slots) {
  ParquetWriterOptions o;
  for (std::int64_t i = 0; i < label_dim; ++i) {
    o.label_names.push_back(label_dim == 1 ? "label" : "label" + std::to_string(i));
  }
  for (std::int64_t i = 0; i < dense_dim; ++i)
    o.dense_names.push_back("I" + std::to_string(i + 1));
  for (std::int64_t i = 0; i < slots; ++i)
    o.slot_names.push_back("C" + std::to_string(i + 1));
  return o;
}

HugeCtrMetadata ParquetWriterOptions::metadata_columns() const {
  HugeCtrMetadata m;
  std::int64_t index = 0;
  for (const auto& n : label_names)
    m.labels.push_back({n, index++});
  for (const auto& n : dense_names)
    m.conts.push_back({n, index++});
  for (const auto& n : slot_names)
    m.cats.push_back({n, index++});
  return m;
}

Codec parse_codec(const std::string& text, const std::string& what) {
  if (text == "none" || text == "uncompressed") return Codec::Uncompressed;
  if (text == "snappy") return Codec::Snappy;
  if (text == "zstd") return Codec::Zstd;
  if (text == "gzip") return Codec::Gzip;
  EMBER_THROW_AS(ConfigError, what, ": unknown compression \"", text,
                 "\" (expected none, snappy, zstd or gzip)");
}

namespace {

bool is_list(const ParquetWriterOptions& o, std::size_t slot) {
  return !o.slot_is_list.empty() && o.slot_is_list[slot];
}

template <class T>
void append_raw(std::vector<std::byte>& out, const T* values, std::size_t n) {
  const auto* p = reinterpret_cast<const std::byte*>(values);
  out.insert(out.end(), p, p + n * sizeof(T));
}

void append_u32(std::vector<std::byte>& out, std::uint32_t v) {
  append_raw(out, &v, 1);
}

// A dictionary of at most 2^16 values (512 KiB of INT64, 256 KiB as u32 keys when read).
constexpr std::size_t kMaxDictionary = std::size_t{1} << 16;

}  // namespace

ParquetWriter::ParquetWriter(const std::string& path, ParquetWriterOptions options)
    : options_(std::move(options)), file_(path) {
  const auto& o = options_;
  if (o.row_group_rows < 1 || o.page_rows < 1) {
    EMBER_THROW_AS(ConfigError, "Parquet writer: row_group_rows and page_rows must be positive");
  }
  if (!o.slot_is_list.empty() && o.slot_is_list.size() != o.slot_names.size()) {
    EMBER_THROW_AS(ConfigError, "Parquet writer: slot_is_list has ", o.slot_is_list.size(),
                   " entries for ", o.slot_names.size(), " slots");
  }
  if (o.key_type != PhysicalType::Int64 && o.key_type != PhysicalType::Int32) {
    EMBER_THROW_AS(ConfigError, "Parquet writer: keys are INT64 or INT32, not ",
                   to_string(o.key_type));
  }
  if (!codec_supported(o.codec)) {
    EMBER_THROW_AS(ConfigError, "Parquet writer: ", codec_support_problem(o.codec));
  }
  SchemaElement root;
  root.name = "schema";
  root.num_children =
      static_cast<std::int32_t>(o.label_names.size() + o.dense_names.size() + o.slot_names.size());
  footer_.schema.push_back(root);
  const auto plain = [&](const std::string& name, PhysicalType type) {
    SchemaElement e;
    e.name = name;
    e.type = type;
    e.repetition = Repetition::Required;
    footer_.schema.push_back(e);
  };
  for (const auto& n : o.label_names)
    plain(n, PhysicalType::Float);
  for (const auto& n : o.dense_names)
    plain(n, PhysicalType::Float);
  for (std::size_t s = 0; s < o.slot_names.size(); ++s) {
    if (!is_list(o, s)) {
      plain(o.slot_names[s], o.key_type);
      continue;
    }
    // The standard three-level list: required group (LIST) { repeated group list { element } }.
    SchemaElement group;
    group.name = o.slot_names[s];
    group.repetition = Repetition::Required;
    group.num_children = 1;
    group.converted_type = converted::kList;
    group.logical_kind = SchemaElement::kLogicalList;
    footer_.schema.push_back(group);
    SchemaElement list;
    list.name = "list";
    list.repetition = Repetition::Repeated;
    list.num_children = 1;
    footer_.schema.push_back(list);
    plain("element", o.key_type);
  }
  footer_.created_by = "ember";
  columns_.resize(static_cast<std::size_t>(root.num_children));
  file_.write(kParquetMagic, 4);
}

ParquetWriter::~ParquetWriter() {
  if (closed_) return;
  try {
    close();
  } catch (const std::exception& e) {
    EMBER_LOG_ERROR("Parquet writer '{}': {}", file_.path(), e.what());
  }
}

void ParquetWriter::write(std::span<const float> label, std::span<const float> dense,
                          std::span<const std::int32_t> nnz, std::span<const std::int64_t> keys) {
  const auto& o = options_;
  EMBER_CHECK(label.size() == o.label_names.size() && dense.size() == o.dense_names.size() &&
                  nnz.size() == o.slot_names.size(),
              "Parquet writer: a row of ", label.size(), " labels, ", dense.size(), " dense and ",
              nnz.size(), " slots for columns of ", o.label_names.size(), ", ",
              o.dense_names.size(), " and ", o.slot_names.size());
  std::size_t c = 0;
  for (float v : label)
    columns_[c++].floats.push_back(v);
  for (float v : dense)
    columns_[c++].floats.push_back(v);
  std::size_t at = 0;
  for (std::size_t s = 0; s < nnz.size(); ++s, ++c) {
    const auto n = static_cast<std::size_t>(nnz[s]);
    EMBER_CHECK(nnz[s] >= 0 && at + n <= keys.size(), "Parquet writer: key counts exceed the keys");
    if (!is_list(o, s)) {
      EMBER_CHECK(n == 1, "Parquet writer: one-hot slot '", o.slot_names[s], "' given ", n,
                  " keys");
    } else {
      columns_[c].row_entries.push_back(nnz[s]);
    }
    if (o.key_type == PhysicalType::Int32) {
      for (std::size_t k = at; k < at + n; ++k) {
        if (keys[k] < std::numeric_limits<std::int32_t>::min() ||
            keys[k] > std::numeric_limits<std::int32_t>::max()) {
          EMBER_THROW_AS(DataError, "Parquet writer '", file_.path(), "': key ", keys[k],
                         " of slot '", o.slot_names[s], "' does not fit INT32 key columns");
        }
      }
    }
    columns_[c].ints.insert(columns_[c].ints.end(), keys.begin() + static_cast<std::ptrdiff_t>(at),
                            keys.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  EMBER_CHECK(at == keys.size(), "Parquet writer: ", keys.size(),
              " keys for key counts summing to ", at);
  ++rows_;
  if (++group_rows_ == o.row_group_rows) flush_row_group();
}

void ParquetWriter::append_ints(std::vector<std::byte>& out, const std::int64_t* values,
                                std::size_t n) const {
  if (options_.key_type == PhysicalType::Int64) {
    append_raw(out, values, n);
    return;
  }
  const std::size_t at = out.size();
  out.resize(at + 4 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::int32_t>(values[i]);  // range checked by write()
    std::memcpy(out.data() + at + 4 * i, &v, 4);
  }
}

void ParquetWriter::write_dictionary_page(const std::vector<std::int64_t>& dictionary,
                                          ColumnMetaData& meta) {
  page_.clear();
  append_ints(page_, dictionary.data(), dictionary.size());
  compressed_.clear();
  compress(options_.codec, page_.data(), page_.size(), compressed_);
  PageHeader h;
  h.type = PageType::DictionaryPage;
  h.uncompressed_page_size = static_cast<std::int32_t>(page_.size());
  h.compressed_page_size = static_cast<std::int32_t>(compressed_.size());
  h.dictionary_page =
      DictionaryPageHeader{static_cast<std::int32_t>(dictionary.size()), Encoding::PlainDictionary};
  header_.clear();
  append_page_header(h, header_);
  meta.dictionary_page_offset = static_cast<std::int64_t>(file_.bytes_written());
  file_.write(header_.data(), header_.size());
  file_.write(compressed_.data(), compressed_.size());
  meta.total_compressed_size += static_cast<std::int64_t>(header_.size() + compressed_.size());
  meta.total_uncompressed_size += static_cast<std::int64_t>(header_.size() + page_.size());
}

void ParquetWriter::write_page(std::vector<std::byte>& raw, std::int32_t num_values,
                               Encoding encoding, ColumnMetaData& meta) {
  compressed_.clear();
  compress(options_.codec, raw.data(), raw.size(), compressed_);
  PageHeader h;
  h.type = PageType::DataPage;
  h.uncompressed_page_size = static_cast<std::int32_t>(raw.size());
  h.compressed_page_size = static_cast<std::int32_t>(compressed_.size());
  h.data_page = DataPageHeader{num_values, encoding, Encoding::Rle, Encoding::Rle};
  header_.clear();
  append_page_header(h, header_);
  file_.write(header_.data(), header_.size());
  file_.write(compressed_.data(), compressed_.size());
  meta.total_compressed_size += static_cast<std::int64_t>(header_.size() + compressed_.size());
  meta.total_uncompressed_size += static_cast<std::int64_t>(header_.size() + raw.size());
}

ColumnChunk ParquetWriter::write_column(std::size_t c, const Column& column, std::int64_t rows) {
  const auto& o = options_;
  const std::size_t floats = o.label_names.size() + o.dense_names.size();
  const bool list = c >= floats && is_list(o, c - floats);
  ColumnMetaData meta;
  meta.type = c < floats ? PhysicalType::Float : o.key_type;
  meta.encodings = {Encoding::Plain, Encoding::Rle};
  meta.codec = o.codec;
  meta.data_page_offset = static_cast<std::int64_t>(file_.bytes_written());
  if (c < floats) {
    meta.path_in_schema = {c < o.label_names.size() ? o.label_names[c]
                                                    : o.dense_names[c - o.label_names.size()]};
  } else {
    meta.path_in_schema = {o.slot_names[c - floats]};
    if (list) meta.path_in_schema.insert(meta.path_in_schema.end(), {"list", "element"});
  }
  // Keys: a dictionary when it and the indices take less room than PLAIN values.
  bool dictionary = false;
  int index_width = 0;
  if (c >= floats && o.dictionary && !column.ints.empty() &&
      dictionary_encode(column.ints.data(), column.ints.size(), kMaxDictionary, dictionary_,
                        indices_)) {
    index_width = bit_width_of(dictionary_.size() - 1);
    // Only where values repeat (4 times on average): reading gathers each key from the
    // dictionary, which costs more than a PLAIN value once the dictionary outgrows the caches.
    dictionary = dictionary_.size() * 4 <= column.ints.size();
  }
  if (dictionary) {
    meta.encodings = {Encoding::PlainDictionary, Encoding::Plain, Encoding::Rle};
    write_dictionary_page(dictionary_, meta);
    meta.data_page_offset = static_cast<std::int64_t>(file_.bytes_written());
  }
  const auto append_keys = [&](std::size_t first, std::size_t count) {
    if (!dictionary) {
      append_ints(page_, column.ints.data() + first, count);
      return;
    }
    page_.push_back(static_cast<std::byte>(index_width));
    encode_rle(indices_.data() + first, count, index_width, page_);
  };
  std::size_t key_at = 0;
  std::vector<std::uint32_t> rep, def;
  for (std::int64_t first = 0; first < rows; first += o.page_rows) {
    const std::int64_t n = std::min(o.page_rows, rows - first);
    page_.clear();
    std::int32_t num_values = static_cast<std::int32_t>(n);
    if (c < floats) {
      append_raw(page_, column.floats.data() + first, static_cast<std::size_t>(n));
    } else if (!list) {
      append_keys(static_cast<std::size_t>(first), static_cast<std::size_t>(n));
    } else {
      // One entry per key, or one empty entry (definition 0) for a row without keys.
      rep.clear();
      def.clear();
      std::size_t keys = 0;
      for (std::int64_t r = first; r < first + n; ++r) {
        const std::int32_t k = column.row_entries[static_cast<std::size_t>(r)];
        rep.push_back(0);
        def.push_back(k > 0 ? 1 : 0);
        for (std::int32_t j = 1; j < k; ++j) {
          rep.push_back(1);
          def.push_back(1);
        }
        keys += static_cast<std::size_t>(k);
      }
      for (const auto* levels : {&rep, &def}) {
        const std::size_t at = page_.size();
        append_u32(page_, 0);
        encode_rle(levels->data(), levels->size(), 1, page_);
        const auto length = static_cast<std::uint32_t>(page_.size() - at - 4);
        std::memcpy(page_.data() + at, &length, 4);
      }
      append_keys(key_at, keys);
      key_at += keys;
      num_values = static_cast<std::int32_t>(rep.size());
    }
    meta.num_values += num_values;
    write_page(page_, num_values, dictionary ? Encoding::PlainDictionary : Encoding::Plain, meta);
  }
  ColumnChunk chunk;
  chunk.file_offset = 0;
  chunk.meta_data = std::move(meta);
  return chunk;
}

void ParquetWriter::flush_row_group() {
  if (group_rows_ == 0) return;
  RowGroup group;
  group.num_rows = group_rows_;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    group.columns.push_back(write_column(c, columns_[c], group_rows_));
    group.total_byte_size += group.columns.back().meta_data->total_uncompressed_size;
    columns_[c].floats.clear();
    columns_[c].ints.clear();
    columns_[c].row_entries.clear();
  }
  footer_.row_groups.push_back(std::move(group));
  footer_.num_rows += group_rows_;
  group_rows_ = 0;
}

void ParquetWriter::close() {
  if (closed_) return;
  closed_ = true;
  flush_row_group();
  std::vector<std::byte> footer;
  append_file_metadata(footer_, footer);
  const auto length = static_cast<std::uint32_t>(footer.size());
  file_.write(footer.data(), footer.size());
  file_.write(&length, 4);
  file_.write(kParquetMagic, 4);
  file_.close();
}

void write_parquet_layout(const std::string& folder, const std::string& list_path,
                          const std::vector<WrittenFile>& files,
                          const ParquetWriterOptions& options) {
  namespace fs = std::filesystem;
  HugeCtrMetadata m = options.metadata_columns();
  std::vector<std::string> paths;
  for (const auto& f : files) {
    m.file_stats.push_back({fs::path(f.path).filename().string(), f.rows});
    paths.push_back(fs::absolute(f.path).lexically_normal().string());
  }
  write_hugectr_metadata((fs::path(folder) / "_metadata.json").string(), m);
  write_file_list(list_path, paths);
}

}  // namespace ember::data::parquet
