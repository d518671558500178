#include "host_cache_support.hpp"

#include <cmath>

namespace ember::embedding::testing {

const std::vector<std::int64_t>& cache_slot_sizes() {
  static const std::vector<std::int64_t> sizes = {7000, 20000, 3000, 50000, 11000};
  return sizes;
}

EmbeddingConfig cache_config(EmbeddingType type, Combiner combiner, std::uint64_t seed,
                             const std::vector<std::int64_t>& slot_sizes, std::int64_t vec_size) {
  return small_config(type, combiner, DType::I64, vec_size, seed, slot_sizes, 20000);
}

optim::OptimizerConfig cache_optimizer(optim::OptimizerType type, optim::UpdateType update) {
  return test_optimizer(type, update, 3);
}

HostBatch skewed_batch(std::int64_t batch, const std::vector<std::int64_t>& slot_sizes,
                       std::mt19937_64& rng) {
  HostBatch h;
  h.batch = batch;
  h.offsets.push_back(0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::int64_t begin = 0;
  std::vector<std::int64_t> first;
  for (std::int64_t size : slot_sizes) {
    first.push_back(begin);
    begin += size;
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::size_t s = 0; s < slot_sizes.size(); ++s) {
      const int nnz = static_cast<int>(rng() % 4);
      for (int k = 0; k < nnz; ++k) {
        const double x = std::pow(u(rng), 4.0);
        h.keys.push_back(first[s] +
                         static_cast<std::int64_t>(x * static_cast<double>(slot_sizes[s])));
      }
      h.offsets.push_back(static_cast<std::int64_t>(h.keys.size()));
    }
  }
  return h;
}

Problem make_cache_problem(const EmbeddingConfig& c, const optim::OptimizerConfig& o, int steps,
                           std::mt19937_64& rng, std::int64_t batch) {
  Problem p;
  p.config = c;
  p.optimizer = o;
  const std::vector<std::int64_t> sizes =
      c.slot_size_array.empty() ? cache_slot_sizes() : c.slot_size_array;
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(skewed_batch(batch, sizes, rng));
    p.grads.push_back(random_grad(batch * c.slot_num * c.vec_size, rng));
    p.training.push_back(t % 7 != 5);  // an evaluation batch now and then
  }
  return p;
}

Problem with_storage(Problem p, double ratio, bool prefetch, EvictionPolicy policy,
                     HostMemory memory) {
  p.config.storage.location = StorageLocation::Host;
  p.config.storage.cache_ratio = ratio;
  p.config.storage.policy = policy;
  p.config.storage.host_memory = memory;
  p.prefetch = prefetch;
  return p;
}

std::int64_t total(const RunResult& r, std::int64_t CacheStats::*field) {
  std::int64_t sum = 0;
  for (const CacheStats& s : r.cache_stats)
    sum += s.*field;
  return sum;
}

}  // namespace ember::embedding::testing
