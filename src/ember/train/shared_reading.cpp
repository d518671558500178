#include "ember/train/shared_reading.hpp"

#include <cstdio>
#include <iostream>
#include <string>

#include "ember/core/log.hpp"
#include "ember/core/runtime_options.hpp"
#include "ember/distributed/node_shared_gather.hpp"
#include "ember/distributed/process_channel.hpp"
#include "ember/distributed/process_world.hpp"

namespace ember::train {

namespace {

// The key exchange over a channel of its own; the keys, most of the bytes, through memory the
// processes share where they are all on one machine (distributed/node_shared_gather.hpp), else
// by MPI in place. EMBER_KEY_EXCHANGE=mpi keeps them on MPI (for comparison).
class ChannelExchange final : public data::ProcessExchange {
 public:
  ChannelExchange(bool shared_memory, std::string prefix)
      : channel_(distributed::ProcessChannel::open()),
        shared_(distributed::NodeSharedGather::open(shared_memory)),
        prefix_(std::move(prefix)) {}

  int process() const override { return channel_->rank(); }
  int processes() const override { return channel_->size(); }
  std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) override {
    return channel_->all_gather(mine);
  }
  void all_gather_into(const std::vector<std::byte>& mine, data::GatheredMessages& all) override {
    channel_->all_gather(mine, all.bytes, all.offsets);
  }
  void all_gather_in_place(std::byte* buffer, const std::vector<std::int64_t>& counts,
                           const std::vector<std::int64_t>& displs) override {
    if (shared_ && shared_->all_gather_in_place(buffer, counts, displs)) return;
    channel_->all_gather_in_place(buffer, counts, displs);
  }
  // The other processes wait in an exchange this one will not join: end them all, as a failed
  // rank does.
  [[noreturn]] void abandon(const std::string& why) override {
    std::cerr << "ember: error: " << prefix_ << why << std::endl;
    distributed::abort_processes(1);
  }

 private:
  std::unique_ptr<distributed::ProcessChannel> channel_;
  std::unique_ptr<distributed::NodeSharedGather> shared_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<data::ProcessExchange> make_key_exchange(const SessionJob& job) {
  if (!job.multi_process || job.world.size <= 1) return nullptr;
  const bool shared_memory = RuntimeOptions::get().key_exchange() != KeyExchangeMode::Mpi;
  return std::make_shared<ChannelExchange>(shared_memory, job.process_prefix());
}

bool ranks_gather_keys(const SessionJob& job) {
  if (!job.multi_process || job.world.size <= 1 || job.places.empty()) return false;
  if (RuntimeOptions::get().key_exchange() != KeyExchangeMode::Auto) return false;
  return job.places.front().is_cuda() || job.places.size() == 1;
}

void log_shared_reading(const SessionJob& job, const char* what, const data::PipelineStats& stats) {
  if (!job.multi_process || job.world.size <= 1) return;
  // Where each process's input time went, in milliseconds: which of the key exchange, the
  // readers (the collector waiting for them), the device copies (queued and waited for on the
  // collector's thread) or training (the collector waiting for room in the prefetch queue) set
  // the pace of one process per GPU; training waits for batches when the pipeline is behind.
  auto ms = [](double seconds) { return static_cast<std::int64_t>(seconds * 1e3); };
  auto secs = [](std::int64_t milliseconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", static_cast<double>(milliseconds) / 1e3);
    return std::string(text);
  };
  constexpr std::size_t kFields = 10;
  const std::vector<std::int64_t> all = distributed::all_gather_processes(
      {stats.samples_read, stats.bytes_read, stats.samples_skipped, ms(stats.exchange_seconds),
       ms(stats.exchange_meet_seconds), ms(stats.collector_input_wait_seconds),
       ms(stats.consumer_wait_seconds), ms(stats.copy_issue_seconds + stats.copy_wait_seconds),
       ms(stats.collector_output_wait_seconds), stats.keys_from_ranks_batches});
  if (!job.is_output_process()) return;
  std::string text;
  for (std::size_t p = 0; p * kFields < all.size(); ++p) {
    const std::int64_t* f = all.data() + p * kFields;
    text += cat(p == 0 ? "" : "; ", "process ", p, " parsed ", f[0], " samples (", f[1],
                " bytes) and passed over ", f[2], " (key exchange ", secs(f[3]),
                " s of which meeting the others ", secs(f[4]), " s, collector waiting for readers ",
                secs(f[5]), " s, training waiting for batches ", secs(f[6]), " s, device copies ",
                secs(f[7]), " s, collector waiting for room ", secs(f[8]), " s, keys of ", f[9],
                " batches gathered by the ranks)");
  }
  EMBER_LOG_INFO("input ({}): {}", what, text);
}

}  // namespace ember::train
