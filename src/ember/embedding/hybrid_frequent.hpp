// Which categories a HybridSparseEmbedding replicates on every rank, from the key counts of its
// statistics pass (the first num_iterations_statistics training batches).
//
// A category is frequent when it was counted at least `threshold` times. With frequent_rule
// "hugectr" (the default) the threshold is HugeCTR's for the layer's communication_type:
//   NVLink_SingleNode:  B x N x sqrt(2 p_dup_max / (M (M - 1))), M = B / ranks
//                       (a category that often is likely to repeat within one rank's batch);
//   IB_NVLink, IB_NVLink_Hierarchical:
//                       N x n x (max_all_to_all_bandwidth / max_all_reduce_bandwidth)
//                         x efficiency_bandwidth_ratio x n / (n - 1), n = processes
//                       (infinite on one process: nothing is frequent, as in HugeCTR);
// With frequent_rule "traffic" it is the count above which replicating a row moves fewer bytes
// than exchanging its vectors:
//   N x D x (4 / e) x (max_all_to_all_bandwidth / max_all_reduce_bandwidth)
//     x efficiency_bandwidth_ratio, D = ranks, e = bytes of an exchanged vector element
//   (infinite on one rank: nothing moves, nothing to save). Per step and rank, an infrequent
//   lookup sends its vector to the requesting rank and its gradient back with probability
//   (D - 1) / D, 2 (D - 1) / D x V x e bytes spread over D ranks; a frequent row costs its f32
//   gradient sums' all-reduce, 2 (D - 1) / D x V x 4 bytes on every rank. Replicating pays for
//   a row looked up more than D x 4 / e times a batch, weighted by the two collectives' speeds.
// B is the training batch, N the batches counted. As in HugeCTR the count of such categories is
// then rounded up to a multiple of the rank count (less one multiple if that passes the distinct
// categories seen). Ember then keeps at most max_num_frequent_categories x max(batch,
// eval batch) of them, the most counted first (ties: the smaller key), where HugeCTR stops with
// an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/embedding/embedding_config.hpp"

namespace ember::embedding {

// What the rule needs besides the layer's keys.
struct FrequentChoiceInputs {
  std::int64_t batch_size = 0;       // the global training batch
  std::int64_t batch_size_eval = 0;  // the evaluation batch (for the cap)
  double batches = 0;                // batches counted (samples counted / batch_size)
  int ranks = 1;                     // HugeCTR's num_networks (GPUs)
  int processes = 1;                 // HugeCTR's num_nodes
  int exchange_bytes = 4;            // bytes of an exchanged vector element (2 when 16-bit)
};

struct FrequentChoice {
  std::vector<std::int64_t> keys;     // the frequent categories, ascending
  double threshold = 0;               // counts at least this make a category frequent
  std::int64_t above_threshold = 0;   // categories that reached it
  std::int64_t cap = 0;               // max_num_frequent_categories x the larger batch
  bool capped = false;                // more reached the threshold than the cap keeps
  std::int64_t distinct = 0;          // distinct categories counted
  std::int64_t lookups = 0;           // keys counted
  std::int64_t frequent_lookups = 0;  // of them, lookups of the frequent categories
  // Under frequent_rule "hugectr": how many categories reach the traffic rule's threshold
  // (before rounding and the cap; 0 on one rank), for the log line; -1 under "traffic".
  std::int64_t traffic_rule_count = -1;
  // "12 frequent categories (of 840 seen in 4800 lookups; 12 counted >= 2.83 times,
  // NVLink_SingleNode), 41.5 % of the lookups"
  std::string describe(const HybridConfig& config) const;
};

// The count threshold of the layer's rule (above); +infinity when nothing can be frequent.
double frequent_count_threshold(const HybridConfig& config, const FrequentChoiceInputs& in);

// The frequent categories among `keys` (every key of the counted batches, with repeats; they
// are sorted in place).
FrequentChoice choose_frequent_categories(std::vector<std::int64_t>& keys,
                                          const HybridConfig& config,
                                          const FrequentChoiceInputs& in);

}  // namespace ember::embedding
