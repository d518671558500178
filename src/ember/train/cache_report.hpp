// The host-backed embeddings' cache figures over each display window, summed over the ranks and
// the embeddings that have a host table: one line in the run's output and rows in metrics.csv
// (phase train):
//
//   cache iter=200 hit_rate=0.912 fetched/step=1834 written_back/step=1790 new/step=12
//     MB/step=7.51 prefetched=1 exposed_ms/step=0.04 host_ms/step=3.2 readback_ms/step=0.4
//
//   cache_hit_rate            cached rows / distinct existing rows the batches used
//   cache_fetched_per_step    rows brought from the host per step (and rank)
//   cache_written_back_per_step  rows written back to the host per step (and rank)
//   cache_mb_per_step         MB moved between host and device per step (and rank), both ways
//   cache_prefetched          share of batches whose rows were staged ahead of their step
//   cache_exposed_ms_per_step time a step waited for its rows (0: the prefetch was hidden)
//   cache_host_ms_per_step    host time preparing the next batch's rows ahead, per step (and
//                             table): the step cannot be shorter where the host is the bound
//   cache_readback_ms_per_step  of it, time waiting for the device's distinct rows of the batch
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "ember/embedding/host_backed_rows.hpp"
#include "ember/train/run_log.hpp"

namespace ember::train {

class Replica;

// One display window's figures (per step and rank where it says so).
struct CacheFigures {
  std::int64_t iteration = 0;  // the window's last iteration
  double hit_rate = 1;
  double fetched_per_step = 0, written_back_per_step = 0, new_per_step = 0;
  double mb_per_step = 0;
  double prefetched = 0;
  double exposed_ms_per_step = 0;
  double host_ms_per_step = 0, readback_ms_per_step = 0;
};

class CacheReport {
 public:
  // Whether any embedding of the replicas keeps a host table.
  static bool wanted(const std::vector<std::unique_ptr<Replica>>& replicas);

  // The figures since the last call, written to `out` and `log` (the counters are read on the
  // host, no replica thread is needed). Nothing when no embedding has a host table.
  std::optional<CacheFigures> report(std::int64_t iteration,
                                     const std::vector<std::unique_ptr<Replica>>& replicas,
                                     std::int64_t steps, RunLog& log, std::ostream& out);

 private:
  embedding::CacheStats last_;
};

}  // namespace ember::train
