#include "ember/train/shared_reading.hpp"

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
  const std::vector<std::int64_t> all = distributed::all_gather_processes(
      {stats.samples_read, stats.bytes_read, stats.samples_skipped});
  if (!job.is_output_process()) return;
  std::string text;
  for (std::size_t p = 0; p * 3 < all.size(); ++p) {
    text += cat(p == 0 ? "" : "; ", "process ", p, " parsed ", all[p * 3], " samples (",
                all[p * 3 + 1], " bytes) and passed over ", all[p * 3 + 2]);
  }
  EMBER_LOG_INFO("input ({}): {}", what, text);
}

}  // namespace ember::train
