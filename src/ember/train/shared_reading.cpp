#include "ember/train/shared_reading.hpp"

#include <cstdio>
#include <iostream>
#include <string>

#include "ember/core/log.hpp"
#include "ember/distributed/process_channel.hpp"
#include "ember/distributed/process_world.hpp"

namespace ember::train {

namespace {

class ChannelExchange final : public data::ProcessExchange {
 public:
  ChannelExchange(std::unique_ptr<distributed::ProcessChannel> channel, std::string prefix)
      : channel_(std::move(channel)), prefix_(std::move(prefix)) {}

  int process() const override { return channel_->rank(); }
  int processes() const override { return channel_->size(); }
  std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) override {
    return channel_->all_gather(mine);
  }
  void all_gather_into(const std::vector<std::byte>& mine, data::GatheredMessages& all) override {
    channel_->all_gather(mine, all.bytes, all.offsets);
  }
  // The other processes wait in an exchange this one will not join: end them all, as a failed
  // rank does.
  [[noreturn]] void abandon(const std::string& why) override {
    std::cerr << "ember: error: " << prefix_ << why << std::endl;
    distributed::abort_processes(1);
  }

 private:
  std::unique_ptr<distributed::ProcessChannel> channel_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<data::ProcessExchange> make_key_exchange(const SessionJob& job) {
  if (!job.multi_process || job.world.size <= 1) return nullptr;
  return std::make_shared<ChannelExchange>(distributed::ProcessChannel::open(),
                                           job.process_prefix());
}

void log_shared_reading(const SessionJob& job, const char* what, const data::PipelineStats& stats) {
  if (!job.multi_process || job.world.size <= 1) return;
  // Where each process's input time went, in milliseconds: which of the key exchange, the
  // readers (the collector waiting for them) or the device's work (training waiting for
  // batches only when none of those held it) set the pace of one process per GPU.
  auto ms = [](double seconds) { return static_cast<std::int64_t>(seconds * 1e3); };
  auto secs = [](std::int64_t milliseconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", static_cast<double>(milliseconds) / 1e3);
    return std::string(text);
  };
  constexpr std::size_t kFields = 6;
  const std::vector<std::int64_t> all = distributed::all_gather_processes(
      {stats.samples_read, stats.bytes_read, stats.samples_skipped, ms(stats.exchange_seconds),
       ms(stats.collector_input_wait_seconds), ms(stats.consumer_wait_seconds)});
  if (!job.is_output_process()) return;
  std::string text;
  for (std::size_t p = 0; p * kFields < all.size(); ++p) {
    const std::int64_t* f = all.data() + p * kFields;
    text += cat(p == 0 ? "" : "; ", "process ", p, " parsed ", f[0], " samples (", f[1],
                " bytes) and passed over ", f[2], " (key exchange ", secs(f[3]),
                " s, collector waiting for readers ", secs(f[4]),
                " s, training waiting for batches ", secs(f[5]), " s)");
  }
  EMBER_LOG_INFO("input ({}): {}", what, text);
}

}  // namespace ember::train
