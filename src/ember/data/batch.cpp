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

std::vector<Share> local_shares(std::int64_t n, const RankSlice& slice, int local_ranks) {
  const int world = slice.world_ranks > 0 ? slice.world_ranks : local_ranks;
  EMBER_CHECK(slice.first_rank >= 0 && slice.first_rank + local_ranks <= world,
              "local_shares: ranks ", slice.first_rank, "..", slice.first_rank + local_ranks - 1,
              " are not ranks of ", world);
  const std::vector<Share> all = split_evenly(n, world);
  return {all.begin() + slice.first_rank, all.begin() + slice.first_rank + local_ranks};
}

}  // namespace ember::data
