// Parquet's page-level decoders on their own: Ember's SNAPPY decoder against a plain model of the
// format (and libsnappy's output where this build has it), damaged snappy data, and the RLE /
// bit-packed hybrid at every bit width, in runs and in bit-packed groups, read in pieces of
// every alignment.
#include <gtest/gtest.h>

#if EMBER_WITH_SNAPPY
#include <snappy-c.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ember/data/parquet/encoding.hpp"
#include "ember/data/parquet/snappy_decoder.hpp"
#include "support/test_support.hpp"

namespace ember::data::parquet {
namespace {

using Bytes = std::vector<std::byte>;

void put_varint(std::uint64_t v, Bytes& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

void put_le(std::uint64_t v, int bytes, Bytes& out) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

// A snappy stream built element by element, with the bytes it stands for kept beside it (the
// model: a copy repeats the output byte by byte, as the format defines it).
struct SnappyStream {
  Bytes elements;  // without the leading length
  Bytes expected;

  void literal(const Bytes& bytes, bool long_form = false) {
    const std::size_t n = bytes.size();
    if (n <= 60 && !long_form) {
      elements.push_back(static_cast<std::byte>((n - 1) << 2));
    } else {
      const int extra = n - 1 < 0x100 ? 1 : n - 1 < 0x10000 ? 2 : n - 1 < 0x1000000 ? 3 : 4;
      elements.push_back(static_cast<std::byte>((59 + extra) << 2));
      put_le(n - 1, extra, elements);
    }
    elements.insert(elements.end(), bytes.begin(), bytes.end());
    expected.insert(expected.end(), bytes.begin(), bytes.end());
  }
  // kind 1: length 4..11, distance < 2048; kind 2: length 1..64, distance < 65536; kind 4:
  // length 1..64, any distance.
  void copy(int kind, std::size_t length, std::size_t distance) {
    if (kind == 1) {
      elements.push_back(static_cast<std::byte>(1 | ((length - 4) << 2) | ((distance >> 8) << 5)));
      put_le(distance & 0xff, 1, elements);
    } else {
      elements.push_back(static_cast<std::byte>((kind == 2 ? 2 : 3) | ((length - 1) << 2)));
      put_le(distance, kind == 2 ? 2 : 4, elements);
    }
    for (std::size_t i = 0; i < length; ++i)
      expected.push_back(expected[expected.size() - distance]);
  }
  Bytes data() const {
    Bytes out;
    put_varint(expected.size(), out);
    out.insert(out.end(), elements.begin(), elements.end());
    return out;
  }
};

Bytes random_bytes(std::mt19937_64& rng, std::size_t n, int alphabet = 256) {
  Bytes b(n);
  for (auto& x : b)
    x = static_cast<std::byte>(rng() % static_cast<unsigned>(alphabet));
  return b;
}

// A random stream of every element kind, short and long, near and far, until about `target`
// bytes are written.
SnappyStream random_stream(std::mt19937_64& rng, std::size_t target) {
  SnappyStream s;
  s.literal(random_bytes(rng, 1 + rng() % 20, 4));
  while (s.expected.size() < target) {
    const std::size_t written = s.expected.size();
    switch (rng() % 6) {
      case 0:
        s.literal(random_bytes(rng, 1 + rng() % 16, 4 + static_cast<int>(rng() % 252)));
        break;
      case 1:
        s.literal(random_bytes(rng, 1 + rng() % 300), rng() % 2 == 0);
        break;
      case 2:
        s.copy(1, 4 + rng() % 8, 1 + rng() % std::min<std::size_t>(written, 2047));
        break;
      case 3:
        s.copy(2, 1 + rng() % 64, 1 + rng() % std::min<std::size_t>(written, 65535));
        break;
      case 4:
        s.copy(4, 1 + rng() % 64, 1 + rng() % written);
        break;
      default:  // a short period: runs and small patterns, copies that overlap themselves
        s.copy(2, 1 + rng() % 64, 1 + rng() % std::min<std::size_t>(written, 20));
        break;
    }
  }
  return s;
}

// The format read the plain way, byte by byte: the bytes the data stands for, or nothing when it
// is malformed or does not decode to exactly `expected` bytes.
std::optional<Bytes> model_decode(const Bytes& data, std::size_t expected) {
  std::size_t at = 0;
  std::uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (at == data.size() || shift > 28) return std::nullopt;
    const auto b = static_cast<std::uint8_t>(data[at++]);
    length |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
  }
  if (length != expected || length > 0xffffffffu) return std::nullopt;
  const auto take = [&](int bytes, std::uint64_t& v) {
    if (data.size() - at < static_cast<std::size_t>(bytes)) return false;
    v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data[at++])) << (8 * i);
    return true;
  };
  Bytes out;
  while (at < data.size()) {
    const auto tag = static_cast<std::uint8_t>(data[at++]);
    std::uint64_t n = 0, distance = 0;
    if ((tag & 3) == 0) {
      if ((tag >> 2) < 60) {
        n = (tag >> 2) + 1u;
      } else {
        if (!take((tag >> 2) - 59, n)) return std::nullopt;
        n += 1;
      }
      if (data.size() - at < n || out.size() + n > expected) return std::nullopt;
      out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(at),
                 data.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      continue;
    }
    if ((tag & 3) == 1) {
      n = ((tag >> 2) & 7) + 4u;
      if (!take(1, distance)) return std::nullopt;
      distance |= static_cast<std::uint64_t>(tag >> 5) << 8;
    } else {
      n = (tag >> 2) + 1u;
      if (!take((tag & 3) == 2 ? 2 : 4, distance)) return std::nullopt;
    }
    if (distance == 0 || distance > out.size() || out.size() + n > expected) return std::nullopt;
    for (std::uint64_t i = 0; i < n; ++i)
      out.push_back(out[out.size() - distance]);
  }
  if (out.size() != expected) return std::nullopt;
  return out;
}

