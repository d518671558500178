// A vote among the processes of a job ("did any process ask?") that runs beside the caller's
// work instead of stopping it: a round cast by one call of next() is answered by a call
// `rounds_late` calls later, so a call waits for the other processes only when a round has not
// completed in all that time.
//
// The training loop asks every step whether any process was asked to stop. A blocking
// all-gather there (all_gather_processes, from the main thread) waited a median 9.6-10.1 ms, p90
// 16-17 ms, when a second thread of each process was moving 7 MB all-gathers over its own
// channel, as the input pipeline's key exchange does (MPI serves both threads; 19-36 us with
// nothing beside it). This vote answered 4 rounds late took a median 5-7 us, p90 8-12 us, in the
// same runs; 1 and 2 rounds late still waited milliseconds at p90 (bench_process_vote, 2 and 3
// processes on the 2-core development machine, a step every 2 ms). Every process still decides
// at the same step, `rounds_late` steps after the one asked.
#pragma once

#include <memory>

namespace ember::distributed {

class ProcessVote {
 public:
  // Made by every process, in the same order with respect to the other process-level calls (it
  // duplicates the world's communicator: a collective call). In a world of one process the vote
  // is local (its answers come as late).
  static std::unique_ptr<ProcessVote> open(int rounds_late = 4);
  // Completes the rounds still open (every process cast them); while an exception unwinds, it
  // leaves them open instead of waiting for processes that may never cast them.
  ~ProcessVote();
  ProcessVote(const ProcessVote&) = delete;
  ProcessVote& operator=(const ProcessVote&) = delete;

  // Casts `mine` for this round; returns whether any process cast true in the round cast
  // rounds_late calls before (false for the first rounds_late calls). Every process calls it the
  // same number of times.
  bool next(bool mine);

 private:
  struct State;
  explicit ProcessVote(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ember::distributed
