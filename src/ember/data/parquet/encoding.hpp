// Parquet's value and level encodings, bounds-checked against the page they come from:
// - the RLE / bit-packed hybrid (definition and repetition levels, dictionary indices),
// - DELTA_BINARY_PACKED (integers) and BYTE_STREAM_SPLIT (floats), decoded into plain values,
// - an RLE / bit-packed encoder for the writer's levels.
// A malformed run is a DataError naming `what` (the file, column and page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::data::parquet {

class RleDecoder {
 public:
  RleDecoder() = default;
  // Values of `bit_width` bits (0 to 32) in [data, data + size).
  void reset(const std::byte* data, std::size_t size, int bit_width, const std::string* what);

  // Decodes up to n values into out; returns how many (fewer only where the data ends).
  std::size_t get(std::uint32_t* out, std::size_t n);
  // Consumes up to n values while they equal `expected`; returns how many did. Less than n means
  // the next value differs (mismatch() is then true) or the data ended.
  std::size_t consume_equal(std::uint32_t expected, std::size_t n);
  // Passes over up to n values without unpacking them (a run's length is in its header, a
  // bit-packed value's place is a multiplication); returns how many (fewer only where the data
  // ends).
  std::size_t skip(std::size_t n);
  bool mismatch() const { return mismatch_; }
  int bit_width() const { return width_; }

 private:
  bool next_run();
  [[noreturn]] void fail(const char* problem) const;

  const std::byte* p_ = nullptr;
  const std::byte* end_ = nullptr;
  int width_ = 0;
  const std::string* what_ = nullptr;
  std::uint32_t rle_left_ = 0;
  std::uint32_t rle_value_ = 0;
  std::uint64_t packed_left_ = 0;      // values left in the current bit-packed run
  const std::byte* packed_ = nullptr;  // its data
  std::size_t packed_bytes_ = 0;
  std::uint64_t packed_bit_ = 0;  // bit position of its next value
  bool mismatch_ = false;
};

// Unpacks n values of `bit_width` bits starting at bit `first_bit` of [data, data + size) (the
// caller has checked that they lie inside).
void unpack_bits(const std::byte* data, std::size_t size, std::uint64_t first_bit, int bit_width,
                 std::uint32_t* out, std::size_t n);

// Decodes a DELTA_BINARY_PACKED stream of `count` values (INT32 when `int32`, else INT64) into
// out (as int64); returns the bytes it used.
std::size_t decode_delta_binary_packed(const std::byte* data, std::size_t size, std::size_t count,
                                       bool int32, std::vector<std::int64_t>& out,
                                       const std::string& what);

// Reassembles BYTE_STREAM_SPLIT values of `width` bytes into plain little-endian values.
void decode_byte_stream_split(const std::byte* data, std::size_t count, int width,
                              std::vector<std::byte>& out);

// Appends the RLE / bit-packed hybrid encoding of values (each below 2^bit_width).
void encode_rle(const std::uint32_t* values, std::size_t n, int bit_width,
                std::vector<std::byte>& out);

// Dictionary encoding: the distinct values in first-seen order and each value's index. False
// (and the outputs unspecified) when there are more than max_entries distinct values.
bool dictionary_encode(const std::int64_t* values, std::size_t n, std::size_t max_entries,
                       std::vector<std::int64_t>& dictionary, std::vector<std::uint32_t>& indices);

// Bits needed for values up to max_value (0 for 0).
int bit_width_of(std::uint64_t max_value);

}  // namespace ember::data::parquet
