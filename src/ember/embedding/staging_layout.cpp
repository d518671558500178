#include "ember/embedding/staging_layout.hpp"

#include "ember/embedding/host_chunks.hpp"

namespace ember::embedding {

namespace {

constexpr std::size_t kAlign = 256;

std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

StagingLayout StagingLayout::make(const RowColumns& columns, std::int64_t m, std::int64_t e,
                                  std::int64_t k) {
  StagingLayout l;
  l.m = m;
  l.e = e;
  l.k = k;
  std::size_t offset = 0;
  auto take = [&](std::int64_t bytes) {
    const std::size_t here = offset;
    offset = align_up(offset + static_cast<std::size_t>(bytes));
    return here;
  };
  const std::int64_t maps = e + m + k;
  l.fetch_rows = take(m * 8);
  l.fetch_slots = take(m * 8);
  l.evict_rows = take(e * 8);
  l.evict_slots = take(e * 8);
  l.new_rows = take(k * 8);
  l.new_slots = take(k * 8);
  l.map_rows = take(maps * 8);
  l.map_values = take(maps * 4);
  l.index_bytes = offset;
  for (int c = 0; c < columns.count(); ++c)
    l.data.push_back(take(m * columns.bytes(c)));
  l.total = offset;
  return l;
}

StagingLayout StagingLayout::of(const RowColumns& columns, const CachePlan& plan) {
  return make(columns, static_cast<std::int64_t>(plan.fetch_rows.size()),
              static_cast<std::int64_t>(plan.evict_rows.size()),
              static_cast<std::int64_t>(plan.new_rows.size()));
}

void write_staging_lists(const CachePlan& plan, const StagingLayout& l, std::byte* buffer) {
  auto* map_rows = reinterpret_cast<std::int64_t*>(buffer + l.map_rows);
  auto* map_values = reinterpret_cast<std::int32_t*>(buffer + l.map_values);
  // Each part of the plan (victims, fetched rows, new rows) gives its two lists and its stretch of
  // the map lists, where the map's changes apply in that order: victims leave, fetched and new
  // rows arrive. On several threads for large plans (a few MB of lists).
  auto part = [&](const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& slots,
                  std::size_t rows_at, std::size_t slots_at, std::size_t map_at, bool leaving) {
    auto* out_rows = reinterpret_cast<std::int64_t*>(buffer + rows_at);
    auto* out_slots = reinterpret_cast<std::int64_t*>(buffer + slots_at);
    const std::size_t n = rows.size();
    for_each_chunk(n, chunk_count(n), [&](std::size_t, std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        out_rows[i] = rows[i];
        out_slots[i] = slots[i];
        map_rows[map_at + i] = rows[i];
        map_values[map_at + i] = leaving ? -1 : static_cast<std::int32_t>(slots[i]);
      }
    });
  };
  const auto e = static_cast<std::size_t>(l.e), m = static_cast<std::size_t>(l.m);
  part(plan.evict_rows, plan.evict_slots, l.evict_rows, l.evict_slots, 0, true);
  part(plan.fetch_rows, plan.fetch_slots, l.fetch_rows, l.fetch_slots, e, false);
  part(plan.new_rows, plan.new_slots, l.new_rows, l.new_slots, e + m, false);
}

}  // namespace ember::embedding
