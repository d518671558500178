#include "ember/data/parquet/encoding.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "ember/core/error.hpp"

namespace ember::data::parquet {

int bit_width_of(std::uint64_t max_value) {
  return max_value == 0 ? 0 : std::bit_width(max_value);
}

namespace {

// Values [i, n) of `bit_width` bits from bit `bit` on, each with its own load, bytes one at a time
// where 8 would run past the data.
void unpack_each(const std::byte* data, std::size_t size, std::uint64_t bit, int bit_width,
                 std::uint32_t* out, std::size_t i, std::size_t n) {
  const std::uint64_t mask = (std::uint64_t{1} << bit_width) - 1;
  for (; i < n; ++i, bit += static_cast<std::uint64_t>(bit_width)) {
    const std::size_t byte = static_cast<std::size_t>(bit >> 3);
    std::uint64_t word = 0;
    if (byte + 8 <= size) {
      std::memcpy(&word, data + byte, 8);
    } else {
      for (std::size_t k = 0; k < 8 && byte + k < size; ++k) {
        word |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data[byte + k])) << (8 * k);
      }
    }
    out[i] = static_cast<std::uint32_t>((word >> (bit & 7)) & mask);
  }
}

// Whole groups of 8 values of W bits (W bytes each): every offset and shift is a constant, so
// the compiler turns a group into 8 loads, shifts and masks. Reads up to 8 bytes past the last
// group (the caller leaves that much room).
template <int W>
void unpack_groups(const std::byte* in, std::uint32_t* out, std::size_t groups) {
  constexpr std::uint64_t mask = (std::uint64_t{1} << W) - 1;
  for (std::size_t g = 0; g < groups; ++g, in += W, out += 8) {
    for (int i = 0; i < 8; ++i) {
      std::uint64_t word;
      std::memcpy(&word, in + (i * W) / 8, 8);
      out[i] = static_cast<std::uint32_t>((word >> ((i * W) % 8)) & mask);
    }
  }
}

template <int... W>
void unpack_groups_of(int bit_width, const std::byte* in, std::uint32_t* out, std::size_t groups,
                      std::integer_sequence<int, W...>) {
  // One instantiation per width 1..32, picked once per call.
  ((bit_width == W + 1 ? unpack_groups<W + 1>(in, out, groups) : void()), ...);
}

}  // namespace

void unpack_bits(const std::byte* data, std::size_t size, std::uint64_t first_bit, int bit_width,
                 std::uint32_t* out, std::size_t n) {
  if (bit_width == 0) {
    std::fill(out, out + n, 0u);
    return;
  }
  const auto width = static_cast<std::uint64_t>(bit_width);
  // Values up to the next group boundary one by one, then whole groups while 8 bytes past them
  // stay inside the data, then the rest one by one.
  const std::uint64_t first = first_bit / width;  // the value's index in its run
  std::size_t head = static_cast<std::size_t>((8 - first % 8) % 8);
  if (first_bit % width != 0) head = n;  // not on a value boundary: no groups
  head = std::min(head, n);
  unpack_each(data, size, first_bit, bit_width, out, 0, head);
  const std::uint64_t group_bit = first_bit + head * width;
  const std::size_t group_byte = static_cast<std::size_t>(group_bit / 8);
  std::size_t groups = (n - head) / 8;
  const std::size_t room = size > group_byte + 8 ? size - group_byte - 8 : 0;
  groups = std::min(groups, room / static_cast<std::size_t>(bit_width));
  if (groups > 0) {
    unpack_groups_of(bit_width, data + group_byte, out + head, groups,
                     std::make_integer_sequence<int, 32>{});
  }
  const std::size_t done = head + groups * 8;
  unpack_each(data, size, first_bit + done * width, bit_width, out, done, n);
}

void RleDecoder::reset(const std::byte* data, std::size_t size, int bit_width,
                       const std::string* what) {
  p_ = data;
  end_ = data + size;
  what_ = what;
  width_ = bit_width;
  rle_left_ = 0;
  packed_left_ = 0;
  mismatch_ = false;
  if (bit_width < 0 || bit_width > 32) fail("a bit width outside 0..32");
}

