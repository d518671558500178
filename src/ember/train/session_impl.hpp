// Session's state shared by its files (session.cpp: construction, the training loop,
// checkpoints; session_eval.cpp: evaluation and prediction). Not installed for users.
#pragma once

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "ember/distributed/collectives.hpp"
#include "ember/train/rank_team.hpp"
#include "ember/train/replica.hpp"
#include "ember/train/run_log.hpp"
#include "ember/train/session.hpp"

namespace ember::train {

struct Session::Impl {
  std::vector<Place> places;
  std::vector<distributed::CommunicatorPtr> comms;
  std::unique_ptr<RankTeam> team;
  std::vector<std::unique_ptr<Replica>> replicas;
  RunLog log;
  std::ostream* out = &std::cout;
};

// "0.512345": six significant digits, as the display and evaluation lines print numbers.
std::string format_number(double v);

}  // namespace ember::train
