// Where one batch's index lists and fetched rows lie in a host-backed table's staging buffer
// (host_backed_rows.hpp), and the host's writing of the lists a plan (cache_directory.hpp) names.
// Apart from HostBackedRows so that the host's share of a batch can be measured on its own
// (bench/train/bench_cache_plan.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ember/embedding/cache_directory.hpp"
#include "ember/embedding/host_backed_rows.hpp"

namespace ember::embedding {

// The index lists, then the fetched rows column by column (m x bytes(c) each), every part on a
// 256-byte boundary. The map lists hold the slot map's changes in the order they apply: victims
// leave (-1), fetched rows arrive, then new rows.
struct StagingLayout {
  std::int64_t m = 0, e = 0, k = 0;  // fetched, evicted, new rows
  std::size_t fetch_rows = 0, fetch_slots = 0, evict_rows = 0, evict_slots = 0, new_rows = 0,
              new_slots = 0, map_rows = 0, map_values = 0, index_bytes = 0, total = 0;
  std::vector<std::size_t> data;  // per column

  static StagingLayout make(const RowColumns& columns, std::int64_t m, std::int64_t e,
                            std::int64_t k);
  static StagingLayout of(const RowColumns& columns, const CachePlan& plan);
};

// Writes the plan's index lists and map lists into `buffer` (layout.index_bytes at least).
void write_staging_lists(const CachePlan& plan, const StagingLayout& layout, std::byte* buffer);

}  // namespace ember::embedding
