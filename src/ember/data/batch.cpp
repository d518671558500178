#include "ember/data/batch.hpp"

#include <algorithm>

#include "ember/core/error.hpp"

namespace ember::data {

void DeviceBatch::wait(StreamHandle stream) const {
  if (ready) ready->block(stream);
}

std::vector<Share> split_evenly(std::int64_t n, int parts) {
  EMBER_CHECK(parts > 0, "split_evenly needs at least one part, got ", parts);
  EMBER_CHECK(n >= 0, "split_evenly of a negative count ", n);
  std::vector<Share> shares(static_cast<std::size_t>(parts));
  const std::int64_t block = (n + parts - 1) / parts;
  for (int d = 0; d < parts; ++d) {
    const std::int64_t begin = std::min(n, d * block);
    shares[static_cast<std::size_t>(d)] = {begin, std::min(n, begin + block) - begin};
  }
  return shares;
}

}  // namespace ember::data
