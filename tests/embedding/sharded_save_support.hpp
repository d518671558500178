// The embedding problem the sharded-save tests (CPU and GPU) train, save and load: five slots of
// odd sizes (one of a single key), width 7, u32 keys, LazyGlobal updates, 12-sample batches of
// up to 3 keys a slot (one for the hybrid, whose frequent keys are the batches' 20 most used).
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "embedding_reference_support.hpp"
#include "ember/embedding/embedding_config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::embedding::testing {

inline const std::vector<std::int64_t> kShardedSizes = {700, 1, 3000, 1023, 65};

// `steps` training batches of the problem for `type` with optimizer `ot`.
Problem sharded_save_problem(EmbeddingType type, optim::OptimizerType ot, int steps,
                             std::mt19937_64& rng);

// The same problem with its table on the host and 200 rows cached on the device (a batch and
// the next prefetched: up to 2 x 12 x 5 x 3 rows).
Problem on_host(Problem p);

// The same problem loading `dir` and taking no step: its result is the loaded model.
Problem loading(Problem p, const std::filesystem::path& dir);

}  // namespace ember::embedding::testing
