#include "ember/data/pipeline.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/stream.hpp"
#include "ember/data/batch_assembly.hpp"
#include "ember/data/device_transfer.hpp"
#include "ember/data/host_batch_pool.hpp"
#include "ember/data/time_counter.hpp"

namespace ember::data {

namespace {

using Clock = TimeCounter::Clock;

struct WorkItem {
  // Retired: the shard holds no samples at all (Repeat mode); it is read no more.
  enum class Kind { Batch, EndOfEpoch, Retired, Error } kind = Kind::Batch;
  HostBatchLease batch;
  std::exception_ptr error;
};

struct OutItem {
  enum class Kind { Batch, End, Error } kind;
  Batch batch;
  std::exception_ptr error;
};

// Batches the reader threads may hold ahead of the collector (being filled or queued), per
// thread. Every one is memory held: pinned, for a GPU pipeline, 100 MB or more per multi-hot
// batch of 65536 samples.
constexpr int kLookaheadPerReader = 2;

// One shard's reading state. While `busy`, the one thread reading it owns `reader`, `restart`
// and `epoch`; everything else is under the work mutex.
struct Shard {
  std::unique_ptr<ShardReader> reader;  // opened by the first thread that reads the shard
  std::deque<WorkItem> queue;           // to the collector, in order
  bool busy = false;                    // a thread is reading its next batch
  bool finished = false;                // nothing more to read: retired, last epoch, an error
  bool restart = false;                 // its next batch starts the next epoch
  std::int64_t epoch = 0;
};

}  // namespace

struct Pipeline::Impl {
  class Collector;

  std::shared_ptr<const DataSource> source;
  PipelineOptions options;
  BatchLayout layout;
  bool gpu = false;
  int num_shards = 1;
  int reader_threads = 1;
  int lookahead = kLookaheadPerReader;  // batches held ahead of the collector, all threads
  ReadCounters counters;

  // Shared with the host batches handed out (host pipelines), which may outlive the pipeline.
  std::shared_ptr<HostBatchPool> host_pool;
  std::unique_ptr<DeviceTransfer> transfer;  // GPU pipelines

  // Readers -> collector.
  std::mutex work_mutex;
  std::condition_variable work_ready;  // an item was queued (collector waits)
  std::condition_variable work_space;  // an item was taken (readers wait)
  std::vector<Shard> shards;
  int turn = 0;           // the shard whose item the collector takes next (the first not done)
  std::int64_t held = 0;  // batches the readers fill or have queued

  // Collector -> consumer.
  std::mutex out_mutex;
  std::condition_variable out_ready;
  std::condition_variable out_space;
  std::deque<OutItem> out;

  std::atomic<bool> stopping{false};
  // Shared reading: the consumer is done; the collector finishes the exchanges that the prefetch
  // queue has room for (the same ones on every process), then ends.
  std::atomic<bool> draining{false};
  std::vector<std::thread> threads;
  bool collector_started = false;  // threads.back() is the collector

  // Shared reading: the rows of each full batch this process parses; the collector's key
  // messages, kept from batch to batch.
  std::optional<Share> window;
  KeyExchangeBuffers exchange_buffers;

  // Consumer side.
  std::exception_ptr failure;
  bool finished = false;
  std::atomic<std::int64_t> delivered_batches{0}, delivered_samples{0};

  // Collector state.
  std::int64_t sequence = 0;

  // For stats().
  TimeCounter collector_input_wait, collector_output_wait, merge_time, exchange_time,
      worker_output_wait, consumer_wait;
  std::atomic<std::int64_t> merged_batches{0};
  std::atomic<std::int64_t> keys_from_ranks{0};

