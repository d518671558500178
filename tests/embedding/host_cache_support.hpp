// Problems for host tables with a device cache (the "host" storage location), shared by the CPU
// and GPU tests: slots large enough that a 1 % cache holds far fewer rows than the batches use,
// skewed keys (a few hot, many cold, as real data is).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "embedding_reference_support.hpp"

namespace ember::embedding::testing {

// The default slot sizes of cache problems.
const std::vector<std::int64_t>& cache_slot_sizes();

EmbeddingConfig cache_config(EmbeddingType type, Combiner combiner, std::uint64_t seed,
                             const std::vector<std::int64_t>& slot_sizes = cache_slot_sizes(),
                             std::int64_t vec_size = 8);

optim::OptimizerConfig cache_optimizer(optim::OptimizerType type, optim::UpdateType update);

// key = slot begin + size * u^4 (u uniform): skewed towards each slot's first keys.
HostBatch skewed_batch(std::int64_t batch, const std::vector<std::int64_t>& slot_sizes,
                       std::mt19937_64& rng);

// `steps` batches of `batch` samples over the config's slots, an evaluation batch now and then.
Problem make_cache_problem(const EmbeddingConfig& c, const optim::OptimizerConfig& o, int steps,
                           std::mt19937_64& rng, std::int64_t batch = 6);

// The problem with a host table caching `ratio` of each rank's rows.
Problem with_storage(Problem p, double ratio, bool prefetch,
                     EvictionPolicy policy = EvictionPolicy::LfuHistory,
                     HostMemory memory = HostMemory::Pinned);

// A counter summed over the ranks.
std::int64_t total(const RunResult& r, std::int64_t CacheStats::*field);

}  // namespace ember::embedding::testing
