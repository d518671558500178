// Threads of one process standing for the processes of a job: a ProcessExchange over an in-memory
// rendezvous, for tests and benchmarks of shared reading (key_exchange.hpp) without MPI. Each
// message is copied in once (the sender's) and out once per receiver, as a shared-memory
// transport copies it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/data/key_exchange.hpp"

namespace ember::data {

// An all-gather among `n` threads: each arrival returns once every participant has made its own.
// A participant that never comes (its simulated process failed) ends the others' wait with an
// error after `timeout`, as the MPI backend's does, so a broken reader fails instead of hanging.
class ThreadRendezvous {
 public:
  explicit ThreadRendezvous(int n, std::chrono::seconds timeout = std::chrono::seconds(60));
  int size() const { return n_; }
  // This round's messages in participant order, once every participant has sent its own. They
  // stay valid until participant `p` arrives again: no later round can complete without it. An
  // arrival that times out is taken back (the round still waits for it).
  const std::vector<std::vector<std::byte>>& arrive(int p, const std::vector<std::byte>& mine);

 private:
  int n_;
  std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<std::byte>> pending_, done_;
  int arrived_ = 0;
  std::int64_t generation_ = 0;
};

// Participant `process` of a rendezvous, as a process's exchange.
class ThreadExchange final : public ProcessExchange {
 public:
  ThreadExchange(std::shared_ptr<ThreadRendezvous> rendezvous, int process);
  int process() const override { return process_; }
  int processes() const override { return rendezvous_->size(); }
  std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) override;
  // Straight from the round's messages into `all` (one copy out, as the MPI channel's).
  void all_gather_into(const std::vector<std::byte>& mine, GatheredMessages& all) override;

 private:
  std::shared_ptr<ThreadRendezvous> rendezvous_;
  int process_;
};

}  // namespace ember::data
