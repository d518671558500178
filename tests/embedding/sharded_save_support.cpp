#include "sharded_save_support.hpp"

#include "ember/embedding/storage_config.hpp"

namespace ember::embedding::testing {

Problem sharded_save_problem(EmbeddingType type, optim::OptimizerType ot, int steps,
                             std::mt19937_64& rng) {
  Problem p;
  p.config.name = "emb";
  p.config.type = type == EmbeddingType::Hybrid ? EmbeddingType::LocalizedSlotOneHot : type;
  p.config.vec_size = 7;
  p.config.slot_num = static_cast<std::int64_t>(kShardedSizes.size());
  p.config.max_vocabulary_size_per_gpu = 6000;
  if (type != EmbeddingType::DistributedSlotHash) p.config.slot_size_array = kShardedSizes;
  p.config.key_dtype = DType::U32;
  p.config.seed = rng();
  p.optimizer = test_optimizer(ot, optim::UpdateType::LazyGlobal);
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(
        random_batch(12, kShardedSizes, type == EmbeddingType::Hybrid ? 1 : 3, rng));
    p.grads.push_back(random_grad(12 * p.config.slot_num * 7, rng));
    p.training.push_back(true);
  }
  if (type == EmbeddingType::Hybrid) {
    p.config.hybrid.frequent_keys = most_used_keys(p, 20);
    p.config.type = EmbeddingType::Hybrid;
  }
  return p;
}

Problem on_host(Problem p) {
  p.config.storage.location = StorageLocation::Host;
  p.config.storage.cache_rows = 200;
  p.prefetch = true;
  return p;
}

Problem loading(Problem p, const std::filesystem::path& dir) {
  p.load_before = dir;
  p.first_step = p.batches.size();
  return p;
}

}  // namespace ember::embedding::testing
