#include "ember/data/batch.hpp"

#include "ember/core/error.hpp"

namespace ember::data {

void DeviceBatch::wait(StreamHandle stream) const {
  if (ready) ready->block(stream);
}

std::vector<Share> split_evenly(std::int64_t n, int parts) {
  EMBER_CHECK(parts > 0, "split_evenly needs at least one part, got ", parts);
  EMBER_CHECK(n >= 0, "split_evenly of a negative count ", n);
  std::vector<Share> shares(static_cast<std::size_t>(parts));
  const std::int64_t base = n / parts, extra = n % parts;
  std::int64_t at = 0;
  for (int d = 0; d < parts; ++d) {
    shares[static_cast<std::size_t>(d)] = {at, base + (d < extra ? 1 : 0)};
    at += shares[static_cast<std::size_t>(d)].size;
  }
  return shares;
}

}  // namespace ember::data