  void start();
  void stop();
  void reader_main();
  // The shard a free reader thread reads next (-1: stopping), marked busy.
  int claim_shard(std::unique_lock<std::mutex>& lock);
  // One item of shard s: its next batch, or its end (of an epoch, or for good).
  WorkItem read_item(int s, bool& finished);
  HostBatchLease fill(ShardReader& reader);
  void collector_main();
  bool pop_work(std::vector<bool>& done, int& round_robin, WorkItem& item, int& from);
  bool push_out(OutItem item);
  // Shared reading: waits until the prefetch queue has room for the next batch (false: stopping,
  // or draining with no room), so that whether a batch's keys are exchanged depends only on the
  // batches the consumer took.
  bool wait_for_room();
  bool wait_for_room(std::unique_lock<std::mutex>& lock);  // with out_mutex held
  // Hands the consumer an error; when it is gone (draining) and the other processes wait in
  // exchanges, ends the job instead.
  void fail(std::exception_ptr error);
  bool deliver(HostBatchLease batch, std::int64_t epoch, bool end_of_epoch);
};

// The collector (one thread): takes the shards' batches in turn, gathers partial ones into full
// batches, in Epochs mode holds back one batch so that the epoch's last is marked, and delivers.
// The batches it holds go back to the pool whatever way it ends (stopping, an error).
class Pipeline::Impl::Collector {
 public:
  explicit Collector(Impl& m)
      : m_(m),
        epochs_(m.options.mode == PipelineMode::Epochs),
        done_(static_cast<std::size_t>(m.num_shards), false) {}

  void run();

 private:
  // One move: closes an epoch every worker has finished, or takes one worker's item. False: stop.
  bool step();
  bool take(WorkItem item, int from);
  bool end_epoch();
  // Hands a full batch on (Repeat) or holds it back one step (Epochs).
  bool emit(HostBatchLease batch);
  // Adds the samples of a partial batch to `partial_`, handing it on each time it fills.
  bool gather(HostBatchLease batch);
  bool emit_partial();
  bool all_done() const {
    return std::all_of(done_.begin(), done_.end(), [](bool b) { return b; });
  }

