#include "ember/core/copy_thread_pool.hpp"

#include <algorithm>
#include <system_error>

namespace ember::detail {

CopyThreadPool::~CopyThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_)
    t.join();
}

CopyThreadPool& CopyThreadPool::shared() {
  static CopyThreadPool* pool = new CopyThreadPool();
  return *pool;
}

int CopyThreadPool::workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(threads_.size());
}

int CopyThreadPool::run(int threads, const std::function<void(int)>& body) {
  std::unique_lock<std::mutex> job(job_mutex_, std::try_to_lock);
  if (threads <= 1 || !job.owns_lock()) {
    body(0);
    return 1;
  }
  const int helpers = threads - 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Threads that fail to start leave the job to fewer helpers; the bodies cope with that.
    try {
      while (static_cast<int>(threads_.size()) < helpers) {
        const int index = static_cast<int>(threads_.size());
        threads_.emplace_back([this, index] { work(index); });
      }
    } catch (const std::system_error&) {
    }
    body_ = &body;
    job_threads_ = std::min(helpers, static_cast<int>(threads_.size()));
    running_ = job_threads_;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::exception_ptr own_error;
  try {
    body(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return running_ == 0; });
  body_ = nullptr;
  const int ran = job_threads_ + 1;
  std::exception_ptr error = own_error != nullptr ? own_error : error_;
  error_ = nullptr;
  lock.unlock();
  if (error != nullptr) std::rethrow_exception(error);
  return ran;
}

void CopyThreadPool::work(int index) {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_threads_) continue;
    const std::function<void(int)>* body = body_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*body)(index + 1);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error != nullptr && error_ == nullptr) error_ = error;
    if (--running_ == 0) done_.notify_all();
  }
}

}  // namespace ember::detail