// Decodes into `out` (resized to `expected`); the 64 bytes past the end are a guard that must
// come back untouched (the decoder's 16-byte moves may only be used where they fit).
const char* decode(const Bytes& data, Bytes& out, std::size_t expected) {
  out.assign(expected + 64, std::byte{0x5a});
  const char* problem = snappy_decode(data.data(), data.size(), out.data(), expected);
  for (std::size_t i = expected; i < out.size(); ++i) {
    EXPECT_EQ(out[i], std::byte{0x5a})
        << "the decoder wrote " << i - expected << " bytes past its output";
  }
  out.resize(expected);
  return problem;
}

TEST(SnappyDecoder, DecodesEveryElementKindAsTheFormatDefines) {
  auto rng = testing::make_rng();
  for (std::size_t target : {1, 7, 16, 17, 40, 1023, 65537, 300000}) {
    for (int rep = 0; rep < 20; ++rep) {
      const SnappyStream s = random_stream(rng, target);
      Bytes out;
      ASSERT_EQ(decode(s.data(), out, s.expected.size()), nullptr) << "target " << target;
      ASSERT_EQ(out, s.expected) << "target " << target << " rep " << rep;
      EXPECT_EQ(snappy_declared_length(s.data().data(), s.data().size()), s.expected.size());
    }
  }
}

TEST(SnappyDecoder, CopiesOfEveryShortPeriodAndLengthUpToTheBufferEnd) {
  auto rng = testing::make_rng();
  // Each copy is the last element, so the 16-byte fast paths meet the buffer's end.
  for (std::size_t distance = 1; distance <= 20; ++distance) {
    for (std::size_t length = 1; length <= 64; ++length) {
      SnappyStream s;
      s.literal(random_bytes(rng, distance + rng() % 3));
      s.copy(length >= 4 && length <= 11 && distance < 2048 && rng() % 2 ? 1 : 2, length, distance);
      Bytes out;
      ASSERT_EQ(decode(s.data(), out, s.expected.size()), nullptr);
      ASSERT_EQ(out, s.expected) << "distance " << distance << " length " << length;
    }
  }
  // Short literals ending exactly at the end of input and output.
  for (std::size_t n = 1; n <= 40; ++n) {
    SnappyStream s;
    s.literal(random_bytes(rng, n));
    Bytes out;
    ASSERT_EQ(decode(s.data(), out, n), nullptr);
    ASSERT_EQ(out, s.expected);
  }
}

