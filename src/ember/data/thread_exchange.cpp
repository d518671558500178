#include "ember/data/thread_exchange.hpp"

#include <cstring>
#include <utility>

#include "ember/core/error.hpp"

namespace ember::data {

ThreadRendezvous::ThreadRendezvous(int n, std::chrono::seconds timeout)
    : n_(n), timeout_(timeout), pending_(static_cast<std::size_t>(n)) {
  EMBER_CHECK(n >= 1, "ThreadRendezvous: ", n, " participants; at least 1");
}

const std::vector<std::vector<std::byte>>& ThreadRendezvous::arrive(
    int p, const std::vector<std::byte>& mine) {
  EMBER_CHECK(p >= 0 && p < n_, "ThreadRendezvous: participant ", p, " of ", n_);
  std::unique_lock lock(mutex_);
  const std::int64_t generation = generation_;
  pending_[static_cast<std::size_t>(p)] = mine;
  if (++arrived_ == n_) {
    done_ = std::move(pending_);
    pending_.assign(static_cast<std::size_t>(n_), {});
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
  } else if (!changed_.wait_for(lock, timeout_, [&] { return generation_ != generation; })) {
    // Take the arrival back, so that a later round cannot complete with this participant counted
    // twice and another one's message missing.
    const int missing = n_ - arrived_;
    --arrived_;
    pending_[static_cast<std::size_t>(p)].clear();
    EMBER_THROW("simulated process ", p, ": ", missing, " of ", n_,
                " processes never reached the exchange (waited ", timeout_.count(), " s)");
  }
  return done_;
}

ThreadExchange::ThreadExchange(std::shared_ptr<ThreadRendezvous> rendezvous, int process)
    : rendezvous_(std::move(rendezvous)), process_(process) {
  EMBER_CHECK(rendezvous_ != nullptr, "ThreadExchange: no rendezvous");
  EMBER_CHECK(process_ >= 0 && process_ < rendezvous_->size(), "ThreadExchange: process ", process_,
              " of ", rendezvous_->size());
}

std::vector<std::vector<std::byte>> ThreadExchange::all_gather(const std::vector<std::byte>& mine) {
  return rendezvous_->arrive(process_, mine);
}

void ThreadExchange::all_gather_into(const std::vector<std::byte>& mine, GatheredMessages& all) {
  const std::vector<std::vector<std::byte>>& round = rendezvous_->arrive(process_, mine);
  all.offsets.assign(1, 0);
  for (const auto& m : round)
    all.offsets.push_back(all.offsets.back() + static_cast<std::int64_t>(m.size()));
  all.bytes.resize(static_cast<std::size_t>(all.offsets.back()));
  for (std::size_t q = 0; q < round.size(); ++q) {
    if (!round[q].empty()) {
      std::memcpy(all.bytes.data() + all.offsets[q], round[q].data(), round[q].size());
    }
  }
}

}  // namespace ember::data
