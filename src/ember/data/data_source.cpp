#include "ember/data/data_source.hpp"

#include "ember/core/log.hpp"

namespace ember::data {

void ReadCounters::record_drop(const std::string& file, std::int64_t sample_index) {
  const std::int64_t n = dropped.fetch_add(1) + 1;
  std::lock_guard lock(mutex_);
  if (drops_.size() < kKeptDrops) {
    drops_.push_back({file, sample_index});
    EMBER_LOG_WARN("'{}': sample {} dropped: checksum mismatch", file, sample_index);
  } else if (n == static_cast<std::int64_t>(kKeptDrops) + 1) {
    EMBER_LOG_WARN("more samples dropped by checksum mismatches; only the count is kept now");
  }
}

std::vector<ReadCounters::Drop> ReadCounters::first_drops() const {
  std::lock_guard lock(mutex_);
  return drops_;
}

}  // namespace ember::data