  Impl& m_;
  const bool epochs_;
  // Samples of partial batches (the end of a worker's shard, Raw's last chunk), gathered in
  // arrival order into one batch as they come. Copying them at once, instead of holding the
  // partial batches until a full batch's worth has arrived, bounds the collector's batches
  // (steady_host_batches()).
  HostBatchLease partial_;
  HostBatchLease pending_;  // Epochs mode: the batch held back to mark the epoch's last
  std::int64_t epoch_ = 0;
  std::int64_t epoch_samples_ = 0;
  std::vector<bool> done_;  // per worker: at the end of its shard for this epoch, or retired
  int round_robin_ = 0;
};

void Pipeline::Impl::Collector::run() {
  std::optional<DeviceTransfer::CopyThread> copy_thread;
  try {
    if (m_.gpu) copy_thread.emplace(m_.options.devices);
    while (step()) {
    }
  } catch (...) {
    m_.fail(std::current_exception());
  }
}

bool Pipeline::Impl::Collector::step() {
  if (epochs_ && all_done()) return end_epoch();
  WorkItem item;
  int from = 0;
  if (!m_.pop_work(done_, round_robin_, item, from)) return false;
  return take(std::move(item), from);
}

bool Pipeline::Impl::Collector::take(WorkItem item, int from) {
  switch (item.kind) {
    case WorkItem::Kind::Error:
      m_.fail(item.error);
      return false;
    case WorkItem::Kind::EndOfEpoch:
      done_[static_cast<std::size_t>(from)] = true;
      return true;
    case WorkItem::Kind::Retired:
      done_[static_cast<std::size_t>(from)] = true;
      if (all_done())
        EMBER_THROW_AS(DataError, m_.source->description(), " has no samples to read");
      return true;
    case WorkItem::Kind::Batch:
      epoch_samples_ += item.batch->size();
      return item.batch->full() ? emit(std::move(item.batch)) : gather(std::move(item.batch));
  }
  return false;
}

bool Pipeline::Impl::Collector::end_epoch() {
  if (partial_ != nullptr && !partial_->empty() && !emit_partial()) return false;
  if (epoch_samples_ == 0 || pending_ == nullptr) {
    EMBER_THROW_AS(DataError, m_.source->description(), " has no samples to read (epoch ", epoch_,
                   ")");
  }
  if (!m_.deliver(std::exchange(pending_, nullptr), epoch_, true)) return false;
  ++epoch_;
  epoch_samples_ = 0;
  std::fill(done_.begin(), done_.end(), false);
  round_robin_ = 0;
  if (m_.options.num_epochs >= 0 && epoch_ >= m_.options.num_epochs) {
    m_.push_out({OutItem::Kind::End, {}, nullptr});
    return false;
  }
  return true;
}

bool Pipeline::Impl::Collector::emit(HostBatchLease batch) {
  if (!epochs_) return m_.deliver(std::move(batch), 0, false);
  HostBatchLease previous = std::exchange(pending_, std::move(batch));
  return previous == nullptr || m_.deliver(std::move(previous), epoch_, false);
}

// The next `partial_` is taken only after the full one went on, so that the one-batch-per-stage
// bound holds.
bool Pipeline::Impl::Collector::gather(HostBatchLease batch) {
  std::int64_t start = 0;
  while (start < batch->size()) {
    if (partial_ == nullptr) partial_ = m_.host_pool->acquire();
    const auto t0 = Clock::now();
    const std::int64_t take =
        std::min(partial_->capacity() - partial_->size(), batch->size() - start);
    partial_->append(*batch, start, start + take);
    start += take;
    m_.merge_time.add_since(t0);
    if (partial_->full() && !emit_partial()) return false;
  }
  return true;
}

bool Pipeline::Impl::Collector::emit_partial() {
  m_.merged_batches.fetch_add(1, std::memory_order_relaxed);
  return emit(std::exchange(partial_, nullptr));
}

void Pipeline::Impl::collector_main() {
  Collector(*this).run();
}

// The free shard whose next item the collector will take soonest: counted from the collector's
// turn, a cycle of all shards for each item already queued. The readers hold at most
// `lookahead` batches (being filled or queued), which bounds the memory they take
// (steady_host_batches()), and one more from the shard at the collector's turn: else they could
// fill their lookahead with batches the collector takes later (later shards' in deterministic
// order, the next epoch's of shards done with this one) and wait for it as it waits for them.
// Only one such batch is read at a time: it is in a shard the collector takes from (the turn's),
// so it goes on, and the readers can read again.
int Pipeline::Impl::claim_shard(std::unique_lock<std::mutex>& lock) {
  const int S = num_shards;
  for (;;) {
    if (stopping.load()) return -1;
    int chosen = -1;
    std::int64_t soonest = 0;
    for (int s = 0; s < S; ++s) {
      const Shard& shard = shards[static_cast<std::size_t>(s)];
      if (shard.busy || shard.finished) continue;
      const bool awaited = s == turn && shard.queue.empty();
      if (held >= lookahead + (awaited ? 1 : 0)) continue;
      const std::int64_t at =
          (s - turn + S) % S +
          static_cast<std::int64_t>(S) * static_cast<std::int64_t>(shard.queue.size());
      if (chosen < 0 || at < soonest) {
        soonest = at;
        chosen = s;
      }
    }
    if (chosen >= 0) {
      shards[static_cast<std::size_t>(chosen)].busy = true;
      ++held;
      return chosen;
    }
    const auto t0 = Clock::now();
    work_space.wait(lock);
    worker_output_wait.add_since(t0);
  }
}

void Pipeline::Impl::reader_main() {
  std::unique_lock lock(work_mutex);
  for (;;) {
    const int s = claim_shard(lock);
    if (s < 0) return;
    lock.unlock();
    bool finished = false;
    WorkItem item = read_item(s, finished);
    lock.lock();
    Shard& shard = shards[static_cast<std::size_t>(s)];
    shard.busy = false;
    shard.finished = finished;
    // A shard's end gives back the batch taken for it: a reader waiting for room may read.
    const bool gave_back = item.kind != WorkItem::Kind::Batch;
    if (gave_back) --held;
    shard.queue.push_back(std::move(item));
    work_ready.notify_all();
    if (gave_back) work_space.notify_all();
  }
}

WorkItem Pipeline::Impl::read_item(int s, bool& finished) {
  Shard& shard = shards[static_cast<std::size_t>(s)];
  try {
    if (shard.reader == nullptr) {
      ShardSpec spec;
      spec.worker = s;
      spec.num_workers = num_shards;
      spec.repeat = options.mode == PipelineMode::Repeat;
      spec.batch_size = options.batch_size;
      spec.counters = &counters;
      spec.window = window;
      shard.reader = source->open_shard(spec);
    }
    if (shard.restart) {
      shard.reader->restart();
      shard.restart = false;
    }
    if (HostBatchLease batch = fill(*shard.reader))
      return {WorkItem::Kind::Batch, std::move(batch), nullptr};
    if (options.mode == PipelineMode::Repeat) {
      EMBER_LOG_WARN("{}: reader shard {} has no samples in its files; it is read no more",
                     source->description(), s);
      finished = true;
      return {WorkItem::Kind::Retired, nullptr, nullptr};
    }
    ++shard.epoch;
    if (options.num_epochs >= 0 && shard.epoch >= options.num_epochs)
      finished = true;
    else
      shard.restart = true;
    return {WorkItem::Kind::EndOfEpoch, nullptr, nullptr};
  } catch (...) {
    finished = true;
    return {WorkItem::Kind::Error, nullptr, std::current_exception()};
  }
}

// A batch filled from a shard; none when the shard is exhausted (the batch taken for it goes
// straight back, so the thread holds nothing while it reports the end).
HostBatchLease Pipeline::Impl::fill(ShardReader& reader) {
  HostBatchLease batch = host_pool->acquire();
  if (reader.fill(*batch) == 0) return nullptr;
  // Whether this process's rows hold one count of keys each (one-hot data) is one pass over
  // their offsets, done here, beside the other readers, rather than on the collector's one
  // thread: the key exchange sends it, and the device copies of a batch whose every row holds
  // the same count need not carry its offsets (device_transfer.hpp).
  if (options.exchange || gpu) {
    const Share rows = options.exchange ? process_window(batch->size(), options.slice,
                                                         static_cast<int>(options.devices.size()))
                                        : Share{0, batch->size()};
    batch->uniform_row_keys(rows.offset, rows.size);
  }
  return batch;
}

bool Pipeline::Impl::pop_work(std::vector<bool>& done, int& round_robin, WorkItem& item,
                              int& from) {
  const int S = num_shards;
  // The readers read the shards in the order the collector takes them from here on: from the
  // first shard not done with this epoch (after the epoch, shard 0).
  const auto publish_turn = [&] {
    int first = 0;
    for (int k = 0; k < S; ++k) {
      const int s = (round_robin + k) % S;
      if (!done[static_cast<std::size_t>(s)]) {
        first = s;
        break;
      }
    }
    if (first != turn) {
      turn = first;
      work_space.notify_all();
    }
  };
  std::unique_lock lock(work_mutex);
  for (;;) {
    if (stopping.load()) return false;
    publish_turn();
    int chosen = -1;
    for (int k = 0; k < S; ++k) {
      const int s = (round_robin + k) % S;
      if (done[static_cast<std::size_t>(s)]) continue;
      const bool ready = !shards[static_cast<std::size_t>(s)].queue.empty();
      if (ready) chosen = s;
      // Deterministic mode: strict turn order, waiting for this shard even if others are ready.
      if (ready || options.deterministic) break;
    }
    if (chosen >= 0) {
      auto& q = shards[static_cast<std::size_t>(chosen)].queue;
      item = std::move(q.front());
      q.pop_front();
      from = chosen;
      round_robin = (chosen + 1) % S;
      if (item.kind == WorkItem::Kind::Batch) --held;
      // Marked here as take() will, so that the turn published is the shard awaited next.
      if (item.kind == WorkItem::Kind::EndOfEpoch || item.kind == WorkItem::Kind::Retired)
        done[static_cast<std::size_t>(chosen)] = true;
      publish_turn();
      lock.unlock();
      work_space.notify_all();
      return true;
    }
    const auto t0 = Clock::now();
    work_ready.wait(lock);
    collector_input_wait.add_since(t0);
  }
}

bool Pipeline::Impl::push_out(OutItem item) {
  std::unique_lock lock(out_mutex);
  if (!wait_for_room(lock)) return false;
  out.push_back(std::move(item));
  lock.unlock();
  out_ready.notify_all();
  return true;
}

bool Pipeline::Impl::wait_for_room() {
  std::unique_lock lock(out_mutex);
  return wait_for_room(lock);
}

bool Pipeline::Impl::wait_for_room(std::unique_lock<std::mutex>& lock) {
  const auto depth = static_cast<std::size_t>(options.prefetch_depth);
  const auto room = [&] { return stopping.load() || draining.load() || out.size() < depth; };
  if (!room()) {
    const auto t0 = Clock::now();
    out_space.wait(lock, room);
    collector_output_wait.add_since(t0);
  }
  return !stopping.load() && out.size() < depth;
}

void Pipeline::Impl::fail(std::exception_ptr error) {
  if (!push_out({OutItem::Kind::Error, {}, error}) && options.exchange && draining.load() &&
      !stopping.load()) {
    std::string why = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    options.exchange->abandon(cat(source->description(), ": ", why));
  }
}

bool Pipeline::Impl::deliver(HostBatchLease batch, std::int64_t epoch, bool end_of_epoch) {
  BatchInfo info{sequence, epoch, end_of_epoch};
  if (options.exchange) {
    if (!wait_for_room()) return false;
    const Share rows =
        process_window(batch->size(), options.slice, static_cast<int>(options.devices.size()));
    const auto t0 = Clock::now();
    info.keys_from_ranks = exchange_batch_keys(
        *batch, rows, {sequence, batch->size(), num_shards}, *options.exchange, &exchange_buffers,
        options.ranks_gather_keys ? options.slice.world_ranks : 0);
    exchange_time.add_since(t0);
    if (info.keys_from_ranks) keys_from_ranks.fetch_add(1, std::memory_order_relaxed);
  }
  OutItem item{OutItem::Kind::Batch, {}, nullptr};
  if (gpu) {
    item.batch = transfer->copy(std::move(batch), info);
  } else {
    item.batch = host_batch_views(share_lease<HostBatch>(std::move(batch), host_pool), layout,
                                  options.devices, info, options.slice);
  }
  ++sequence;
  return push_out(std::move(item));
}

void Pipeline::Impl::start() {
  shards = std::vector<Shard>(static_cast<std::size_t>(num_shards));
  lookahead = kLookaheadPerReader * reader_threads;
  try {
    for (int t = 0; t < reader_threads; ++t)
      threads.emplace_back([this] { reader_main(); });
    threads.emplace_back([this] { collector_main(); });
    collector_started = true;
  } catch (...) {
    stop();
    throw;
  }
}

void Pipeline::Impl::stop() {
  if (options.exchange && collector_started && threads.back().joinable()) {
    // The other processes' collectors exchange the keys of every batch their queues have room
    // for: so must this one, before its readers stop.
    {
      std::lock_guard lock(out_mutex);
      draining.store(true);
    }
    out_space.notify_all();
    threads.back().join();
  }
  stopping.store(true);
  {
    // Taking each lock orders the flag before any waiter's next check.
    std::lock_guard a(work_mutex);
  }
  { std::lock_guard b(out_mutex); }
  work_ready.notify_all();
  work_space.notify_all();
  out_ready.notify_all();
  out_space.notify_all();
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  threads.clear();
  shards.clear();  // the queued batches go back to the pool
  out.clear();     // so do the undelivered ones
}

std::int64_t steady_host_batches(int reader_threads, bool gpu, int prefetch_depth,
                                 PipelineMode mode, int consumer_holds) {
  EMBER_CHECK(reader_threads >= 1 && prefetch_depth >= 1 && consumer_holds >= 1,
              "steady_host_batches: ", reader_threads, " reader threads, prefetch depth ",
              prefetch_depth, ", consumer holds ", consumer_holds);
  // The readers' lookahead, and the batch of the shard the collector waits for (claim_shard()).
  const std::int64_t readers = static_cast<std::int64_t>(kLookaheadPerReader) * reader_threads + 1;
  // The collector: the batch it took from a worker and the one gathering partial batches; in
  // Epochs mode the one it holds back to mark the epoch's end.
  std::int64_t collector = 2 + (mode == PipelineMode::Epochs ? 1 : 0);
  // Host pipelines hand the host batches themselves on: the prefetch queue's and the consumer's.
  // GPU pipelines return a host batch once its copies are done; device slots hold the rest.
  const std::int64_t downstream = gpu ? 0 : prefetch_depth + consumer_holds;
  return readers + collector + downstream;
}

int steady_device_slots(int prefetch_depth, int consumer_holds) {
  EMBER_CHECK(prefetch_depth >= 1 && consumer_holds >= 1, "steady_device_slots: prefetch depth ",
              prefetch_depth, ", consumer holds ", consumer_holds);
  return prefetch_depth + 1 + consumer_holds;
}

int default_num_workers(int hardware_threads, bool gpu) {
  const int cores = std::max(1, hardware_threads);
  return std::max(1, gpu ? cores - 2 : cores);
}

int default_num_shards(int usable) {
  return std::clamp(usable, 1, kMaxDefaultShards);
}

namespace {

// Throws unless the options describe a pipeline that can run.
void check_options(const PipelineOptions& options) {
  EMBER_CHECK(options.batch_size > 0, "Pipeline: batch size must be positive, got ",
              options.batch_size);
  EMBER_CHECK(!options.devices.empty(), "Pipeline: no training devices given");
  EMBER_CHECK(options.prefetch_depth >= 1, "Pipeline: prefetch depth must be at least 1, got ",
              options.prefetch_depth);
  EMBER_CHECK(options.consumer_holds >= 1,
              "Pipeline: the consumer holds at least 1 batch at a time, got ",
              options.consumer_holds);
  EMBER_CHECK(
      options.mode == PipelineMode::Repeat || options.num_epochs == -1 || options.num_epochs >= 1,
      "Pipeline: num_epochs must be at least 1 (or -1 for endless epochs), got ",
      options.num_epochs);
  const auto D = static_cast<std::int64_t>(options.slice.world_ranks > 0
                                               ? options.slice.world_ranks
                                               : static_cast<int>(options.devices.size()));
  EMBER_CHECK(options.slice.first_rank >= 0 &&
                  options.slice.first_rank + static_cast<std::int64_t>(options.devices.size()) <= D,
              "Pipeline: devices from rank ", options.slice.first_rank, " are not ranks of ", D);
  EMBER_CHECK(options.exchange == nullptr || options.deterministic,
              "Pipeline: shared reading (an exchange between processes) needs deterministic mode");
  EMBER_CHECK(!options.ranks_gather_keys ||
                  (options.exchange != nullptr && options.slice.world_ranks > 0 &&
                   (options.devices.front().is_cuda() || options.devices.size() == 1)),
              "Pipeline: the ranks gather keys only in shared reading, and host ranks one to a "
              "process (",
              options.devices.size(), " devices here)");
  if (options.require_even_split && options.batch_size % D != 0) {
    EMBER_THROW_AS(ConfigError, "batch size ", options.batch_size, " is not a multiple of the ", D,
                   " training devices");
  }
  const bool gpu = options.devices.front().is_cuda();
  for (const Place& p : options.devices) {
    EMBER_CHECK(p.is_cuda() == gpu && (p.is_cuda() || p.is_host()),
                "Pipeline: training devices must be all host or all CUDA places, got ", p,
                " among ", options.devices.front());
    if (p.is_cuda()) require_cuda_device(p.device(), "input pipeline");
  }
}

// The shards: num_workers (at most what the source can use), else the default.
int choose_shards(const DataSource& source, const PipelineOptions& options) {
  const int usable = std::max(1, source.max_workers(options.batch_size));
  if (options.num_workers <= 0) return default_num_shards(usable);
  if (options.num_workers > usable) {
    EMBER_LOG_INFO("{}: {} reader workers asked for, {} used (one per file or chunk)",
                   source.description(), options.num_workers, usable);
    return usable;
  }
  return options.num_workers;
}

// The reader threads: reader_threads, else num_workers as given, else the default; at most one
// per shard.
int choose_reader_threads(const DataSource& source, const PipelineOptions& options, bool gpu,
                          int shards) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  int threads = options.reader_threads > 0 ? options.reader_threads
                : options.num_workers > 0  ? options.num_workers
                                           : default_num_workers(cores, gpu);
  threads = std::min(threads, shards);
  if (gpu && cores > 0 && threads > default_num_workers(cores, true)) {
    EMBER_LOG_INFO(
        "{}: {} reader threads on {} hardware threads leave none for the collector "
        "(which queues the device copies) and the training thread; when the readers "
        "are busy they compete with those two",
        source.description(), threads, cores);
  }
  return threads;
}

Allocator& host_batch_allocator(const PipelineOptions& options, bool gpu) {
  Allocator& allocator = options.host_allocator != nullptr
                             ? *options.host_allocator
                             : default_allocator(gpu ? Place::pinned() : Place::host());
  if (gpu) {
    EMBER_CHECK(allocator.place().kind() == PlaceKind::Pinned,
                "Pipeline: host batches bound for GPUs need pinned memory, but the host "
                "allocator gives ",
                allocator.place(), " (", allocator.name(), ")");
  }
  return allocator;
}

}  // namespace

