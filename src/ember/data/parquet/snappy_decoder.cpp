#include "ember/data/parquet/snappy_decoder.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ember::data::parquet {

namespace {

// The leading varint: its value and the bytes it takes (0 when broken or past 32 bits).
std::size_t read_length(const std::uint8_t* p, std::size_t size, std::uint64_t& value) {
  value = 0;
  for (std::size_t i = 0; i < 5 && i < size; ++i) {
    value |= static_cast<std::uint64_t>(p[i] & 0x7f) << (7 * i);
    if ((p[i] & 0x80) == 0) return value <= 0xffffffffu ? i + 1 : 0;
  }
  return 0;
}

std::uint32_t load_le(const std::uint8_t* p, std::size_t bytes) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

// Copies n bytes that repeat the ones `distance` bytes back (distance >= 1; the source may
// overlap the destination) into [d, d + n), which the caller has checked lies before `end`.
void copy_back(std::uint8_t* d, std::size_t distance, std::size_t n, const std::uint8_t* end) {
  if (distance == 1) {  // a run of one byte
    std::memset(d, d[-1], n);
    return;
  }
  const std::uint8_t* s = d - distance;
  // A short period: write the pattern out until it is 8 bytes long. Each step copies the bytes
  // between s and d, which are already written, and doubles that distance.
  while (n > 0 && static_cast<std::size_t>(d - s) < 8) {
    const std::size_t k = std::min(n, static_cast<std::size_t>(d - s));
    std::memcpy(d, s, k);
    d += k;
    n -= k;
  }
  // d - s is now a multiple of the period and at least 8: 8-byte moves never read bytes not yet
  // written.
  for (; n >= 8; n -= 8, d += 8, s += 8)
    std::memcpy(d, s, 8);
  if (n == 0) return;
  if (end - d >= 8) {
    std::memcpy(d, s, 8);  // the bytes past n are overwritten by what follows
    return;
  }
  for (; n > 0; --n)
    *d++ = *s++;
}

// The common elements while both buffers have room for 16-byte moves: literals of up to 16
// bytes, and copy-1 / copy-2 elements of up to 16 bytes from at least 16 bytes back (no
// overlap). Stops before any other element, which the caller decodes with every check. The
// elements' positions form a chain (each tag's load gives the next tag's address), so the
// position is advanced by the fewest operations after that load: 1 + (tag & 3) bytes for a copy,
// (tag >> 2) + 2 for a literal; lengths, distances and the checks hang off the chain.
void decode_short_elements(const std::uint8_t*& ip_ref, const std::uint8_t* ip_end,
                           std::uint8_t*& op_ref, const std::uint8_t* op_begin,
                           const std::uint8_t* op_end) {
  const std::uint8_t* ip = ip_ref;
  std::uint8_t* op = op_ref;
  while ((ip_end - ip > 20) & (op_end - op >= 16)) {
    const std::size_t tag = *ip;
    const std::size_t kind = tag & 3;
    if (kind == 0) {
      const std::size_t length = (tag >> 2) + 1;
      if (length > 16) break;
      std::memcpy(op, ip + 1, 16);
      op += length;
      ip += length + 1;
      continue;
    }
    if (kind == 3) break;
    // Copy-1 and copy-2 told apart by masks: which one comes next follows no pattern in pages of
    // numbers, and a branch on it would be mispredicted every other time.
    std::uint32_t trailer;
    std::memcpy(&trailer, ip + 1, 4);
    const std::size_t mask = std::size_t{0} - (kind == 1);
    const std::size_t length = ((((tag >> 2) & 7) + 4) & mask) | (((tag >> 2) + 1) & ~mask);
    const std::size_t distance =
        ((((tag >> 5) << 8) | (trailer & 0xff)) & mask) | (trailer & 0xffff & ~mask);
    // & rather than &&: one branch.
    if (!((length <= 16) & (distance >= 16) &
          (distance <= static_cast<std::size_t>(op - op_begin))))
      break;
    ip += kind + 1;
    std::memcpy(op, op - distance, 16);
    op += length;
  }
  ip_ref = ip;
  op_ref = op;
}

}  // namespace

std::optional<std::size_t> snappy_declared_length(const std::byte* src, std::size_t size) {
  std::uint64_t value = 0;
  if (read_length(reinterpret_cast<const std::uint8_t*>(src), size, value) == 0) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(value);
}

