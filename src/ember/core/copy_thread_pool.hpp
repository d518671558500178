// A small pool of persistent threads for the host side of large copies (parallel memcpy, the
// staged pageable copies). Starting threads for every copy costs tens of microseconds each time;
// these threads are started once and sleep between jobs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ember::detail {

class CopyThreadPool {
 public:
  CopyThreadPool() = default;
  // Stops and joins the workers.
  ~CopyThreadPool();
  CopyThreadPool(const CopyThreadPool&) = delete;
  CopyThreadPool& operator=(const CopyThreadPool&) = delete;

  // The process-wide pool (created on first use, never destroyed: copies may run during static
  // destruction).
  static CopyThreadPool& shared();

  // Runs body(0) .. body(threads - 1) at the same time, body(0) on the calling thread, and
  // returns when all have returned; the first exception a body throws is rethrown here. When
  // the pool is already running a job (another thread's copy, or a body that copies again) the
  // caller runs body(0) alone and the call returns 1; otherwise it returns `threads`. Bodies
  // must therefore split their work dynamically and make progress with any number of threads.
  int run(int threads, const std::function<void(int)>& body);

  // Worker threads started so far (the caller is not counted).
  int workers() const;

 private:
  void work(int index);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::mutex job_mutex_;  // held by the caller of run() for the whole job
  std::vector<std::thread> threads_;
  const std::function<void(int)>* body_ = nullptr;
  std::uint64_t generation_ = 0;
  int job_threads_ = 0;  // workers taking part in the current job
  int running_ = 0;      // of those, still running
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ember::detail
