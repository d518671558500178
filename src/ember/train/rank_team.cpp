#include "ember/train/rank_team.hpp"

#include "ember/core/device.hpp"

namespace ember::train {

RankTeam::RankTeam(std::vector<Place> places) : places_(std::move(places)) {
  if (places_.size() > 1) {
    for (int r = 0; r < size(); ++r)
      threads_.emplace_back([this, r] { worker(r); });
  }
}

RankTeam::~RankTeam() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void RankTeam::call(int rank, const std::function<void(int)>& fn) {
  const Place p = places_[static_cast<std::size_t>(rank)];
  try {
    if (p.is_cuda()) {
      DeviceGuard guard(p.device());
      fn(rank);
    } else {
      fn(rank);
    }
  } catch (const std::exception& e) {
    // Recorded before the hook, which may wake the other ranks with errors of their own: run()
    // rethrows this one, the cause.
    if (!threads_.empty()) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (on_error_) on_error_(rank, e);
    throw;
  }
}

void RankTeam::run(const std::function<void(int)>& fn) {
  if (threads_.empty()) {
    call(0, fn);
    return;
  }
  std::unique_lock lock(mutex_);
  task_ = &fn;
  pending_ = size();
  error_ = nullptr;
  ++generation_;
  work_ready_.notify_all();
  work_done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void RankTeam::worker(int rank) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* task;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr failure;
    try {
      call(rank, *task);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      if (--pending_ == 0) work_done_.notify_all();
    }
  }
}

}  // namespace ember::train