void RleDecoder::fail(const char* problem) const {
  EMBER_THROW_AS(DataError, what_ != nullptr ? *what_ : std::string("Parquet page"), ": ", problem,
                 " in RLE / bit-packed data");
}

bool RleDecoder::next_run() {
  // Runs of no values are skipped (a loop, not recursion: a damaged page may hold thousands).
  while (p_ < end_) {
    std::uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ >= end_ || shift > 63) fail("a broken run header");
      const auto b = static_cast<std::uint8_t>(*p_++);
      header |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    if (header & 1) {
      const std::uint64_t groups = header >> 1;
      const auto left = static_cast<std::uint64_t>(end_ - p_);
      const auto width = static_cast<std::uint64_t>(width_);
      // groups * width could overflow for a damaged header: compare by division.
      const std::uint64_t bytes = width == 0 || groups <= left / width ? groups * width : left;
      packed_ = p_;
      packed_bytes_ = static_cast<std::size_t>(bytes);
      packed_bit_ = 0;
      // A final run may be cut short by the page's end: only whole values count.
      packed_left_ =
          width == 0 ? groups * 8 : std::min<std::uint64_t>(groups, bytes / width + 1) * 8;
      if (width != 0) packed_left_ = std::min<std::uint64_t>(packed_left_, bytes * 8 / width);
      p_ += bytes;
      if (packed_left_ > 0) return true;
    } else {
      const std::uint64_t count = header >> 1;
      const int value_bytes = (width_ + 7) / 8;
      if (end_ - p_ < value_bytes) fail("a run whose value is cut off");
      std::uint32_t v = 0;
      for (int k = 0; k < value_bytes; ++k) {
        v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(p_[k])) << (8 * k);
      }
      p_ += value_bytes;
      if (count > 0xffffffffu) fail("a run longer than 2^32 values");
      if (width_ < 32 && (v >> width_) != 0) fail("a run value wider than its bit width");
      rle_value_ = v;
      rle_left_ = static_cast<std::uint32_t>(count);
      if (rle_left_ > 0) return true;
    }
  }
  return false;
}

std::size_t RleDecoder::get(std::uint32_t* out, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    if (rle_left_ == 0 && packed_left_ == 0 && !next_run()) break;
    if (rle_left_ > 0) {
      const std::size_t m = std::min<std::size_t>(n - done, rle_left_);
      std::fill(out + done, out + done + m, rle_value_);
      rle_left_ -= static_cast<std::uint32_t>(m);
      done += m;
    } else {
      const std::size_t m =
          static_cast<std::size_t>(std::min<std::uint64_t>(n - done, packed_left_));
      unpack_bits(packed_, packed_bytes_, packed_bit_, width_, out + done, m);
      packed_bit_ += static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(width_);
      packed_left_ -= m;
      done += m;
    }
  }
  return done;
}

std::size_t RleDecoder::skip(std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    if (rle_left_ == 0 && packed_left_ == 0 && !next_run()) break;
    if (rle_left_ > 0) {
      const std::size_t m = std::min<std::size_t>(n - done, rle_left_);
      rle_left_ -= static_cast<std::uint32_t>(m);
      done += m;
    } else {
      const std::size_t m =
          static_cast<std::size_t>(std::min<std::uint64_t>(n - done, packed_left_));
      packed_bit_ += static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(width_);
      packed_left_ -= m;
      done += m;
    }
  }
  return done;
}

std::size_t RleDecoder::consume_equal(std::uint32_t expected, std::size_t n) {
  std::size_t done = 0;
  std::uint32_t buffer[256];
  while (done < n) {
    if (rle_left_ == 0 && packed_left_ == 0 && !next_run()) break;
    if (rle_left_ > 0) {
      if (rle_value_ != expected) {
        mismatch_ = true;
        return done;
      }
      const std::size_t m = std::min<std::size_t>(n - done, rle_left_);
      rle_left_ -= static_cast<std::uint32_t>(m);
      done += m;
    } else {
      const std::size_t m =
          static_cast<std::size_t>(std::min<std::uint64_t>({n - done, packed_left_, 256}));
      unpack_bits(packed_, packed_bytes_, packed_bit_, width_, buffer, m);
      for (std::size_t k = 0; k < m; ++k) {
        if (buffer[k] != expected) {
          // Leave the differing value unconsumed.
          packed_bit_ += static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(width_);
          packed_left_ -= k;
          mismatch_ = true;
          return done + k;
        }
      }
      packed_bit_ += static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(width_);
      packed_left_ -= m;
      done += m;
    }
  }
  return done;
}