const std::byte* snappy_single_literal(const std::byte* src, std::size_t size,
                                       std::size_t expected) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(src);
  std::uint64_t declared = 0;
  std::size_t at = read_length(p, size, declared);
  if (at == 0 || declared != expected || expected == 0 || at >= size || (p[at] & 3) != 0) {
    return nullptr;
  }
  std::size_t length = (p[at] >> 2) + 1;
  ++at;
  if (length > 60) {
    const std::size_t extra = length - 60;
    if (size - at < extra) return nullptr;
    length = static_cast<std::size_t>(load_le(p + at, extra)) + 1;
    at += extra;
  }
  return length == expected && size - at == length ? src + at : nullptr;
}

const char* snappy_decode(const std::byte* src, std::size_t size, std::byte* dst,
                          std::size_t expected) {
  const auto* ip = reinterpret_cast<const std::uint8_t*>(src);
  const std::uint8_t* const ip_end = ip + size;
  std::uint64_t declared = 0;
  const std::size_t header = read_length(ip, size, declared);
  if (header == 0) return "has no valid length";
  if (declared != expected) return "declares another length than the page header";
  ip += header;
  auto* op = reinterpret_cast<std::uint8_t*>(dst);
  std::uint8_t* const op_begin = op;
  std::uint8_t* const op_end = op + expected;
  while (ip < ip_end) {
    decode_short_elements(ip, ip_end, op, op_begin, op_end);
    if (ip == ip_end) break;
    const std::uint32_t tag = *ip;
    if ((tag & 3) == 0) {
      std::size_t length = (tag >> 2) + 1;
      // The common short literal: one 16-byte move when both buffers have 16 bytes left.
      if (length <= 16 && ip_end - ip > 16 && op_end - op >= 16) {
        std::memcpy(op, ip + 1, 16);
        op += length;
        ip += length + 1;
        continue;
      }
      ++ip;
      if (length > 60) {
        const std::size_t extra = length - 60;
        if (static_cast<std::size_t>(ip_end - ip) < extra) return "ends inside a literal's length";
        length = static_cast<std::size_t>(load_le(ip, extra)) + 1;
        ip += extra;
      }
      if (static_cast<std::size_t>(ip_end - ip) < length) return "has a literal cut off";
      if (static_cast<std::size_t>(op_end - op) < length) return "decodes past its length";
      std::memcpy(op, ip, length);
      op += length;
      ip += length;
      continue;
    }
    std::size_t length = 0, distance = 0;
    if ((tag & 3) != 3 && ip_end - ip >= 5) {
      // A copy with a 1- or 2-byte distance (nearly every copy), the two told apart by masks:
      // which one comes next follows no pattern in pages of numbers, and a branch on it would
      // be mispredicted every other time.
      std::uint32_t trailer;
      std::memcpy(&trailer, ip + 1, 4);
      const std::uint32_t one = (tag & 3) == 1;
      const std::uint32_t mask = 0u - one;
      length = ((((tag >> 2) & 7) + 4) & mask) | (((tag >> 2) + 1) & ~mask);
      distance = ((((tag >> 5) << 8) | (trailer & 0xff)) & mask) | (trailer & 0xffff & ~mask);
      ip += 3 - one;
    } else {
      const std::size_t bytes = (tag & 3) == 3 ? 4 : (tag & 3);  // after the tag
      if (static_cast<std::size_t>(ip_end - ip) < 1 + bytes) return "has a copy cut off";
      length = (tag & 3) == 1 ? ((tag >> 2) & 7) + 4 : (tag >> 2) + 1;
      distance = load_le(ip + 1, bytes);
      if ((tag & 3) == 1) distance |= (tag >> 5) << 8;
      ip += 1 + bytes;
    }
    const auto written = static_cast<std::size_t>(op - op_begin);
    const auto room = static_cast<std::size_t>(op_end - op);
    // The common short copy from at least 16 bytes back: one 16-byte move, no overlap (& rather
    // than &&: one branch).
    if ((length <= 16) & (distance >= 16) & (room >= 16) & (distance <= written)) {
      std::memcpy(op, op - distance, 16);
      op += length;
      continue;
    }
    if (distance == 0 || distance > written) return "copies from before its start";
    if (room < length) return "decodes past its length";
    copy_back(op, distance, length, op_end);
    op += length;
  }
  if (op != op_end) return "ends before its length";
  return nullptr;
}

}  // namespace ember::data::parquet
