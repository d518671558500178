#include "ember/data/parquet/thrift_compact.hpp"

#include <cstring>

#include "ember/core/error.hpp"

namespace ember::data::parquet {

namespace {
constexpr int kMaxDepth = 64;
}

ThriftReader::ThriftReader(const std::byte* data, std::size_t size, std::string what)
    : data_(data), size_(size), what_(std::move(what)) {}

void ThriftReader::fail(std::string_view problem) const {
  EMBER_THROW_AS(DataError, what_, ": ", problem, " (Thrift metadata, byte ", pos_, " of ", size_,
                 ")");
}

void ThriftReader::need(std::size_t bytes) const {
  if (bytes > size_ - pos_) fail("ends early");
}

std::uint64_t ThriftReader::read_varint() {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    need(1);
    const auto b = static_cast<std::uint8_t>(data_[pos_++]);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail("a varint longer than 10 bytes");
}

bool ThriftReader::next_field(ThriftField& field) {
  need(1);
  const auto b = static_cast<std::uint8_t>(data_[pos_++]);
  const auto type = static_cast<ThriftType>(b & 0x0f);
  if (type == ThriftType::Stop) return false;
  if ((b & 0x0f) > static_cast<int>(ThriftType::Struct)) fail("an unknown field type");
  const int delta = b >> 4;
  if (delta != 0) {
    field.id = static_cast<std::int16_t>(last_id_ + delta);
  } else {
    field.id = static_cast<std::int16_t>(read_zigzag());
  }
  field.type = type;
  last_id_ = field.id;
  return true;
}

void ThriftReader::begin_struct() {
  if (last_ids_.size() >= kMaxDepth) fail("structs nested too deep");
  last_ids_.push_back(last_id_);
  last_id_ = 0;
}

void ThriftReader::end_struct() {
  last_id_ = last_ids_.empty() ? 0 : last_ids_.back();
  if (!last_ids_.empty()) last_ids_.pop_back();
}

bool ThriftReader::read_bool(const ThriftField& field) {
  if (field.type == ThriftType::True) return true;
  if (field.type == ThriftType::False) return false;
  fail("a boolean field of another type");
}

bool ThriftReader::read_bool_element() {
  need(1);
  return static_cast<std::uint8_t>(data_[pos_++]) == 1;
}

std::int8_t ThriftReader::read_byte() {
  need(1);
  return static_cast<std::int8_t>(data_[pos_++]);
}

std::int16_t ThriftReader::read_i16() {
  return static_cast<std::int16_t>(read_zigzag());
}
std::int32_t ThriftReader::read_i32() {
  return static_cast<std::int32_t>(read_zigzag());
}
std::int64_t ThriftReader::read_i64() {
  return read_zigzag();
}

double ThriftReader::read_double() {
  need(8);
  double v;
  std::memcpy(&v, data_ + pos_, 8);
  pos_ += 8;
  return v;
}

std::string ThriftReader::read_string() {
  const std::uint64_t n = read_varint();
  if (n > size_ - pos_) fail("a string longer than the bytes left");
  std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
  pos_ += static_cast<std::size_t>(n);
  return s;
}

ThriftList ThriftReader::read_list_header() {
  need(1);
  const auto b = static_cast<std::uint8_t>(data_[pos_++]);
  ThriftList list;
  list.element = static_cast<ThriftType>(b & 0x0f);
  std::uint64_t n = b >> 4;
  if (n == 15) n = read_varint();
  // Every element takes at least one byte: a longer list cannot be real.
  if (n > size_ - pos_) fail("a list longer than the bytes left");
  if (list.element == ThriftType::Stop || static_cast<std::uint8_t>(list.element) > 12) {
    fail("a list of an unknown element type");
  }
  list.size = static_cast<std::uint32_t>(n);
  return list;
}

void ThriftReader::skip(ThriftType type) {
  skip_nested(type, 0);
}

void ThriftReader::skip_nested(ThriftType type, int depth) {
  if (depth > kMaxDepth) fail("values nested too deep");
  switch (type) {
    case ThriftType::True:
    case ThriftType::False:
      return;  // a field's boolean lives in its header
    case ThriftType::Byte:
      need(1);
      ++pos_;
      return;
    case ThriftType::I16:
    case ThriftType::I32:
    case ThriftType::I64:
      read_varint();
      return;
    case ThriftType::Double:
      need(8);
      pos_ += 8;
      return;
    case ThriftType::Binary: {
      const std::uint64_t n = read_varint();
      if (n > size_ - pos_) fail("a string longer than the bytes left");
      pos_ += static_cast<std::size_t>(n);
      return;
    }
    case ThriftType::List:
    case ThriftType::Set: {
      const ThriftList list = read_list_header();
      for (std::uint32_t i = 0; i < list.size; ++i) {
        if (list.element == ThriftType::True || list.element == ThriftType::False) {
          read_bool_element();
        } else {
          skip_nested(list.element, depth + 1);
        }
      }
      return;
    }
    case ThriftType::Map: {
      const std::uint64_t n = read_varint();
      if (n == 0) return;
      if (n > size_ - pos_) fail("a map longer than the bytes left");
      need(1);
      const auto kinds = static_cast<std::uint8_t>(data_[pos_++]);
      const auto key = static_cast<ThriftType>(kinds >> 4);
      const auto value = static_cast<ThriftType>(kinds & 0x0f);
      for (std::uint64_t i = 0; i < n; ++i) {
        for (ThriftType t : {key, value}) {
          if (t == ThriftType::True || t == ThriftType::False) {
            read_bool_element();
          } else {
            skip_nested(t, depth + 1);
          }
        }
      }
      return;
    }
    case ThriftType::Struct: {
      begin_struct();
      ThriftField f;
      while (next_field(f))
        skip_nested(f.type, depth + 1);
      end_struct();
      return;
    }
    case ThriftType::Stop:
      break;
  }
  fail("a value of an unknown type");
}

// ---- writer ------------------------------------------------------------------------------------

void ThriftWriter::write_varint(std::uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<std::byte>(v));
}

void ThriftWriter::field(std::int16_t id, ThriftType type) {
  const int delta = id - last_id_;
  if (delta > 0 && delta <= 15) {
    out_.push_back(static_cast<std::byte>((delta << 4) | static_cast<int>(type)));
  } else {
    out_.push_back(static_cast<std::byte>(type));
    write_zigzag(id);
  }
  last_id_ = id;
}

void ThriftWriter::bool_field(std::int16_t id, bool value) {
  field(id, value ? ThriftType::True : ThriftType::False);
}

void ThriftWriter::begin_struct() {
  last_ids_.push_back(last_id_);
  last_id_ = 0;
}

void ThriftWriter::end_struct() {
  out_.push_back(std::byte{0});
  last_id_ = last_ids_.empty() ? 0 : last_ids_.back();
  if (!last_ids_.empty()) last_ids_.pop_back();
}

void ThriftWriter::write_string(std::string_view s) {
  write_varint(s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out_.insert(out_.end(), p, p + s.size());
}

void ThriftWriter::write_list_header(ThriftType element, std::uint32_t size) {
  if (size < 15) {
    out_.push_back(static_cast<std::byte>((size << 4) | static_cast<std::uint32_t>(element)));
  } else {
    out_.push_back(static_cast<std::byte>(0xf0 | static_cast<int>(element)));
    write_varint(size);
  }
}

}  // namespace ember::data::parquet
