// HybridSparseEmbedding's statistics pass (HugeCTR's): before the layers are built, the keys of
// the first num_iterations_statistics training batches are counted and each hybrid layer's
// frequent categories chosen from them (embedding/hybrid_frequent.hpp). Every process reads the
// same samples (the training source from its start, one reader, in file order), so every rank
// gets the same categories.
#pragma once

#include "ember/train/model_config.hpp"

namespace ember::train {

// Fills config.embeddings[i].hybrid.frequent_keys of every HybridSparseEmbedding, for a job of
// `ranks` ranks in `processes` processes, and logs one line per layer. Does nothing (and reads
// nothing) when the model has no hybrid layer. `half_activations`: the network computes in 16
// bits (mixed precision on CUDA), so the layers exchange 16-bit vectors (the traffic rule's e).
void choose_hybrid_frequent_categories(ModelConfig& config, int ranks, int processes,
                                       bool half_activations);

}  // namespace ember::train
