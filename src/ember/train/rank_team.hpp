// One thread per rank, kept for the whole run: run(fn) calls fn(rank) on every rank at once and
// returns when all are done, rethrowing the first failure. Each rank's thread makes its device
// current, so CUDA work and thread-local streams stay with the rank. One rank runs inline.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ember/core/place.hpp"

namespace ember::train {

class RankTeam {
 public:
  explicit RankTeam(std::vector<Place> places);
  ~RankTeam();
  RankTeam(const RankTeam&) = delete;
  RankTeam& operator=(const RankTeam&) = delete;

  int size() const { return static_cast<int>(places_.size()); }
  void run(const std::function<void(int rank)>& fn);
  // Called on the failing rank's thread the moment it fails, before run() returns (which waits
  // for every rank): the other ranks may be waiting for the failed one in a collective, and the
  // hook must free them (Communicator::abort in one process; a job of several processes ends
  // there). run() rethrows the first rank's failure, not the errors the others meet after it.
  void on_error(std::function<void(int rank, const std::exception& e)> hook) {
    on_error_ = std::move(hook);
  }

 private:
  void worker(int rank);
  void call(int rank, const std::function<void(int)>& fn);

  std::vector<Place> places_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  const std::function<void(int)>* task_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::function<void(int, const std::exception&)> on_error_;
};

}  // namespace ember::train
