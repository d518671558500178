// The host backends' reduction: element i of `out` is the reduction, in rank order, of element
// `first + i` of every rank's contribution (sources[p] is rank p's, of out's dtype). Summing in
// the same order is what makes the in-process and the MPI backends agree to the bit.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/distributed/collectives.hpp"

namespace ember::distributed {

void reduce_in_rank_order(const Tensor& out, const std::vector<const void*>& sources,
                          std::int64_t first, ReduceOp op);

}  // namespace ember::distributed
