// ProcessVote in a world of one process (no MPI job): each call answers the round cast
// rounds_late calls before with this process's own vote. The MPI rounds are checked under mpirun
// by ember_collectives_mpi_check (collectives_mpi_main.cpp).
#include "ember/distributed/process_vote.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "ember/core/error.hpp"

namespace ember::distributed {
namespace {

TEST(ProcessVote, OneProcessAnswersEachRoundRoundsLate) {
  const std::vector<bool> votes = {true, false, false, true, true, false, false, false, false};
  for (int late : {1, 2, 4}) {
    auto vote = ProcessVote::open(late);
    for (std::size_t r = 0; r < votes.size(); ++r) {
      const bool want = r >= static_cast<std::size_t>(late) && votes[r - late];
      EXPECT_EQ(vote->next(votes[r]), want) << "round " << r << ", " << late << " rounds late";
    }
  }
  EXPECT_THROW((void)ProcessVote::open(0), Error);
}

}  // namespace
}  // namespace ember::distributed