// The decoder's loop over short elements (literals and copy-1 / copy-2 elements of up to 16
// bytes, copies from at least 16 back) runs while 20 input and 16 output bytes are left, and
// hands every other element to the checked path: streams of such elements mixed with the
// others (short distances that overlap, copies of 17 to 64 bytes, copy-4 elements), of every
// length around those limits.
TEST(SnappyDecoder, ShortElementsMixedWithOthersUpToEveryBufferEnd) {
  auto rng = testing::make_rng();
  for (std::size_t target = 1; target <= 200; ++target) {
    for (int rep = 0; rep < 30; ++rep) {
      SnappyStream s;
      s.literal(random_bytes(rng, 1 + rng() % 16));
      while (s.expected.size() < target) {
        const std::size_t written = s.expected.size();
        const std::size_t pick = rng() % 10;
        if (pick < 4 || written < 16) {
          s.literal(random_bytes(rng, 1 + rng() % 16, 2 + static_cast<int>(rng() % 254)));
        } else if (pick < 6) {  // copy-1 from 16 back or more (the loop's own)
          s.copy(1, 4 + rng() % 8, 16 + rng() % (std::min<std::size_t>(written, 2047) - 15));
        } else if (pick < 8) {  // copy-2 of up to 16 bytes, from exactly 16 back or further
          s.copy(2, 1 + rng() % 16, rng() % 2 ? 16 : 16 + rng() % (written - 15));
        } else if (pick == 8) {  // overlapping, or longer than 16: the checked path
          s.copy(2, 1 + rng() % 64, 1 + rng() % std::min<std::size_t>(written, 15));
        } else {
          s.copy(rng() % 2 ? 2 : 4, 17 + rng() % 48, 1 + rng() % written);
        }
      }
      Bytes out;
      ASSERT_EQ(decode(s.data(), out, s.expected.size()), nullptr) << "target " << target;
      ASSERT_EQ(out, s.expected) << "target " << target << " rep " << rep;
      // Cut short by one element's worth anywhere, the data is refused, never misread.
      Bytes cut = s.data();
      cut.resize(cut.size() - 1 - rng() % std::min<std::size_t>(cut.size() - 1, 3));
      const std::optional<Bytes> model = model_decode(cut, s.expected.size());
      EXPECT_EQ(decode(cut, out, s.expected.size()) == nullptr, model.has_value());
    }
  }
}

#if EMBER_WITH_SNAPPY
TEST(SnappyDecoder, ReadsWhatLibsnappyWrites) {
  auto rng = testing::make_rng();
  for (std::size_t n : {1, 7, 1023, 65536, 65537, 200000}) {
    std::vector<Bytes> inputs;
    inputs.push_back(random_bytes(rng, n));     // incompressible
    inputs.push_back(random_bytes(rng, n, 3));  // short matches everywhere
    Bytes zeros(n, std::byte{0});
    inputs.push_back(zeros);
    Bytes keys;  // little-endian INT64 keys of 22 bits, the bench's pages
    for (std::size_t i = 0; i < n / 8; ++i)
      put_le(700000 + rng() % 100000, 8, keys);
    inputs.push_back(keys);
    for (const Bytes& input : inputs) {
      std::size_t size = snappy_max_compressed_length(input.size());
      Bytes packed(size);
      ASSERT_EQ(snappy_compress(reinterpret_cast<const char*>(input.data()), input.size(),
                                reinterpret_cast<char*>(packed.data()), &size),
                SNAPPY_OK);
      packed.resize(size);
      Bytes out;
      ASSERT_EQ(decode(packed, out, input.size()), nullptr) << n;
      ASSERT_EQ(out, input) << n;
    }
  }
}
#endif

