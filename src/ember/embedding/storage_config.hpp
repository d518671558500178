// Where a sparse embedding's rows live: an Ember extension beside HugeCTR's keys, the layer's
// optional "storage" object (docs/embedding.md, "Tables larger than the GPU"):
//
//   "storage": {"location": "device" | "host" | "auto", "cache_ratio": R | "cache_rows": N,
//               "host_memory": "pinned" | "pageable", "policy": "lru" | "lfu" | "lfu_history"}
//
// device: the rank's table and its optimizer state in device memory (HugeCTR's behaviour).
// host:   table and state in host memory; the device holds a cache of R x the rank's rows (or N
//         rows) with their state. auto (the default): device when the shard fits in what the
//         device has free, less a reserve for the dense network and the pipeline, else host
//         with the largest cache that fits. On CPU ranks the "device" is the host, so auto is
//         device there; host then keeps a separate cache buffer (what CI tests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember {
class ConfigReader;
}

namespace ember::embedding {

enum class StorageLocation : std::uint8_t { Device, Host, Auto };
enum class HostMemory : std::uint8_t { Pinned, Pageable };
// Which cached rows make room for a batch's misses (cache_policy.hpp).
enum class EvictionPolicy : std::uint8_t { Lru, Lfu, LfuHistory };

const char* storage_location_name(StorageLocation location);
const char* host_memory_name(HostMemory memory);
const char* eviction_policy_name(EvictionPolicy policy);
// The policy of that name (as the "policy" key takes it); nullopt for any other name.
std::optional<EvictionPolicy> eviction_policy_from_name(std::string_view name);

struct StorageConfig {
  StorageLocation location = StorageLocation::Auto;
  double cache_ratio = 0;       // of the rank's rows, in (0, 1]; 0: not given
  std::int64_t cache_rows = 0;  // per rank, >= 1; 0: not given
  HostMemory host_memory = HostMemory::Pinned;
  EvictionPolicy policy = EvictionPolicy::LfuHistory;

  bool cache_size_given() const { return cache_ratio > 0 || cache_rows > 0; }
  // Checks the rules between the keys; ConfigError in the reader's format, naming `where`.
  void validate(const std::string& where) const;
};

// Reads the "storage" object of an embedding layer (the layer's reader `layer`), if present.
StorageConfig read_storage(ConfigReader& layer);

// What one rank's table needs, for the choice of location.
struct StorageNeeds {
  std::int64_t rows = 0;             // the rank's capacity
  std::uint64_t row_bytes = 0;       // one row's values, optimizer state and step
  std::uint64_t index_bytes = 0;     // on the device wherever the rows are (hash table, keys)
  std::uint64_t slot_map_bytes = 0;  // the host location's row -> cache slot map (device)
  int host_sharers = 1;              // ranks of this process holding host tables at once
};

// What is available: device memory (a CUDA place) and host memory.
struct MemoryAvailable {
  bool device_is_host = false;  // CPU ranks: no device to fit
  std::uint64_t device_free = 0, device_total = 0;
  std::uint64_t host_available = 0;
};

// Device memory kept free for the dense network, its activations, the input pipeline's slots
// and the cache's staging buffers: 10 % of the device, at least 2 GiB.
std::uint64_t device_reserve_bytes(std::uint64_t device_total);

struct StorageDecision {
  StorageLocation location = StorageLocation::Device;  // Device or Host
  std::int64_t cache_rows = 0;                         // Host: rows the device caches
  std::string log_line;  // auto's one line with the numbers (empty when nothing to say)
};

// Chooses where the rows go; throws ConfigError (bad numbers) or OutOfMemoryError (fits in
// neither, a cache larger than the device can hold, a host table larger than the host) naming
// `where` and the numbers.
StorageDecision decide_storage(const StorageConfig& config, const StorageNeeds& needs,
                               const MemoryAvailable& available, const std::string& where);

// MemAvailable of /proc/meminfo (0 when it cannot be read).
std::uint64_t host_available_bytes();

}  // namespace ember::embedding
