#include "ember/data/parquet/parquet_metadata.hpp"

#include "ember/data/parquet/thrift_compact.hpp"

namespace ember::data::parquet {

std::string_view to_string(PhysicalType type) {
  switch (type) {
    case PhysicalType::Boolean:
      return "BOOLEAN";
    case PhysicalType::Int32:
      return "INT32";
    case PhysicalType::Int64:
      return "INT64";
    case PhysicalType::Int96:
      return "INT96";
    case PhysicalType::Float:
      return "FLOAT";
    case PhysicalType::Double:
      return "DOUBLE";
    case PhysicalType::ByteArray:
      return "BYTE_ARRAY";
    case PhysicalType::FixedLenByteArray:
      return "FIXED_LEN_BYTE_ARRAY";
  }
  return "unknown type";
}

std::string_view to_string(Codec codec) {
  switch (codec) {
    case Codec::Uncompressed:
      return "UNCOMPRESSED";
    case Codec::Snappy:
      return "SNAPPY";
    case Codec::Gzip:
      return "GZIP";
    case Codec::Lzo:
      return "LZO";
    case Codec::Brotli:
      return "BROTLI";
    case Codec::Lz4:
      return "LZ4";
    case Codec::Zstd:
      return "ZSTD";
    case Codec::Lz4Raw:
      return "LZ4_RAW";
  }
  return "unknown codec";
}

std::string_view to_string(Encoding encoding) {
  switch (encoding) {
    case Encoding::Plain:
      return "PLAIN";
    case Encoding::PlainDictionary:
      return "PLAIN_DICTIONARY";
    case Encoding::Rle:
      return "RLE";
    case Encoding::BitPacked:
      return "BIT_PACKED";
    case Encoding::DeltaBinaryPacked:
      return "DELTA_BINARY_PACKED";
    case Encoding::DeltaLengthByteArray:
      return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::DeltaByteArray:
      return "DELTA_BYTE_ARRAY";
    case Encoding::RleDictionary:
      return "RLE_DICTIONARY";
    case Encoding::ByteStreamSplit:
      return "BYTE_STREAM_SPLIT";
  }
  return "unknown encoding";
}

bool SchemaElement::is_unsigned() const {
  if (logical_kind == kLogicalInteger) return !logical_signed;
  return converted_type &&
         (*converted_type == converted::kUint8 || *converted_type == converted::kUint16 ||
          *converted_type == converted::kUint32 || *converted_type == converted::kUint64);
}

namespace {

// Reads the fields of a struct, calling on_field(field) for each; on_field returns false for
// a field it does not read, which is then skipped.
template <class OnField>
void read_struct(ThriftReader& r, OnField&& on_field) {
  r.begin_struct();
  ThriftField f;
  while (r.next_field(f)) {
    if (!on_field(f)) r.skip(f.type);
  }
  r.end_struct();
}

// Reads a list of `element`, calling read_one() per element (skipping a list of another type).
template <class ReadOne>
void read_list(ThriftReader& r, ThriftType element, ReadOne&& read_one) {
  const ThriftList list = r.read_list_header();
  if (list.element != element) {
    for (std::uint32_t i = 0; i < list.size; ++i)
      r.skip(list.element);
    return;
  }
  for (std::uint32_t i = 0; i < list.size; ++i)
    read_one();
}

template <class Enum>
Enum read_enum(ThriftReader& r) {
  return static_cast<Enum>(r.read_i32());
}

// LogicalType is a union of structs: remember which member, and INTEGER's parameters.
void read_logical_type(ThriftReader& r, SchemaElement& e) {
  read_struct(r, [&](const ThriftField& f) {
    if (f.type != ThriftType::Struct) return false;
    e.logical_kind = f.id;
    if (f.id != SchemaElement::kLogicalInteger) return false;
    read_struct(r, [&](const ThriftField& g) {
      if (g.id == 1 && g.type == ThriftType::Byte) {
        e.logical_bit_width = r.read_byte();
      } else if (g.id == 2 && (g.type == ThriftType::True || g.type == ThriftType::False)) {
        e.logical_signed = r.read_bool(g);
      } else {
        return false;
      }
      return true;
    });
    return true;
  });
}

SchemaElement read_schema_element(ThriftReader& r) {
  SchemaElement e;
  read_struct(r, [&](const ThriftField& f) {
    switch (f.id) {
      case 1:
        e.type = read_enum<PhysicalType>(r);
        return true;
      case 2:
        e.type_length = r.read_i32();
        return true;
      case 3:
        e.repetition = read_enum<Repetition>(r);
        return true;
      case 4:
        e.name = r.read_string();
        return true;
      case 5:
        e.num_children = r.read_i32();
        return true;
      case 6:
        e.converted_type = r.read_i32();
        return true;
      case 10:
        if (f.type != ThriftType::Struct) return false;
        read_logical_type(r, e);
        return true;
      default:
        return false;
    }
  });
  return e;
}

ColumnMetaData read_column_meta(ThriftReader& r) {
  ColumnMetaData m;
  read_struct(r, [&](const ThriftField& f) {
    switch (f.id) {
      case 1:
        m.type = read_enum<PhysicalType>(r);
        return true;
      case 2:
        read_list(r, ThriftType::I32, [&] { m.encodings.push_back(read_enum<Encoding>(r)); });
        return true;
      case 3:
        read_list(r, ThriftType::Binary, [&] { m.path_in_schema.push_back(r.read_string()); });
        return true;
      case 4:
        m.codec = read_enum<Codec>(r);
        return true;
      case 5:
        m.num_values = r.read_i64();
        return true;
      case 6:
        m.total_uncompressed_size = r.read_i64();
        return true;
      case 7:
        m.total_compressed_size = r.read_i64();
        return true;
      case 9:
        m.data_page_offset = r.read_i64();
        return true;
      case 11:
        m.dictionary_page_offset = r.read_i64();
        return true;
      default:
        return false;
    }
  });
  return m;
}

ColumnChunk read_column_chunk(ThriftReader& r) {
  ColumnChunk c;
  read_struct(r, [&](const ThriftField& f) {
    switch (f.id) {
      case 1:
        c.file_path = r.read_string();
        return true;
      case 2:
        c.file_offset = r.read_i64();
        return true;
      case 3:
        if (f.type != ThriftType::Struct) return false;
        c.meta_data = read_column_meta(r);
        return true;
      default:
        return false;
    }
  });
  return c;
}

RowGroup read_row_group(ThriftReader& r) {
  RowGroup g;
  read_struct(r, [&](const ThriftField& f) {
    switch (f.id) {
      case 1:
        read_list(r, ThriftType::Struct, [&] { g.columns.push_back(read_column_chunk(r)); });
        return true;
      case 2:
        g.total_byte_size = r.read_i64();
        return true;
      case 3:
        g.num_rows = r.read_i64();
        return true;
      default:
        return false;
    }
  });
  return g;
}

}  // namespace

FileMetaData parse_file_metadata(const std::byte* data, std::size_t size, const std::string& what) {
  ThriftReader r(data, size, what);
  FileMetaData m;
  bool has_schema = false, has_rows = false, has_groups = false;
  read_struct(r, [&](const ThriftField& f) {
    switch (f.id) {
      case 1:
        m.version = r.read_i32();
        return true;
      case 2:
        has_schema = true;
        read_list(r, ThriftType::Struct, [&] { m.schema.push_back(read_schema_element(r)); });
        return true;
      case 3:
        has_rows = true;
        m.num_rows = r.read_i64();
        return true;
      case 4:
        has_groups = true;
        read_list(r, ThriftType::Struct, [&] { m.row_groups.push_back(read_row_group(r)); });
        return true;
      case 5:
        read_list(r, ThriftType::Struct, [&] {
          KeyValue kv;
          read_struct(r, [&](const ThriftField& g) {
            if (g.id == 1)
              kv.key = r.read_string();
            else if (g.id == 2)
              kv.value = r.read_string();
            else
              return false;
            return true;
          });
          m.key_value_metadata.push_back(std::move(kv));
        });
        return true;
      case 6:
        m.created_by = r.read_string();
        return true;
      default:
        return false;
    }
  });
  if (!has_schema || m.schema.empty()) r.fail("the file metadata has no schema");
  if (!has_rows) r.fail("the file metadata has no num_rows");
  if (!has_groups) r.fail("the file metadata has no row_groups");
  return m;
}

PageHeader parse_page_header(const std::byte* data, std::size_t size, const std::string& what,
                             std::size_t& header_bytes) {
  ThriftReader r(data, size, what);
  PageHeader h;
  bool has_type = false, has_sizes = false;
  read_struct(r, [&](const ThriftField& f) {
    switch (f.id) {
      case 1:
        has_type = true;
        h.type = read_enum<PageType>(r);
        return true;
      case 2:
        h.uncompressed_page_size = r.read_i32();
        return true;
      case 3:
        has_sizes = true;
        h.compressed_page_size = r.read_i32();
        return true;
      case 5:
        if (f.type != ThriftType::Struct) return false;
        h.data_page.emplace();
        read_struct(r, [&](const ThriftField& g) {
          switch (g.id) {
            case 1:
              h.data_page->num_values = r.read_i32();
              return true;
            case 2:
              h.data_page->encoding = read_enum<Encoding>(r);
              return true;
            case 3:
              h.data_page->definition_level_encoding = read_enum<Encoding>(r);
              return true;
            case 4:
              h.data_page->repetition_level_encoding = read_enum<Encoding>(r);
              return true;
            default:
              return false;
          }
        });
        return true;
      case 7:
        if (f.type != ThriftType::Struct) return false;
        h.dictionary_page.emplace();
        read_struct(r, [&](const ThriftField& g) {
          switch (g.id) {
            case 1:
              h.dictionary_page->num_values = r.read_i32();
              return true;
            case 2:
              h.dictionary_page->encoding = read_enum<Encoding>(r);
              return true;
            default:
              return false;
          }
        });
        return true;
      case 8:
        if (f.type != ThriftType::Struct) return false;
        h.data_page_v2.emplace();
        read_struct(r, [&](const ThriftField& g) {
          auto& v = *h.data_page_v2;
          switch (g.id) {
            case 1:
              v.num_values = r.read_i32();
              return true;
            case 2:
              v.num_nulls = r.read_i32();
              return true;
            case 3:
              v.num_rows = r.read_i32();
              return true;
            case 4:
              v.encoding = read_enum<Encoding>(r);
              return true;
            case 5:
              v.definition_levels_byte_length = r.read_i32();
              return true;
            case 6:
              v.repetition_levels_byte_length = r.read_i32();
              return true;
            case 7:
              if (g.type != ThriftType::True && g.type != ThriftType::False) return false;
              v.is_compressed = r.read_bool(g);
              return true;
            default:
              return false;
          }
        });
        return true;
      default:
        return false;
    }
  });
  if (!has_type || !has_sizes) r.fail("a page header without its type or sizes");
  header_bytes = r.position();
  return h;
}

// ---- writing -----------------------------------------------------------------------------------

namespace {

void write_schema_element(ThriftWriter& w, const SchemaElement& e) {
  w.begin_struct();
  if (e.type) {
    w.field(1, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(*e.type));
  }
  if (e.repetition) {
    w.field(3, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(*e.repetition));
  }
  w.field(4, ThriftType::Binary);
  w.write_string(e.name);
  if (e.num_children > 0) {
    w.field(5, ThriftType::I32);
    w.write_i32(e.num_children);
  }
  if (e.converted_type) {
    w.field(6, ThriftType::I32);
    w.write_i32(*e.converted_type);
  }
  if (e.logical_kind != 0) {
    w.field(10, ThriftType::Struct);
    w.begin_struct();
    w.field(e.logical_kind, ThriftType::Struct);
    w.begin_struct();
    if (e.logical_kind == SchemaElement::kLogicalInteger) {
      w.field(1, ThriftType::Byte);
      w.write_byte(e.logical_bit_width);
      w.bool_field(2, e.logical_signed);
    }
    w.end_struct();
    w.end_struct();
  }
  w.end_struct();
}

void write_column_chunk(ThriftWriter& w, const ColumnChunk& c) {
  w.begin_struct();
  w.field(2, ThriftType::I64);
  w.write_i64(c.file_offset);
  if (c.meta_data) {
    const ColumnMetaData& m = *c.meta_data;
    w.field(3, ThriftType::Struct);
    w.begin_struct();
    w.field(1, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(m.type));
    w.field(2, ThriftType::List);
    w.write_list_header(ThriftType::I32, static_cast<std::uint32_t>(m.encodings.size()));
    for (Encoding e : m.encodings)
      w.write_i32(static_cast<std::int32_t>(e));
    w.field(3, ThriftType::List);
    w.write_list_header(ThriftType::Binary, static_cast<std::uint32_t>(m.path_in_schema.size()));
    for (const auto& p : m.path_in_schema)
      w.write_string(p);
    w.field(4, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(m.codec));
    w.field(5, ThriftType::I64);
    w.write_i64(m.num_values);
    w.field(6, ThriftType::I64);
    w.write_i64(m.total_uncompressed_size);
    w.field(7, ThriftType::I64);
    w.write_i64(m.total_compressed_size);
    w.field(9, ThriftType::I64);
    w.write_i64(m.data_page_offset);
    if (m.dictionary_page_offset) {
      w.field(11, ThriftType::I64);
      w.write_i64(*m.dictionary_page_offset);
    }
    w.end_struct();
  }
  w.end_struct();
}

}  // namespace

void append_file_metadata(const FileMetaData& m, std::vector<std::byte>& out) {
  ThriftWriter w(out);
  w.begin_struct();
  w.field(1, ThriftType::I32);
  w.write_i32(m.version);
  w.field(2, ThriftType::List);
  w.write_list_header(ThriftType::Struct, static_cast<std::uint32_t>(m.schema.size()));
  for (const auto& e : m.schema)
    write_schema_element(w, e);
  w.field(3, ThriftType::I64);
  w.write_i64(m.num_rows);
  w.field(4, ThriftType::List);
  w.write_list_header(ThriftType::Struct, static_cast<std::uint32_t>(m.row_groups.size()));
  for (const auto& g : m.row_groups) {
    w.begin_struct();
    w.field(1, ThriftType::List);
    w.write_list_header(ThriftType::Struct, static_cast<std::uint32_t>(g.columns.size()));
    for (const auto& c : g.columns)
      write_column_chunk(w, c);
    w.field(2, ThriftType::I64);
    w.write_i64(g.total_byte_size);
    w.field(3, ThriftType::I64);
    w.write_i64(g.num_rows);
    w.end_struct();
  }
  if (!m.key_value_metadata.empty()) {
    w.field(5, ThriftType::List);
    w.write_list_header(ThriftType::Struct,
                        static_cast<std::uint32_t>(m.key_value_metadata.size()));
    for (const auto& kv : m.key_value_metadata) {
      w.begin_struct();
      w.field(1, ThriftType::Binary);
      w.write_string(kv.key);
      w.field(2, ThriftType::Binary);
      w.write_string(kv.value);
      w.end_struct();
    }
  }
  if (!m.created_by.empty()) {
    w.field(6, ThriftType::Binary);
    w.write_string(m.created_by);
  }
  w.end_struct();
}

void append_page_header(const PageHeader& h, std::vector<std::byte>& out) {
  ThriftWriter w(out);
  w.begin_struct();
  w.field(1, ThriftType::I32);
  w.write_i32(static_cast<std::int32_t>(h.type));
  w.field(2, ThriftType::I32);
  w.write_i32(h.uncompressed_page_size);
  w.field(3, ThriftType::I32);
  w.write_i32(h.compressed_page_size);
  if (h.data_page) {
    w.field(5, ThriftType::Struct);
    w.begin_struct();
    w.field(1, ThriftType::I32);
    w.write_i32(h.data_page->num_values);
    w.field(2, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(h.data_page->encoding));
    w.field(3, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(h.data_page->definition_level_encoding));
    w.field(4, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(h.data_page->repetition_level_encoding));
    w.end_struct();
  }
  if (h.dictionary_page) {
    w.field(7, ThriftType::Struct);
    w.begin_struct();
    w.field(1, ThriftType::I32);
    w.write_i32(h.dictionary_page->num_values);
    w.field(2, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(h.dictionary_page->encoding));
    w.end_struct();
  }
  if (h.data_page_v2) {
    const auto& v = *h.data_page_v2;
    w.field(8, ThriftType::Struct);
    w.begin_struct();
    w.field(1, ThriftType::I32);
    w.write_i32(v.num_values);
    w.field(2, ThriftType::I32);
    w.write_i32(v.num_nulls);
    w.field(3, ThriftType::I32);
    w.write_i32(v.num_rows);
    w.field(4, ThriftType::I32);
    w.write_i32(static_cast<std::int32_t>(v.encoding));
    w.field(5, ThriftType::I32);
    w.write_i32(v.definition_levels_byte_length);
    w.field(6, ThriftType::I32);
    w.write_i32(v.repetition_levels_byte_length);
    w.bool_field(7, v.is_compressed);
    w.end_struct();
  }
  w.end_struct();
}

}  // namespace ember::data::parquet
