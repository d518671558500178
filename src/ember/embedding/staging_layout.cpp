#include "ember/embedding/staging_layout.hpp"

#include <algorithm>

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
  auto put = [&](std::size_t offset, const std::vector<std::int64_t>& v) {
    std::copy(v.begin(), v.end(), reinterpret_cast<std::int64_t*>(buffer + offset));
  };
  put(l.fetch_rows, plan.fetch_rows);
  put(l.fetch_slots, plan.fetch_slots);
  put(l.evict_rows, plan.evict_rows);
  put(l.evict_slots, plan.evict_slots);
  put(l.new_rows, plan.new_rows);
  put(l.new_slots, plan.new_slots);
  auto* map_rows = reinterpret_cast<std::int64_t*>(buffer + l.map_rows);
  auto* map_values = reinterpret_cast<std::int32_t*>(buffer + l.map_values);
  std::size_t i = 0;
  for (std::int64_t r : plan.evict_rows) {
    map_rows[i] = r;
    map_values[i++] = -1;
  }
  for (std::size_t j = 0; j < plan.fetch_rows.size(); ++j, ++i) {
    map_rows[i] = plan.fetch_rows[j];
    map_values[i] = static_cast<std::int32_t>(plan.fetch_slots[j]);
  }
  for (std::size_t j = 0; j < plan.new_rows.size(); ++j, ++i) {
    map_rows[i] = plan.new_rows[j];
    map_values[i] = static_cast<std::int32_t>(plan.new_slots[j]);
  }
}

}  // namespace ember::embedding
