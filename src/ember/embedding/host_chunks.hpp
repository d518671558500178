// The host's loops over one batch's rows in a host-backed table's bookkeeping
// (cache_directory.cpp, cache_policy.cpp): the rows split into contiguous chunks, handled by
// OpenMP threads when there are enough rows to pay for waking them. Nearly every step of such a
// loop misses the caches (a batch's rows are a few in a million of the table's), so threads help
// even where the work per row is small. Results that are gathered chunk after chunk come out the
// same whatever the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>

namespace ember::embedding {

// Rows per chunk at least: below this one thread does the loop.
inline constexpr std::size_t kRowsPerChunk = 8192;

// How many chunks a loop over n rows is split into: 1 on one thread, else up to four per thread
// (the threads take them as they come: one held up by another program does not hold up the
// loop).
inline std::size_t chunk_count(std::size_t n) {
  const auto threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
  if (threads == 1) return 1;
  return std::clamp<std::size_t>(n / kRowsPerChunk, 1, 4 * threads);
}

// Chunk c of `chunks` over [0, n): [chunk_begin(n, chunks, c), chunk_begin(n, chunks, c + 1)).
inline std::size_t chunk_begin(std::size_t n, std::size_t chunks, std::size_t c) {
  return n / chunks * c + std::min(c, n % chunks);
}

// Runs f(c, begin, end) for every chunk c of `chunks` over [0, n), on OpenMP threads when there
// are several chunks. f must not throw (an exception cannot leave an OpenMP region).
template <class F>
void for_each_chunk(std::size_t n, std::size_t chunks, F&& f) {
  if (chunks <= 1) {
    f(std::size_t{0}, std::size_t{0}, n);
    return;
  }
  const auto count = static_cast<std::ptrdiff_t>(chunks);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t c = 0; c < count; ++c) {
    const auto u = static_cast<std::size_t>(c);
    f(u, chunk_begin(n, chunks, u), chunk_begin(n, chunks, u + 1));
  }
}

}  // namespace ember::embedding
