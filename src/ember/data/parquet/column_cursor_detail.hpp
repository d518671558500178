// Small helpers shared by the two halves of ColumnCursor (pages, values).
#pragma once

#include <cstddef>
#include <cstring>

#include "ember/data/parquet/parquet_metadata.hpp"

namespace ember::data::parquet::detail {

inline constexpr std::size_t kChunk = 1024;  // values decoded at a time into scratch

// Asks for the cache line kPrefetchAhead bytes past p: a page's values are read as a stream, but
// the hardware prefetcher stops at each 4 KiB page and loses the stream when the reader moves on
// to the next column.
inline constexpr std::size_t kPrefetchAhead = 1024;
inline void prefetch_ahead(const std::byte* p) {
  __builtin_prefetch(p + kPrefetchAhead);
}

// A little-endian value from unaligned bytes.
template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Bytes of one PLAIN value of the numeric types Ember reads (0 for the others).
inline std::size_t value_width(PhysicalType type) {
  switch (type) {
    case PhysicalType::Int32:
    case PhysicalType::Float:
      return 4;
    case PhysicalType::Int64:
    case PhysicalType::Double:
      return 8;
    default:
      return 0;
  }
}

}  // namespace ember::data::parquet::detail
