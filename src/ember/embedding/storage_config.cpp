#include "ember/embedding/storage_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "ember/core/allocator.hpp"
#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"

namespace ember::embedding {

namespace {

constexpr Named<StorageLocation> kLocations[] = {
    {"device", StorageLocation::Device},
    {"host", StorageLocation::Host},
    {"auto", StorageLocation::Auto},
};
constexpr Named<HostMemory> kHostMemories[] = {
    {"pinned", HostMemory::Pinned},
    {"pageable", HostMemory::Pageable},
};
constexpr Named<EvictionPolicy> kPolicies[] = {
    {"lru", EvictionPolicy::Lru},
    {"lfu", EvictionPolicy::Lfu},
    {"lfu_history", EvictionPolicy::LfuHistory},
};

template <class T, std::size_t N>
const char* name_of(const Named<T> (&options)[N], T value) {
  for (const auto& o : options) {
    if (o.value == value) return o.name.data();
  }
  return "?";
}

// Cache slots are i32 in the device's row -> slot map.
constexpr std::int64_t kMaxCacheRows = std::numeric_limits<std::int32_t>::max();

}  // namespace

const char* storage_location_name(StorageLocation location) {
  return name_of(kLocations, location);
}
const char* host_memory_name(HostMemory memory) {
  return name_of(kHostMemories, memory);
}
const char* eviction_policy_name(EvictionPolicy policy) {
  return name_of(kPolicies, policy);
}

std::optional<EvictionPolicy> eviction_policy_from_name(std::string_view name) {
  for (const auto& o : kPolicies) {
    if (o.name == name) return o.value;
  }
  return std::nullopt;
}

void StorageConfig::validate(const std::string& where) const {
  if (cache_ratio != 0 && !(cache_ratio > 0 && cache_ratio <= 1)) {
    invalid_config(where, "storage.cache_ratio", "a number in (0, 1]", cache_ratio);
  }
  if (cache_rows < 0) invalid_config(where, "storage.cache_rows", "an integer >= 1", cache_rows);
  if (cache_ratio > 0 && cache_rows > 0) {
    EMBER_THROW_AS(ConfigError, where,
                   ": give \"storage.cache_ratio\" or \"storage.cache_rows\", not both");
  }
  if (location == StorageLocation::Device && cache_size_given()) {
    EMBER_THROW_AS(ConfigError, where, ": \"storage.",
                   cache_ratio > 0 ? "cache_ratio" : "cache_rows",
                   "\" sizes the device cache of a host table: it needs \"storage.location\" "
                   "\"host\" or \"auto\", not \"device\"");
  }
}

StorageConfig read_storage(ConfigReader& layer) {
  StorageConfig c;
  auto s = layer.optional_object("storage");
  if (!s) return c;
  c.location = s->choice_or("location", c.location, kLocations);
  if (s->has("cache_ratio")) {
    c.cache_ratio = s->number("cache_ratio", NumberRange{0, 1, true});
  }
  if (s->has("cache_rows")) c.cache_rows = s->integer("cache_rows", IntRange::at_least(1));
  c.host_memory = s->choice_or("host_memory", c.host_memory, kHostMemories);
  c.policy = s->choice_or("policy", c.policy, kPolicies);
  return c;
}

std::uint64_t device_reserve_bytes(std::uint64_t device_total) {
  return std::max<std::uint64_t>(std::uint64_t{2} << 30, device_total / 10);
}

std::uint64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t value = 0;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

namespace {

std::string bytes_text(std::uint64_t bytes) {
  return format_bytes(bytes);
}

std::string percent_text(double percent) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g %%", percent);
  return text;
}

// The cache size asked for, in rows (at least 1, at most the table).
std::int64_t asked_cache_rows(const StorageConfig& c, std::int64_t rows) {
  if (c.cache_rows > 0) return std::min(c.cache_rows, rows);
  const double r = std::ceil(c.cache_ratio * static_cast<double>(rows));
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(r), 1, std::max<std::int64_t>(rows, 1));
}

