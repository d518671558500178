// The host's share of shared reading per batch (issue 14): data::exchange_batch_keys, which every
// process of a job runs on its pipeline's collector thread for every batch, one batch at a time
// and in step with the other processes. P processes are P threads here, exchanging through an
// in-memory all-gather (a copy of each message to every thread, as MPI's shared-memory transport
// delivers them); each holds a DLRM-Kaggle-shaped batch (26 one-hot slots) with its window's keys
// parsed. Reports the median ms per batch and the samples/s that bounds a job's input path.
//
//   bench_key_exchange [--samples N] [--processes P] [--keys u32|i64] [--reps R]
//   mpirun -np P bench_key_exchange --mpi [...]   real processes, as a job's pipelines exchange:
//                                                 the keys through shared memory (the default of
//                                                 processes on one machine), then by MPI in
//                                                 place; also the keys' all-gather alone
//
// Ends with SUMMARY lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ember/data/host_batch.hpp"
#include "ember/data/key_exchange.hpp"
#include "ember/data/thread_exchange.hpp"
#include "ember/distributed/node_shared_gather.hpp"
#include "ember/distributed/process_channel.hpp"
#include "ember/distributed/process_world.hpp"

namespace {

using namespace ember;
using namespace ember::data;
using Clock = std::chrono::steady_clock;

BatchLayout kaggle_layout(DType keys) {
  BatchLayout layout;
  layout.label_dim = 1;
  layout.dense_dim = 13;
  layout.key_type = keys;
  layout.sparse.push_back({"data1", 26, 26, 1});
  return layout;
}

// Process p's batch as its pipeline hands it over: its window's rows parsed (one key a slot), the
// other processes' rows committed with room for their keys (add_rows_parsed_elsewhere).
void fill_batch(HostBatch& batch, const Share& window, std::int64_t samples, int p) {
  const BatchLayout& layout = batch.layout();
  batch.add_rows_parsed_elsewhere(window.offset);
  {
    HostBatch parsed(layout, window.size);
    std::mt19937_64 rng(static_cast<std::uint64_t>(p) + 1);
    std::int64_t* off = parsed.row_offsets(0);
    for (std::int64_t r = 0; r < window.size * 26; ++r)
      off[r + 1] = r + 1;
    for (std::int64_t k = 0; k < window.size * 26; ++k) {
      if (layout.key_type == DType::U32) {
        parsed.values_as<std::uint32_t>(0)[k] = static_cast<std::uint32_t>(rng() >> 40);
      } else {
        parsed.values_as<std::int64_t>(0)[k] = static_cast<std::int64_t>(rng() >> 30);
      }
    }
    parsed.set_size(window.size);
    batch.append(parsed, 0, window.size);
  }
  batch.add_rows_parsed_elsewhere(samples - window.offset - window.size);
}

// Each batch's time is the slowest process's: the next exchange waits for it.
double median_of_slowest(const std::vector<std::vector<double>>& ms, int reps) {
  std::vector<double> per_batch(static_cast<std::size_t>(reps), 0.0);
  for (const auto& m : ms) {
    for (int r = 0; r < reps; ++r)
      per_batch[static_cast<std::size_t>(r)] =
          std::max(per_batch[static_cast<std::size_t>(r)], m[static_cast<std::size_t>(r)]);
  }
  std::sort(per_batch.begin(), per_batch.end());
  return per_batch[per_batch.size() / 2];
}

// Median ms per exchange of one batch of `samples` among `processes` threads.
double time_exchange(std::int64_t samples, int processes, DType keys, int reps) {
  const BatchLayout layout = kaggle_layout(keys);
  auto hub = std::make_shared<ThreadRendezvous>(processes);
  std::vector<std::vector<double>> ms(static_cast<std::size_t>(processes));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(processes));
  std::vector<std::thread> threads;
  for (int p = 0; p < processes; ++p) {
    threads.emplace_back([&, p] {
      try {
        const Share window = process_window(samples, {processes, p}, 1);
        HostBatch batch(layout, samples);
        fill_batch(batch, window, samples, p);
        ThreadExchange exchange(hub, p);
        KeyExchangeBuffers buffers;  // the pipeline's collector keeps them
        for (int rep = 0; rep < reps + 2; ++rep) {
          const auto t0 = Clock::now();
          exchange_batch_keys(batch, window, {rep, samples, 16}, exchange, &buffers);
          const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          if (rep >= 2) ms[static_cast<std::size_t>(p)].push_back(t);  // two warm-up batches
        }
      } catch (...) {
        errors[static_cast<std::size_t>(p)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return median_of_slowest(ms, reps);
}

// The exchange over MPI, as a job's pipeline runs it (train/shared_reading.cpp's exchange over a
// channel of its own): the keys through memory the processes share where `shared` is given,
// else by MPI in place.
class ChannelExchange final : public ProcessExchange {
 public:
  ChannelExchange(distributed::ProcessChannel& channel, distributed::NodeSharedGather* shared)
      : channel_(channel), shared_(shared) {}
  int process() const override { return channel_.rank(); }
  int processes() const override { return channel_.size(); }
  std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) override {
    return channel_.all_gather(mine);
  }
  void all_gather_into(const std::vector<std::byte>& mine, GatheredMessages& all) override {
    channel_.all_gather(mine, all.bytes, all.offsets);
  }
  void all_gather_in_place(std::byte* buffer, const std::vector<std::int64_t>& counts,
                           const std::vector<std::int64_t>& displs) override {
    if (shared_ != nullptr && shared_->all_gather_in_place(buffer, counts, displs)) return;
    channel_.all_gather_in_place(buffer, counts, displs);
  }

 private:
  distributed::ProcessChannel& channel_;
  distributed::NodeSharedGather* shared_;
};

struct MpiTimes {
  double exchange = 0;  // ms per batch, the slowest process's, median
  double keys = 0;      // the keys' in-place all-gather alone
};

// Every batch starts as the readers leave it (this process's keys first, the other rows
// with room for their keys): a copy of the parsed batch, made outside the timing.
MpiTimes time_exchange_over_mpi(std::int64_t samples, DType keys, int reps, bool shared_memory) {
  auto channel = distributed::ProcessChannel::open();
  auto shared = distributed::NodeSharedGather::open(shared_memory);
  const int p = channel->rank(), processes = channel->size();
  const BatchLayout layout = kaggle_layout(keys);
  const Share window = process_window(samples, {processes, p}, 1);
  HostBatch parsed(layout, samples), batch(layout, samples);
  fill_batch(parsed, window, samples, p);
  ChannelExchange exchange(*channel, shared.get());
  KeyExchangeBuffers buffers;
  // The keys' pieces: every window's one key a slot, in process order.
  const auto key_bytes = static_cast<std::int64_t>(layout.key_size()) * 26;
  std::vector<std::int64_t> counts, displs;
  for (int q = 0; q < processes; ++q) {
    const Share w = process_window(samples, {processes, q}, 1);
    counts.push_back(w.size * key_bytes);
    displs.push_back(w.offset * key_bytes);
  }
  std::vector<double> mine_exchange, mine_keys;
  for (int rep = 0; rep < reps + 2; ++rep) {
    batch.clear();
    batch.append(parsed, 0, samples);
    auto t0 = Clock::now();
    exchange_batch_keys(batch, window, {rep, samples, 16}, exchange, &buffers);
    const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    // The keys once more, alone.
    t0 = Clock::now();
    exchange.all_gather_in_place(static_cast<std::byte*>(batch.values(0)), counts, displs);
    const double k = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (rep >= 2) {
      mine_exchange.push_back(t);
      mine_keys.push_back(k);
    }
  }
  const std::vector<double> all_exchange = distributed::all_gather_processes_f64(mine_exchange);
  const std::vector<double> all_keys = distributed::all_gather_processes_f64(mine_keys);
  std::vector<std::vector<double>> e(static_cast<std::size_t>(processes)),
      g(static_cast<std::size_t>(processes));
  for (int q = 0; q < processes; ++q) {
    for (int r = 0; r < reps; ++r) {
      e[static_cast<std::size_t>(q)].push_back(
          all_exchange[static_cast<std::size_t>(q * reps + r)]);
      g[static_cast<std::size_t>(q)].push_back(all_keys[static_cast<std::size_t>(q * reps + r)]);
    }
  }
  return {median_of_slowest(e, reps), median_of_slowest(g, reps)};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> samples = {131072};
  std::vector<int> processes = {2};
  DType keys = DType::U32;
  int reps = 9;
  bool mpi = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool value = i + 1 < argc;
    if (a == "--samples" && value) {
      samples = {std::stoll(argv[++i])};
    } else if (a == "--processes" && value) {
      processes = {std::stoi(argv[++i])};
    } else if (a == "--keys" && value) {
      keys = std::string(argv[++i]) == "i64" ? DType::I64 : DType::U32;
    } else if (a == "--mpi") {
      mpi = true;
    } else if (a == "--reps" && value) {
      reps = std::max(1, std::stoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: bench_key_exchange [--samples N] [--processes P] [--keys u32|i64] "
                   "[--reps R] [--mpi]\n");
      return 2;
    }
  }
  if (mpi) {
    const distributed::ProcessWorld world = distributed::join_mpi_world();
    for (std::int64_t n : samples) {
      for (const bool shared_memory : {true, false}) {
        const MpiTimes t = time_exchange_over_mpi(n, keys, reps, shared_memory);
        if (world.rank != 0) continue;
        const char* way = shared_memory ? "shared memory" : "MPI in place";
        std::printf(
            "bench_key_exchange --mpi: %d processes, %s keys, global batch %lld, keys by %s: "
            "%.2f ms per batch (bounds the job at %.2f M samples/s), of which the keys' "
            "all-gather alone %.2f ms\n",
            world.size, keys == DType::U32 ? "u32" : "i64", static_cast<long long>(n), way,
            t.exchange, static_cast<double>(n) / t.exchange / 1e3, t.keys);
        std::printf(
            "SUMMARY | data | key exchange over MPI, batch %lld, %d processes, keys by %s, ms "
            "per batch (keys alone) | %.2f (%.2f) | - | -\n",
            static_cast<long long>(n), world.size, way, t.exchange, t.keys);
      }
    }
    return 0;
  }
  std::printf("bench_key_exchange: %u hardware threads, %s keys, 26 one-hot slots\n",
              std::thread::hardware_concurrency(), keys == DType::U32 ? "u32" : "i64");
  for (std::int64_t n : samples) {
    for (int p : processes) {
      const double ms = time_exchange(n, p, keys, reps);
      std::printf(
          "  global batch %lld, %d processes: %.2f ms per batch (bounds the job at %.2f M "
          "samples/s)\n",
          static_cast<long long>(n), p, ms, static_cast<double>(n) / ms / 1e3);
      std::printf(
          "SUMMARY | data | key exchange, batch %lld, %d processes, ms per batch | %.2f | "
          "- | -\n",
          static_cast<long long>(n), p, ms);
    }
  }
  return 0;
}
