// Apache Thrift's compact protocol, the encoding of Parquet's file metadata and page headers:
// a reader over a byte range that checks every length against what is left (a damaged footer is
// a DataError, never a read past the end or a huge allocation) and a writer for Ember's own files.
//
// Only what Parquet uses: structs of numbered fields, i8/i16/i32/i64 (zigzag varints), doubles,
// binary/strings, lists, sets, maps and booleans; unknown fields are skipped, so metadata written
// by newer writers reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::data::parquet {

// The compact protocol's type codes.
enum class ThriftType : std::uint8_t {
  Stop = 0,
  True = 1,  // a boolean field whose value is true (in a field header), or a boolean element
  False = 2,
  Byte = 3,
  I16 = 4,
  I32 = 5,
  I64 = 6,
  Double = 7,
  Binary = 8,
  List = 9,
  Set = 10,
  Map = 11,
  Struct = 12,
};

struct ThriftField {
  std::int16_t id = 0;
  ThriftType type = ThriftType::Stop;
};

struct ThriftList {
  ThriftType element = ThriftType::Stop;
  std::uint32_t size = 0;
};

class ThriftReader {
 public:
  // `what` names the bytes in messages, e.g. "'x.parquet': footer".
  ThriftReader(const std::byte* data, std::size_t size, std::string what);

  // Inside a struct: the next field's header, false at the struct's end (its stop byte read).
  bool next_field(ThriftField& field);
  // Enters and leaves a nested struct (field ids restart from 0 inside it).
  void begin_struct();
  void end_struct();

  bool read_bool(const ThriftField& field);  // a boolean field: its value is in the header
  std::int8_t read_byte();
  std::int16_t read_i16();
  std::int32_t read_i32();
  std::int64_t read_i64();
  double read_double();
  std::string read_string();
  ThriftList read_list_header();
  // A boolean element of a list.
  bool read_bool_element();

  // Skips a value of `type` (structs and containers included, nesting at most 64 deep).
  void skip(ThriftType type);

  std::size_t position() const { return pos_; }
  const std::string& what() const { return what_; }
  [[noreturn]] void fail(std::string_view problem) const;

 private:
  std::uint64_t read_varint();
  std::int64_t read_zigzag() {
    const std::uint64_t v = read_varint();
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
  }
  void skip_nested(ThriftType type, int depth);
  void need(std::size_t bytes) const;

  const std::byte* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string what_;
  std::vector<std::int16_t> last_ids_;  // per open struct, for field-id deltas
  std::int16_t last_id_ = 0;
};

class ThriftWriter {
 public:
  explicit ThriftWriter(std::vector<std::byte>& out) : out_(out) {}

  // A field header; field ids must increase inside a struct.
  void field(std::int16_t id, ThriftType type);
  void bool_field(std::int16_t id, bool value);
  void begin_struct();  // after field(id, Struct) or a list header of structs
  void end_struct();    // writes the stop byte
  void stop() { out_.push_back(std::byte{0}); }  // the top-level struct's end

  void write_byte(std::int8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void write_i32(std::int32_t v) { write_zigzag(v); }
  void write_i64(std::int64_t v) { write_zigzag(v); }
  void write_string(std::string_view s);
  void write_list_header(ThriftType element, std::uint32_t size);

 private:
  void write_varint(std::uint64_t v);
  void write_zigzag(std::int64_t v) {
    write_varint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
  }
  std::vector<std::byte>& out_;
  std::vector<std::int16_t> last_ids_;
  std::int16_t last_id_ = 0;
};

}  // namespace ember::data::parquet