void check_host_fits(const StorageNeeds& n, const MemoryAvailable& a, const std::string& where,
                     const std::string& table) {
  const std::uint64_t need =
      static_cast<std::uint64_t>(n.rows) * n.row_bytes * static_cast<std::uint64_t>(n.host_sharers);
  if (a.host_available == 0 || need <= a.host_available) return;
  EMBER_THROW_AS(
      OutOfMemoryError, where, ": the host table (", table,
      n.host_sharers > 1 ? cat(", x", n.host_sharers, " ranks in this process") : std::string(),
      ") needs ", bytes_text(need), " of host memory but ", bytes_text(a.host_available),
      " are available");
}

}  // namespace

StorageDecision decide_storage(const StorageConfig& c, const StorageNeeds& n,
                               const MemoryAvailable& a, const std::string& where) {
  c.validate(where);
  StorageDecision d;
  const std::uint64_t table_bytes = static_cast<std::uint64_t>(n.rows) * n.row_bytes;
  const std::string table =
      cat(n.rows, " rows x ", n.row_bytes, " bytes = ", bytes_text(table_bytes));
  if (c.location == StorageLocation::Device ||
      (a.device_is_host && c.location == StorageLocation::Auto)) {
    return d;
  }
  if (a.device_is_host) {
    check_host_fits(n, a, where, table);
    d.location = StorageLocation::Host;
    d.cache_rows =
        c.cache_size_given() ? asked_cache_rows(c, n.rows) : std::max<std::int64_t>(n.rows, 1);
    return d;
  }
  const std::uint64_t reserve = device_reserve_bytes(a.device_total);
  const std::uint64_t budget = a.device_free > reserve ? a.device_free - reserve : 0;
  const std::string device_text =
      cat(bytes_text(a.device_free), " free on the device (keeping ", bytes_text(reserve),
          " for the dense network and the pipeline)");
  if (c.location == StorageLocation::Auto && n.index_bytes + table_bytes <= budget) return d;
  const std::uint64_t fixed = n.index_bytes + n.slot_map_bytes;
  const std::int64_t fits = budget > fixed && n.row_bytes > 0
                                ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                                      (budget - fixed) / n.row_bytes, kMaxCacheRows))
                                : 0;
  std::int64_t cache = 0;
  if (c.cache_size_given()) {
    cache = asked_cache_rows(c, n.rows);
    if (cache > fits) {
      EMBER_THROW_AS(OutOfMemoryError, where, ": a device cache of ", cache, " rows (",
                     bytes_text(static_cast<std::uint64_t>(cache) * n.row_bytes),
                     ") does not fit: ", device_text, ", ", bytes_text(fixed),
                     " of it for the key index and the row map, leave room for ", fits,
                     " rows; lower storage.cache_ratio or storage.cache_rows");
    }
  } else {
    cache = std::min<std::int64_t>(std::max<std::int64_t>(n.rows, 1), fits);
    if (cache < 1) {
      EMBER_THROW_AS(OutOfMemoryError, where, ": the table (", table, ", plus ", bytes_text(fixed),
                     " of key index) fits in neither the device (", device_text,
                     ") nor a host table with a device cache (no room for one cached row)");
    }
  }
  if (cache > kMaxCacheRows) cache = kMaxCacheRows;
  if (c.location == StorageLocation::Auto && a.host_available > 0 &&
      table_bytes * static_cast<std::uint64_t>(n.host_sharers) > a.host_available) {
    EMBER_THROW_AS(
        OutOfMemoryError, where, ": the table (", table, ") fits in neither the device (",
        device_text, ") nor the host (", bytes_text(a.host_available), " available",
        n.host_sharers > 1 ? cat(" for ", n.host_sharers, " ranks") : std::string(), ")");
  }
  check_host_fits(n, a, where, table);
  d.location = StorageLocation::Host;
  d.cache_rows = cache;
  const double percent =
      n.rows > 0 ? 100.0 * static_cast<double>(cache) / static_cast<double>(n.rows) : 100.0;
  d.log_line = cat(where, ": ",
                   c.location == StorageLocation::Auto
                       ? cat("the table (", table, ") does not fit in the ", device_text, ": ")
                       : std::string(),
                   "host table (", host_memory_name(c.host_memory), ", ", bytes_text(table_bytes),
                   ") with a device cache of ", cache, " rows (", percent_text(percent), ", ",
                   bytes_text(static_cast<std::uint64_t>(cache) * n.row_bytes), "), eviction ",
                   eviction_policy_name(c.policy));
  return d;
}

}  // namespace ember::embedding