Pipeline::Pipeline(std::shared_ptr<const DataSource> source, PipelineOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  EMBER_CHECK(source != nullptr, "Pipeline needs a data source");
  check_options(options);
  m.gpu = options.devices.front().is_cuda();
  m.source = std::move(source);
  m.options = std::move(options);
  m.layout = m.source->layout();
  m.num_shards = choose_shards(*m.source, m.options);
  if (m.options.exchange) {
    // Which samples a batch holds depends on the shards: every process takes the fewest.
    std::vector<std::byte> mine(sizeof(int));
    std::memcpy(mine.data(), &m.num_shards, sizeof(int));
    for (const auto& theirs : m.options.exchange->all_gather(mine)) {
      int w = 0;
      EMBER_CHECK(theirs.size() == sizeof(int), "Pipeline: a process sent ", theirs.size(),
                  " bytes for its reader shard count");
      std::memcpy(&w, theirs.data(), sizeof(int));
      m.num_shards = std::min(m.num_shards, w);
    }
    m.window = process_window(m.options.batch_size, m.options.slice,
                              static_cast<int>(m.options.devices.size()));
  }
  // Everything a steady run needs is made before any thread starts.
  m.reader_threads = choose_reader_threads(*m.source, m.options, m.gpu, m.num_shards);
  const std::int64_t host_batches = steady_host_batches(
      m.reader_threads, m.gpu, m.options.prefetch_depth, m.options.mode, m.options.consumer_holds);
  const int device_slots = steady_device_slots(m.options.prefetch_depth, m.options.consumer_holds);
  try {
    m.host_pool = std::make_shared<HostBatchPool>(m.layout, m.options.batch_size,
                                                  host_batch_allocator(m.options, m.gpu));
    if (m.gpu) {
      m.transfer = std::make_unique<DeviceTransfer>(
          m.layout, m.options.devices, m.options.batch_size, device_slots, m.options.slice);
    }
    m.host_pool->reserve(host_batches);
  } catch (const OutOfMemoryError& e) {
    // A batch too large for the machine: say which setting makes it so, and how large it is.
    const auto D = static_cast<std::int64_t>(m.options.devices.size());
    const std::size_t host_bytes =
        BatchBufferPlan(m.layout, m.options.batch_size, m.options.batch_size).total_bytes;
    const std::size_t slot_bytes =
        BatchBufferPlan(m.layout, (m.options.batch_size + D - 1) / D, m.options.batch_size)
            .total_bytes;
    std::string what = cat(host_batches, " host batches of ", host_bytes, " bytes (",
                           m.gpu ? "pinned" : "host", " memory)");
    if (m.gpu)
      what += cat(" and ", device_slots, " device slots of ", slot_bytes, " bytes per GPU");
    EMBER_THROW_AS(OutOfMemoryError, "the input pipeline cannot allocate its batches for ",
                   m.options.batch_size_name, " ", m.options.batch_size, ": it needs ", what, " (",
                   e.what(), "); lower ", m.options.batch_size_name);
  }
  m.start();
}