TEST(SnappyDecoder, DamagedDataIsRefusedNeverMisread) {
  auto rng = testing::make_rng();
  const SnappyStream s = random_stream(rng, 5000);
  const Bytes good = s.data();
  const std::size_t n = s.expected.size();
  Bytes out;
  // Cut anywhere: too few bytes come out, or an element is cut off.
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    const Bytes part(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_NE(decode(part, out, n), nullptr) << "cut at " << cut;
  }
  // A length that is not the page's.
  EXPECT_STREQ(decode(good, out, n + 1), "declares another length than the page header");
  // Flipped bytes and random bytes: refused exactly when the plain model refuses them, and
  // otherwise the model's bytes (a literal's byte or a distance may change to another valid
  // one); never a read or write past the buffers (the sanitizer builds check that).
  int decoded = 0;
  for (int rep = 0; rep < 4000; ++rep) {
    Bytes bad;
    if (rep % 2 == 0) {
      bad = good;
      bad[rng() % bad.size()] ^= static_cast<std::byte>(1 + rng() % 255);
    } else {
      put_varint(1 + rng() % 64, bad);
      const Bytes tail = random_bytes(rng, rng() % 80, rep % 4 == 1 ? 256 : 8);
      bad.insert(bad.end(), tail.begin(), tail.end());
    }
    const std::size_t declared = *snappy_declared_length(bad.data(), bad.size());
    const auto model = model_decode(bad, declared);
    const char* problem = decode(bad, out, declared);
    ASSERT_EQ(problem == nullptr, model.has_value())
        << "rep " << rep << ": " << (problem ? problem : "decoded");
    if (model) {
      ASSERT_EQ(out, *model) << "rep " << rep;
      ++decoded;
    }
  }
  EXPECT_GT(decoded, 0);  // some damage leaves valid data: the comparison above did compare
  // Copies from before the start, of distance 0, and past the declared end.
  SnappyStream early;
  early.literal(random_bytes(rng, 5));
  early.elements.push_back(std::byte{2 | (3 << 2)});
  put_le(6, 2, early.elements);
  early.expected.resize(9);
  EXPECT_STREQ(decode(early.data(), out, 9), "copies from before its start");
  SnappyStream zero;
  zero.literal(random_bytes(rng, 5));
  zero.elements.push_back(std::byte{2 | (3 << 2)});
  put_le(0, 2, zero.elements);
  zero.expected.resize(9);
  EXPECT_STREQ(decode(zero.data(), out, 9), "copies from before its start");
  SnappyStream past;
  past.literal(random_bytes(rng, 20));
  past.copy(2, 30, 20);
  Bytes short_length;
  put_varint(40, short_length);
  short_length.insert(short_length.end(), past.elements.begin(), past.elements.end());
  EXPECT_STREQ(decode(short_length, out, 40), "decodes past its length");
  // A length varint that never ends, or runs past 32 bits.
  const Bytes endless(6, std::byte{0xff});
  EXPECT_FALSE(snappy_declared_length(endless.data(), endless.size()));
  EXPECT_STREQ(decode(endless, out, 0), "has no valid length");
}

TEST(SnappyDecoder, OnlyAPageHeldInOneLiteralIsReadInPlace) {
  auto rng = testing::make_rng();
  for (std::size_t n : {1, 60, 61, 256, 257, 65536, 65537}) {
    for (const bool long_form : {false, true}) {
      SnappyStream s;
      s.literal(random_bytes(rng, n), long_form);
      const Bytes data = s.data();
      const std::byte* at = snappy_single_literal(data.data(), data.size(), n);
      ASSERT_NE(at, nullptr) << n;
      EXPECT_EQ(Bytes(at, at + n), s.expected);
      EXPECT_EQ(snappy_single_literal(data.data(), data.size(), n + 1), nullptr);
      EXPECT_EQ(snappy_single_literal(data.data(), data.size() - 1, n), nullptr);
    }
    SnappyStream two;  // the same bytes as two literals: decoded, not read in place
    const Bytes bytes = random_bytes(rng, n + 1);
    two.literal(Bytes(bytes.begin(), bytes.begin() + 1));
    two.literal(Bytes(bytes.begin() + 1, bytes.end()));
    EXPECT_EQ(snappy_single_literal(two.data().data(), two.data().size(), n + 1), nullptr);
    SnappyStream copy;  // a literal, then a copy
    copy.literal(random_bytes(rng, n));
    copy.copy(2, 1, 1);
    EXPECT_EQ(snappy_single_literal(copy.data().data(), copy.data().size(), n + 1), nullptr);
  }
}

// Values below 2^width with long runs and stretches of change, encoded by the writer's encoder.
std::vector<std::uint32_t> level_like_values(std::mt19937_64& rng, std::size_t n, int width) {
  const std::uint64_t limit = width == 0 ? 1 : std::uint64_t{1} << width;
  std::vector<std::uint32_t> v;
  while (v.size() < n) {
    const std::size_t run = rng() % 4 == 0 ? 8 + rng() % 300 : 1;
    const auto value = static_cast<std::uint32_t>(rng() % limit);
    for (std::size_t i = 0; i < run && v.size() < n; ++i)
      v.push_back(value);
  }
  return v;
}

