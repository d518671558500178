#include "ember/distributed/process_vote.hpp"

#include <exception>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/distributed/mpi_check.hpp"
#include "ember/distributed/process_world.hpp"

namespace ember::distributed {

// The rounds in flight form a ring: slot i holds the round cast i, i + K, i + 2K, ... calls in.
struct ProcessVote::State {
#if EMBER_WITH_MPI
  MPI_Comm comm = MPI_COMM_NULL;  // null: a world of one process
  std::vector<MPI_Request> requests;
#endif
  std::vector<int> mine;  // each slot's vote (MPI reads it until its round completes)
  std::vector<int> any;   // each slot's answer
  std::vector<bool> cast;
  std::size_t slot = 0;
};

std::unique_ptr<ProcessVote> ProcessVote::open(int rounds_late) {
  EMBER_CHECK(rounds_late >= 1, "ProcessVote: rounds_late must be at least 1, got ", rounds_late);
  auto s = std::make_unique<State>();
  const auto k = static_cast<std::size_t>(rounds_late);
  s->mine.assign(k, 0);
  s->any.assign(k, 0);
  s->cast.assign(k, false);
#if EMBER_WITH_MPI
  s->requests.assign(k, MPI_REQUEST_NULL);
  const ProcessWorld w = process_world();
  if (w.mpi && w.size > 1) EMBER_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s->comm));
#endif
  return std::unique_ptr<ProcessVote>(new ProcessVote(std::move(s)));
}

ProcessVote::ProcessVote(std::unique_ptr<State> state) : state_(std::move(state)) {}

ProcessVote::~ProcessVote() {
#if EMBER_WITH_MPI
  State& s = *state_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Unwinding from an error: the other processes may never cast the rounds still open (they
  // wait for this one elsewhere), so waiting here could hang the job that the error is about to
  // end (abort_processes). The open rounds and the communicator are left to MPI's end.
  if (s.comm == MPI_COMM_NULL || finalized || std::uncaught_exceptions() > 0) return;
  for (MPI_Request& r : s.requests) {
    if (r != MPI_REQUEST_NULL) (void)MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  (void)MPI_Comm_free(&s.comm);
#endif
}

bool ProcessVote::next(bool mine) {
  State& s = *state_;
  const std::size_t i = s.slot;
  s.slot = (s.slot + 1) % s.mine.size();
  bool answer = false;
#if EMBER_WITH_MPI
  if (s.comm != MPI_COMM_NULL) {
    if (s.cast[i]) {
      EMBER_MPI_CHECK(MPI_Wait(&s.requests[i], MPI_STATUS_IGNORE));
      answer = s.any[i] != 0;
    }
    s.mine[i] = mine ? 1 : 0;
    EMBER_MPI_CHECK(
        MPI_Iallreduce(&s.mine[i], &s.any[i], 1, MPI_INT, MPI_MAX, s.comm, &s.requests[i]));
    s.cast[i] = true;
    return answer;
  }
#endif
  answer = s.cast[i] && s.mine[i] != 0;
  s.mine[i] = mine ? 1 : 0;
  s.cast[i] = true;
  return answer;
}

}  // namespace ember::distributed