namespace {

struct ByteCursor {
  const std::byte* p;
  const std::byte* end;
  const std::string& what;

  [[noreturn]] void fail(const char* problem) const {
    EMBER_THROW_AS(DataError, what, ": ", problem, " in DELTA_BINARY_PACKED data");
  }
  std::uint64_t uleb() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (p >= end || shift > 63) fail("a broken varint");
      const auto b = static_cast<std::uint8_t>(*p++);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
  }
  std::int64_t zigzag() {
    const std::uint64_t v = uleb();
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
  }
};

}  // namespace

std::size_t decode_delta_binary_packed(const std::byte* data, std::size_t size, std::size_t count,
                                       bool int32, std::vector<std::int64_t>& out,
                                       const std::string& what) {
  ByteCursor c{data, data + size, what};
  const std::uint64_t block_size = c.uleb();
  const std::uint64_t miniblocks = c.uleb();
  const std::uint64_t total = c.uleb();
  std::int64_t value = c.zigzag();
  if (block_size == 0 || block_size % 128 != 0 || miniblocks == 0 || block_size % miniblocks != 0 ||
      (block_size / miniblocks) % 32 != 0 || block_size > (1u << 20)) {
    c.fail("a block layout that breaks the encoding's rules");
  }
  if (total < count) c.fail("fewer values than the page holds");
  const std::uint64_t per_mini = block_size / miniblocks;
  out.clear();
  out.reserve(count);
  if (count > 0) out.push_back(value);
  std::vector<std::uint32_t> deltas(static_cast<std::size_t>(per_mini));
  std::vector<std::uint8_t> widths(static_cast<std::size_t>(miniblocks));
  const auto mask = int32 ? std::uint64_t{0xffffffffu} : ~std::uint64_t{0};
  while (out.size() < count) {
    const std::int64_t min_delta = c.zigzag();
    if (static_cast<std::uint64_t>(c.end - c.p) < miniblocks) c.fail("bit widths cut off");
    for (auto& w : widths)
      w = static_cast<std::uint8_t>(*c.p++);
    for (std::uint64_t m = 0; m < miniblocks && out.size() < count; ++m) {
      const int w = widths[static_cast<std::size_t>(m)];
      if (w > (int32 ? 32 : 64)) c.fail("a miniblock bit width above the type's");
      const std::uint64_t bytes = per_mini * static_cast<std::uint64_t>(w) / 8;
      if (static_cast<std::uint64_t>(c.end - c.p) < bytes) c.fail("a miniblock cut off");
      const std::size_t take =
          static_cast<std::size_t>(std::min<std::uint64_t>(per_mini, count - out.size()));
      for (std::size_t k = 0; k < take; ++k) {
        std::uint64_t delta;
        if (w <= 32) {
          std::uint32_t d;
          unpack_bits(c.p, static_cast<std::size_t>(bytes), k * static_cast<std::uint64_t>(w), w,
                      &d, 1);
          delta = d;
        } else {
          std::uint32_t lo, hi;
          unpack_bits(c.p, static_cast<std::size_t>(bytes), k * static_cast<std::uint64_t>(w), 32,
                      &lo, 1);
          unpack_bits(c.p, static_cast<std::size_t>(bytes), k * static_cast<std::uint64_t>(w) + 32,
                      w - 32, &hi, 1);
          delta = lo | (static_cast<std::uint64_t>(hi) << 32);
        }
        // Wrapping arithmetic, as the encoding defines it (in the type's width).
        const std::uint64_t next =
            (static_cast<std::uint64_t>(value) + static_cast<std::uint64_t>(min_delta) + delta) &
            mask;
        value = int32 ? static_cast<std::int64_t>(
                            static_cast<std::int32_t>(static_cast<std::uint32_t>(next)))
                      : static_cast<std::int64_t>(next);
        out.push_back(value);
      }
      c.p += bytes;
    }
  }
  return static_cast<std::size_t>(c.p - data);
}