TEST(RleBitPackedHybrid, EveryWidthReadsBackInPiecesOfEveryAlignment) {
  auto rng = testing::make_rng();
  const std::string what = "test page";
  for (int width = 0; width <= 32; ++width) {
    for (std::size_t n : {1, 7, 1023, 65537}) {
      const auto values = level_like_values(rng, n, width);
      Bytes encoded;
      encode_rle(values.data(), values.size(), width, encoded);
      RleDecoder d;
      d.reset(encoded.data(), encoded.size(), width, &what);
      std::vector<std::uint32_t> got(n + 1, 0xdeadbeef);
      std::size_t at = 0;
      while (at < n) {
        const std::size_t piece = std::min<std::size_t>(n - at, 1 + rng() % 40);
        ASSERT_EQ(d.get(got.data() + at, piece), piece) << "width " << width << " n " << n;
        at += piece;
      }
      got.resize(n);
      ASSERT_EQ(got, values) << "width " << width << " n " << n;
    }
  }
}

// Shared reading passes over values without unpacking them: skipped pieces interleaved with
// read ones must leave the reads exactly where get() alone would, and a skip past the end
// returns how many were left.
TEST(RleBitPackedHybrid, SkippingPiecesLeavesTheReadsWhereGetWould) {
  auto rng = testing::make_rng();
  const std::string what = "test page";
  for (int width = 0; width <= 32; ++width) {
    for (std::size_t n : {1, 7, 1023, 65537}) {
      const auto values = level_like_values(rng, n, width);
      Bytes encoded;
      encode_rle(values.data(), values.size(), width, encoded);
      RleDecoder d;
      d.reset(encoded.data(), encoded.size(), width, &what);
      std::vector<std::uint32_t> got(41);
      std::size_t at = 0;
      while (at < n) {
        const std::size_t piece = std::min<std::size_t>(n - at, 1 + rng() % 40);
        if (rng() % 2 == 0) {
          ASSERT_EQ(d.skip(piece), piece) << "width " << width << " n " << n;
        } else {
          ASSERT_EQ(d.get(got.data(), piece), piece) << "width " << width << " n " << n;
          for (std::size_t i = 0; i < piece; ++i)
            ASSERT_EQ(got[i], values[at + i]) << "width " << width << " n " << n << " at " << at;
        }
        at += piece;
      }
      // The last bit-packed group is padded: only whole values the page holds may be skipped
      // past its end, never more than the encoding carries.
      EXPECT_LE(d.skip(100), 7u);
    }
  }
}

TEST(RleBitPackedHybrid, LevelsInOneRunOrBitPackedFindTheFirstDifferentValue) {
  auto rng = testing::make_rng();
  const std::string what = "test page";
  for (std::size_t n : {1, 7, 1023, 65537}) {
    // Every value 1 (a page of present values with max definition 1), as one RLE run and as
    // bit-packed groups.
    Bytes run;
    put_varint(n << 1, run);
    run.push_back(std::byte{1});
    Bytes packed;
    const std::size_t groups = (n + 7) / 8;
    put_varint((groups << 1) | 1, packed);
    for (std::size_t g = 0; g < groups; ++g)
      packed.push_back(std::byte{0xff});
    for (const Bytes* b : {&run, &packed}) {
      RleDecoder d;
      d.reset(b->data(), b->size(), 1, &what);
      EXPECT_EQ(d.consume_equal(1, n), n);
      EXPECT_FALSE(d.mismatch());
    }
    // One null at a random place of the bit-packed groups: found exactly.
    const std::size_t null_at = rng() % n;
    Bytes holed = packed;
    const std::size_t byte = holed.size() - groups + null_at / 8;
    holed[byte] &= static_cast<std::byte>(~(1u << (null_at % 8)));
    RleDecoder d;
    d.reset(holed.data(), holed.size(), 1, &what);
    std::size_t consumed = 0;
    while (consumed < n) {
      const std::size_t piece = std::min<std::size_t>(n - consumed, 1 + rng() % 500);
      const std::size_t ok = d.consume_equal(1, piece);
      consumed += ok;
      if (ok < piece) break;
    }
    EXPECT_TRUE(d.mismatch());
    EXPECT_EQ(consumed, null_at);
  }
}

}  // namespace
}  // namespace ember::data::parquet
