// Parquet's file metadata (the footer) and page headers: the parts of parquet.thrift a reader of
// flat and list columns needs, decoded from and encoded to the Thrift compact protocol. Fields
// Ember does not use (statistics, indexes, encryption, bloom filters) are skipped on reading and
// not written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::data::parquet {

enum class PhysicalType : std::int32_t {
  Boolean = 0,
  Int32 = 1,
  Int64 = 2,
  Int96 = 3,
  Float = 4,
  Double = 5,
  ByteArray = 6,
  FixedLenByteArray = 7,
};

enum class Repetition : std::int32_t { Required = 0, Optional = 1, Repeated = 2 };

enum class Codec : std::int32_t {
  Uncompressed = 0,
  Snappy = 1,
  Gzip = 2,
  Lzo = 3,
  Brotli = 4,
  Lz4 = 5,
  Zstd = 6,
  Lz4Raw = 7,
};

enum class Encoding : std::int32_t {
  Plain = 0,
  PlainDictionary = 2,
  Rle = 3,
  BitPacked = 4,
  DeltaBinaryPacked = 5,
  DeltaLengthByteArray = 6,
  DeltaByteArray = 7,
  RleDictionary = 8,
  ByteStreamSplit = 9,
};

enum class PageType : std::int32_t {
  DataPage = 0,
  IndexPage = 1,
  DictionaryPage = 2,
  DataPageV2 = 3
};

// parquet.thrift's ConvertedType values Ember looks at.
namespace converted {
inline constexpr std::int32_t kList = 3;
inline constexpr std::int32_t kUint8 = 11, kUint16 = 12, kUint32 = 13, kUint64 = 14;
inline constexpr std::int32_t kInt8 = 15, kInt16 = 16, kInt32 = 17, kInt64 = 18;
}  // namespace converted

std::string_view to_string(PhysicalType type);
std::string_view to_string(Codec codec);
std::string_view to_string(Encoding encoding);

struct SchemaElement {
  std::optional<PhysicalType> type;  // absent for groups
  std::int32_t type_length = 0;
  std::optional<Repetition> repetition;  // absent for the root
  std::string name;
  std::int32_t num_children = 0;
  std::optional<std::int32_t> converted_type;
  // LogicalType, as far as Ember cares: which union member (0: none), and for INTEGER its width
  // and signedness.
  std::int16_t logical_kind = 0;
  std::int8_t logical_bit_width = 0;
  bool logical_signed = true;

  static constexpr std::int16_t kLogicalString = 1, kLogicalList = 3, kLogicalInteger = 10;
  bool is_list_annotated() const {
    return converted_type == converted::kList || logical_kind == kLogicalList;
  }
  // An integer column whose values are unsigned (UINT_32 / UINT_64 or an unsigned INTEGER).
  bool is_unsigned() const;
};

struct ColumnMetaData {
  PhysicalType type = PhysicalType::Int64;
  std::vector<Encoding> encodings;
  std::vector<std::string> path_in_schema;
  Codec codec = Codec::Uncompressed;
  std::int64_t num_values = 0;
  std::int64_t total_uncompressed_size = 0;
  std::int64_t total_compressed_size = 0;
  std::int64_t data_page_offset = 0;
  std::optional<std::int64_t> dictionary_page_offset;
};

struct ColumnChunk {
  std::string file_path;  // another file holds the data: not supported
  std::int64_t file_offset = 0;
  std::optional<ColumnMetaData> meta_data;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  std::int64_t total_byte_size = 0;
  std::int64_t num_rows = 0;
};

struct KeyValue {
  std::string key, value;
};

struct FileMetaData {
  std::int32_t version = 1;
  std::vector<SchemaElement> schema;  // depth first; schema[0] is the root
  std::int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::vector<KeyValue> key_value_metadata;
  std::string created_by;
};

struct DataPageHeader {
  std::int32_t num_values = 0;
  Encoding encoding = Encoding::Plain;
  Encoding definition_level_encoding = Encoding::Rle;
  Encoding repetition_level_encoding = Encoding::Rle;
};

struct DictionaryPageHeader {
  std::int32_t num_values = 0;
  Encoding encoding = Encoding::Plain;
};

struct DataPageHeaderV2 {
  std::int32_t num_values = 0;
  std::int32_t num_nulls = 0;
  std::int32_t num_rows = 0;
  Encoding encoding = Encoding::Plain;
  std::int32_t definition_levels_byte_length = 0;
  std::int32_t repetition_levels_byte_length = 0;
  bool is_compressed = true;
};

struct PageHeader {
  PageType type = PageType::DataPage;
  std::int32_t uncompressed_page_size = 0;
  std::int32_t compressed_page_size = 0;
  std::optional<DataPageHeader> data_page;
  std::optional<DictionaryPageHeader> dictionary_page;
  std::optional<DataPageHeaderV2> data_page_v2;
};

// Decodes the footer's FileMetaData from [data, data + size); `what` names it in messages
// (DataError on anything malformed).
FileMetaData parse_file_metadata(const std::byte* data, std::size_t size, const std::string& what);
// Decodes a page header at the start of [data, data + size); returns it and sets `header_bytes`.
PageHeader parse_page_header(const std::byte* data, std::size_t size, const std::string& what,
                             std::size_t& header_bytes);

void append_file_metadata(const FileMetaData& metadata, std::vector<std::byte>& out);
void append_page_header(const PageHeader& header, std::vector<std::byte>& out);

}  // namespace ember::data::parquet
