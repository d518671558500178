// Session's state shared by its files (session.cpp: construction, the training loop,
// checkpoints; session_eval.cpp: evaluation and prediction). Not installed for users.
#pragma once

#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ember/data/batch.hpp"
#include "ember/data/data_source.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/train/rank_team.hpp"
#include "ember/train/replica.hpp"
#include "ember/train/run_log.hpp"
#include "ember/train/session.hpp"
#include "ember/train/session_job.hpp"

namespace ember::train {

// HugeCTR's cache_eval_data: the batches of the first evaluation, kept on the training devices
// and used again at the later evaluations, so the evaluation data is read once.
struct EvalCache {
  std::int64_t limit = 0;  // batches it may hold; -1: any number; 0: off (or given up)
  std::vector<data::Batch> batches;
  bool complete = false;  // holds a whole evaluation
};

struct Session::Impl {
  SessionJob job;
  std::vector<Place> places;  // this process's ranks (job.places)
  std::vector<distributed::CommunicatorPtr> comms;
  std::unique_ptr<RankTeam> team;
  std::vector<std::unique_ptr<Replica>> replicas;
  RunLog log;
  std::ostream* out = &std::cout;
  EvalCache eval_cache;
  bool has_stepped = false;    // a training step ran since construction or the last load()
  PartTimer* parts = nullptr;  // Session::set_part_timer
  // Where the display lines of processes other than process 0 go.
  std::ostream discarded{nullptr};
};

// The labels the model's loss takes: the data readers check every sample's labels against them
// (and its label and dense values for NaN and infinities), as the Data layer's
// bad_sample_policy says.
data::DataSourceOptions data_source_options(const Replica& replica);

// "0.512345": six significant digits, as the display and evaluation lines print numbers.
std::string format_number(double v);

}  // namespace ember::train