Pipeline::~Pipeline() {
  impl_->stop();
}

std::optional<Batch> Pipeline::next() {
  Impl& m = *impl_;
  if (m.failure) std::rethrow_exception(m.failure);
  if (m.finished) return std::nullopt;
  std::unique_lock lock(m.out_mutex);
  if (m.out.empty()) {
    const auto t0 = Clock::now();
    m.out_ready.wait(lock, [&] { return !m.out.empty(); });
    m.consumer_wait.add_since(t0);
  }
  OutItem item = std::move(m.out.front());
  m.out.pop_front();
  lock.unlock();
  m.out_space.notify_all();
  switch (item.kind) {
    case OutItem::Kind::Error:
      m.failure = item.error;
      std::rethrow_exception(m.failure);
    case OutItem::Kind::End:
      m.finished = true;
      return std::nullopt;
    case OutItem::Kind::Batch:
      break;
  }
  if (m.gpu && m.options.wait_on_current_stream) {
    for (const DeviceBatch& db : item.batch.devices) {
      DeviceGuard guard(db.place.device());
      db.wait(current_stream(db.place.device()));
    }
  }
  m.delivered_batches.fetch_add(1);
  m.delivered_samples.fetch_add(item.batch.global_size);
  return std::move(item.batch);
}

PipelineStats Pipeline::stats() const {
  const Impl& m = *impl_;
  PipelineStats s;
  s.batches = m.delivered_batches.load();
  s.samples = m.delivered_samples.load();
  s.samples_read = m.counters.samples.load();
  s.samples_skipped = m.counters.skipped.load();
  s.dropped = m.counters.dropped.load();
  s.bad_samples = m.counters.bad.load();
  s.bytes_read = m.counters.bytes.load();
  s.workers = m.reader_threads;
  s.shards = m.num_shards;
  const HostBatchPoolStats host = m.host_pool->stats();
  s.host_batches = host.batches;
  s.late_host_batches = host.late_batches;
  s.reserved_host_batches = host.batches - host.late_batches;
  s.host_batch_bytes = host.bytes_each;
  s.host_batch_seconds = host.make_seconds;
  if (m.transfer != nullptr) {
    const DeviceTransferStats t = m.transfer->stats();
    s.device_slots = t.slots;
    s.late_device_slots = t.late_slots;
    s.slot_reuse_waits = t.slot_reuse_waits;
    s.copy_issue_seconds = t.copy_issue_seconds;
    s.copy_wait_seconds = t.copy_wait_seconds;
  }
  s.merged_batches = m.merged_batches.load();
  s.keys_from_ranks_batches = m.keys_from_ranks.load();
  s.collector_input_wait_seconds = m.collector_input_wait.seconds();
  s.collector_output_wait_seconds = m.collector_output_wait.seconds();
  s.merge_seconds = m.merge_time.seconds();
  s.exchange_seconds = m.exchange_time.seconds();
  s.exchange_meet_seconds = m.exchange_buffers.meeting.seconds();
  s.worker_output_wait_seconds = m.worker_output_wait.seconds();
  s.consumer_wait_seconds = m.consumer_wait.seconds();
  return s;
}

const BatchLayout& Pipeline::layout() const {
  return impl_->layout;
}
const PipelineOptions& Pipeline::options() const {
  return impl_->options;
}
int Pipeline::num_workers() const {
  return impl_->reader_threads;
}
int Pipeline::num_shards() const {
  return impl_->num_shards;
}

}  // namespace ember::data