void decode_byte_stream_split(const std::byte* data, std::size_t count, int width,
                              std::vector<std::byte>& out) {
  out.resize(count * static_cast<std::size_t>(width));
  for (int b = 0; b < width; ++b) {
    const std::byte* stream = data + static_cast<std::size_t>(b) * count;
    for (std::size_t i = 0; i < count; ++i)
      out[i * static_cast<std::size_t>(width) + static_cast<std::size_t>(b)] = stream[i];
  }
}

namespace {

void put_varint(std::uint64_t v, std::vector<std::byte>& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

std::size_t run_length(const std::uint32_t* v, std::size_t i, std::size_t n) {
  std::size_t j = i + 1;
  while (j < n && v[j] == v[i])
    ++j;
  return j - i;
}

}  // namespace

void encode_rle(const std::uint32_t* values, std::size_t n, int bit_width,
                std::vector<std::byte>& out) {
  const int value_bytes = (bit_width + 7) / 8;
  std::size_t i = 0;
  while (i < n) {
    const std::size_t run = run_length(values, i, n);
    if (run >= 8) {
      put_varint(static_cast<std::uint64_t>(run) << 1, out);
      for (int k = 0; k < value_bytes; ++k)
        out.push_back(static_cast<std::byte>(values[i] >> (8 * k)));
      i += run;
      continue;
    }
    // Literal groups of 8 until a long run starts at a group boundary (or the values end; the
    // last group is padded with zeros, which readers bound by the page's value count).
    std::size_t j = i;
    do {
      j += 8;
    } while (j < n && run_length(values, j, n) < 8);
    const std::size_t groups = (j - i) / 8;
    put_varint((static_cast<std::uint64_t>(groups) << 1) | 1, out);
    const std::size_t at = out.size();
    out.resize(at + groups * static_cast<std::size_t>(bit_width), std::byte{0});
    // LSB first through a 64-bit accumulator, whole bytes out as they fill.
    std::uint64_t acc = 0;
    int bits = 0;
    std::size_t o = at;
    for (std::size_t k = i; k < j; ++k) {
      const std::uint64_t v = k < n ? values[k] : 0;
      acc |= v << bits;
      bits += bit_width;
      while (bits >= 8) {
        out[o++] = static_cast<std::byte>(acc & 0xff);
        acc >>= 8;
        bits -= 8;
      }
    }
    if (bits > 0) out[o] = static_cast<std::byte>(acc & 0xff);
    i = j;
  }
}

bool dictionary_encode(const std::int64_t* values, std::size_t n, std::size_t max_entries,
                       std::vector<std::int64_t>& dictionary, std::vector<std::uint32_t>& indices) {
  dictionary.clear();
  indices.resize(n);
  // Open addressing over a power-of-two table at most half full.
  std::size_t capacity = 16;
  while (capacity < 2 * std::min(n, max_entries + 1))
    capacity *= 2;
  std::vector<std::uint32_t> slots(capacity, 0xffffffffu);
  const std::size_t mask = capacity - 1;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t v = values[i];
    std::size_t h =
        static_cast<std::size_t>((static_cast<std::uint64_t>(v) * 0x9e3779b97f4a7c15ull) >> 20) &
        mask;
    for (;;) {
      const std::uint32_t at = slots[h];
      if (at == 0xffffffffu) {
        if (dictionary.size() == max_entries) return false;
        slots[h] = static_cast<std::uint32_t>(dictionary.size());
        indices[i] = slots[h];
        dictionary.push_back(v);
        break;
      }
      if (dictionary[at] == v) {
        indices[i] = at;
        break;
      }
      h = (h + 1) & mask;
    }
  }
  return true;
}

}  // namespace ember::data::parquet
