// Simulated processes for shared reading tests (key_exchange.hpp): pipelines of one test, as
// threads, whose exchange is a rendezvous.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/key_exchange.hpp"
#include "ember/data/pipeline.hpp"

namespace ember::data::datatest {

// An all-gather among `n` threads: each call returns once every participant has made its own.
// A participant that never comes (its simulated process failed) ends the wait with an error after
// a minute, as the MPI backend's timeout does, so a broken reader fails the test instead of
// hanging it.
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n), pending_(static_cast<std::size_t>(n)) {}

  std::vector<std::vector<std::byte>> all_gather(int p, const std::vector<std::byte>& mine) {
    std::unique_lock lock(mutex_);
    const std::int64_t generation = generation_;
    pending_[static_cast<std::size_t>(p)] = mine;
    if (++arrived_ == n_) {
      // Nobody can arrive for the next round before every participant has left this one.
      done_ = pending_;
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return done_;
    }
    if (!changed_.wait_for(lock, std::chrono::seconds(60),
                           [&] { return generation_ != generation; })) {
      throw std::runtime_error(cat("simulated process ", p, ": ", n_ - arrived_, " of ", n_,
                                   " processes never reached the exchange"));
    }
    return done_;
  }

 private:
  int n_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<std::byte>> pending_, done_;
  int arrived_ = 0;
  std::int64_t generation_ = 0;
};

class ThreadExchange final : public ProcessExchange {
 public:
  ThreadExchange(std::shared_ptr<Rendezvous> hub, int p, int n)
      : hub_(std::move(hub)), p_(p), n_(n) {}
  int process() const override { return p_; }
  int processes() const override { return n_; }
  std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) override {
    return hub_->all_gather(p_, mine);
  }

 private:
  std::shared_ptr<Rendezvous> hub_;
  int p_, n_;
};

// `processes` pipelines of simulated processes, made at once (their construction agrees on the
// reader worker count through the exchange): process p's with `options(p)` and an exchange
// among them.
inline std::vector<std::unique_ptr<Pipeline>> process_pipelines(
    int processes, const std::function<std::shared_ptr<DataSource>()>& source,
    const std::function<PipelineOptions(int)>& options) {
  auto hub = std::make_shared<Rendezvous>(processes);
  std::vector<std::future<std::unique_ptr<Pipeline>>> made;
  for (int p = 0; p < processes; ++p) {
    made.push_back(std::async(std::launch::async, [&, p] {
      PipelineOptions o = options(p);
      o.exchange = std::make_shared<ThreadExchange>(hub, p, processes);
      return std::make_unique<Pipeline>(source(), o);
    }));
  }
  std::vector<std::unique_ptr<Pipeline>> out;
  for (auto& f : made)
    out.push_back(f.get());
  return out;
}

// The next batch of every pipeline, in order.
inline std::vector<std::optional<Batch>> next_of_each(
    const std::vector<std::unique_ptr<Pipeline>>& pipelines) {
  std::vector<std::optional<Batch>> out;
  for (const auto& p : pipelines)
    out.push_back(p->next());
  return out;
}

}  // namespace ember::data::datatest
