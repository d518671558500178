// Ember's own decoder of raw snappy data (Parquet's SNAPPY pages): a varint of the uncompressed
// length, then literal and copy elements. It needs no library, so SNAPPY Parquet reads in every
// build (libsnappy is needed only to write SNAPPY pages), and it is faster than Debian's
// libsnappy 1.1.9 on Parquet's pages: that build calls its MemMove through the PLT and then libc's
// memmove for every copy element, which dominates on pages of small integers (a copy or a
// literal every 4 bytes). Short elements are copied as one 16-byte move when they, and 16 bytes
// from where they start, lie inside both buffers; everything else takes a checked path, so any
// bytes at all either decode to exactly the declared length or are refused.
#pragma once

#include <cstddef>
#include <optional>

namespace ember::data::parquet {

// The uncompressed length the data declares (its leading varint); nullopt when it is broken or
// above 2^32 - 1 (the format's limit).
std::optional<std::size_t> snappy_declared_length(const std::byte* src, std::size_t size);

// When the data is one literal holding all `expected` bytes (what snappy writes for up to 64 KiB
// that it cannot compress: pages of random floats or keys), where those bytes lie inside
// [src, src + size), so that the page is read in place; nullptr otherwise.
const std::byte* snappy_single_literal(const std::byte* src, std::size_t size,
                                       std::size_t expected);

// Decodes [src, src + size) into exactly `expected` bytes at dst. Returns nullptr, or what is
// wrong with the data (a static string for the caller's message: "declares another length", a
// copy from before the output's start, elements that run past either buffer or stop short).
const char* snappy_decode(const std::byte* src, std::size_t size, std::byte* dst,
                          std::size_t expected);

}  // namespace ember::data::parquet
