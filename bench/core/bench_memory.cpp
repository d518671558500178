// bench_memory: Ember's caching allocators against the alternatives, on the same traces.
//
//   bench_memory           full run on CUDA device 0: Ember's caching allocator, PyTorch's
//                          (through libtorch, where it was found at build time), cudaMallocAsync
//                          on its own pool, raw cudaMalloc (short traces); pinned memory and copy
//                          bandwidth. Ends with "SUMMARY |" lines for scripts/gpu-check.
//   bench_memory --quick   a short run of the caching policy against host memory (no GPU
//                          needed): the allocator's own overhead and its fragmentation.
//
// Traces: (a) alloc+free pairs per size, 1 and 8 threads; (b) small-size churn, LIFO and random
// order; (c) a replayed training-like iteration; (d) the same with the batch size drifting;
// (e) cross-stream use with record_stream; (f) pinned host churn and copy bandwidth.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/host_backend.hpp"
#include "core/memory_bench_common.hpp"
#include "core/memory_candidates.hpp"
#include "core/memory_traces.hpp"
#include "ember/core/allocator.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/caching_pinned_allocator.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/core/runtime_options.hpp"
#include "ember/core/staged_copy.hpp"
#include "ember/core/stream.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember::bench {
namespace {

// ---------------------------------------------------------------------------------------------
// (a) alloc+free pairs

struct PairResult {
  double median_ns = 0;
  double p99_ns = 0;
};

double clock_overhead_ns() {
  std::vector<double> v;
  for (int i = 0; i < 10000; ++i) {
    const auto t0 = Clock::now();
    const auto t1 = Clock::now();
    v.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return percentile(v, 0.5);
}

PairResult pairs(Candidate& c, std::size_t bytes, int threads, int count,
                 const std::vector<StreamHandle>& streams, double overhead) {
  c.reset();
  std::vector<std::vector<double>> times(threads);
  std::atomic<int> ready{0};
  auto body = [&](int t) {
    const StreamHandle s = streams[static_cast<std::size_t>(t) % streams.size()];
    for (int i = 0; i < 50; ++i)
      c.free(c.alloc(bytes, s), bytes, s);  // warm the cache
    ++ready;
    while (ready.load() < threads) {
    }
    // The thread's own vector, handed over at the end: the vectors' headers in `times` share
    // cache lines, and writing them at every pair would time the harness's contention too.
    std::vector<double> v;
    v.reserve(count);
    for (int i = 0; i < count; ++i) {
      const auto t0 = Clock::now();
      void* p = c.alloc(bytes, s);
      c.free(p, bytes, s);
      const auto t1 = Clock::now();
      v.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() - overhead);
    }
    times[t] = std::move(v);
  };
  if (threads == 1) {
    body(0);
  } else {
    // An exception must not escape a thread (that would terminate): the first is rethrown here.
    std::mutex error_mutex;
    std::exception_ptr error;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          body(t);
        } catch (...) {
          ready += threads;  // nobody waits for a thread that has given up
          std::lock_guard<std::mutex> lock(error_mutex);
          if (error == nullptr) error = std::current_exception();
        }
      });
    }
    for (auto& th : pool)
      th.join();
    if (error != nullptr) std::rethrow_exception(error);
  }
  c.settle();
  std::vector<double> all;
  for (auto& v : times)
    all.insert(all.end(), v.begin(), v.end());
  return {std::max(0.0, percentile(all, 0.5)), std::max(0.0, percentile(all, 0.99))};
}

// ---------------------------------------------------------------------------------------------
// Reporting

struct Summary {
  std::string metric, value, target;
  bool met;
};
std::vector<Summary> summaries;
// One line per target of issue 18, printed last: what the coordinator reads first.
std::vector<Summary> targets;

[[maybe_unused]] void target(std::string metric, std::string value, std::string goal, bool met) {
  targets.push_back({std::move(metric), std::move(value), std::move(goal), met});
}

[[maybe_unused]] void summary(std::string metric, std::string value, std::string target, bool met) {
  summaries.push_back({std::move(metric), std::move(value), std::move(target), met});
}

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string ratio_or_dash(std::int64_t reserved, std::int64_t live) {
  if (reserved < 0 || live <= 0) return "-";
  return fixed(static_cast<double>(reserved) / static_cast<double>(live), 3);
}

std::string count_or_dash(std::int64_t n) {
  return n < 0 ? "-" : std::to_string(n);
}

struct TraceRow {
  std::string trace, allocator;
  ReplayResult r;
  std::int64_t peak_live;
};

void print_pairs_header() {
  std::printf("\n(a) alloc+free pairs: ns per pair (median / p99)\n");
  std::printf("%-18s %-10s %8s %18s %18s\n", "allocator", "size", "threads", "median ns", "p99 ns");
}

void print_trace_table(const std::vector<TraceRow>& rows) {
  std::printf(
      "\n(b)-(e) replayed traces (ns/op: median of the replays, each from an empty cache)\n");
  std::printf("%-34s %-16s %10s %14s %10s\n", "trace", "allocator", "ns/op", "reserved/live",
              "dev allocs");
  for (const auto& row : rows) {
    std::printf("%-34s %-16s %10.1f %14s %10s\n", row.trace.c_str(), row.allocator.c_str(),
                row.r.ns_per_op, ratio_or_dash(row.r.peak_reserved, row.peak_live).c_str(),
                count_or_dash(row.r.device_allocs).c_str());
  }
}

const std::vector<std::size_t> kPairSizes = {512, 8 * KiB, 128 * KiB, 2 * MiB, 32 * MiB, 256 * MiB};

// ---------------------------------------------------------------------------------------------
// Quick run: the policy against host memory

int run_quick() {
  std::printf("bench_memory --quick: Ember's caching policy against a host-memory stand-in\n");
  std::printf("(allocator overhead and fragmentation only; device figures need the full run)\n");
  const double overhead = clock_overhead_ns();
  EmberCandidate ember([] { return std::make_unique<HostBackend>(); });
  const std::vector<StreamHandle> streams = {
      reinterpret_cast<StreamHandle>(std::uintptr_t{0x1000}),
      reinterpret_cast<StreamHandle>(std::uintptr_t{0x2000}),
      reinterpret_cast<StreamHandle>(std::uintptr_t{0x3000}),
      reinterpret_cast<StreamHandle>(std::uintptr_t{0x4000})};
  print_pairs_header();
  for (std::size_t n : kPairSizes) {
    for (int threads : {1, 4}) {
      const auto r = pairs(ember, n, threads, 20000, streams, overhead);
      std::printf("%-18s %-10s %8d %18.1f %18.1f\n", "ember", size_name(n).c_str(), threads,
                  r.median_ns, r.p99_ns);
    }
  }
  EmberCandidate expandable([] { return std::make_unique<HostBackend>(); }, true);
  std::vector<TraceRow> rows;
  for (const Trace& t : benchmark_traces()) {
    rows.push_back({t.name, ember.name(), replay(ember, t, streams), t.peak_live});
    rows.push_back({t.name, expandable.name(), replay(expandable, t, streams), t.peak_live});
  }
  print_trace_table(rows);
  std::printf("\nquick run done (no SUMMARY lines: those come from the full run on a GPU)\n");
  return 0;
}

// The single-thread fast path alone: cached alloc+free pairs on one stream, timed in bulk (no
// clock call per pair), best of several rounds so that other processes on the machine show less;
// and next to it the median of pairs timed one by one, as the device run times them (a clock
// read either side, the clock's own cost taken off). What a cached pair costs on a GPU too: no
// device call is made on it.
int run_fast_path() {
  std::printf("bench_memory --fast-path: 1-thread cached alloc+free pairs, host stand-in\n");
  std::printf("%-18s %-10s %14s %18s\n", "allocator", "size", "ns per pair", "median ns (a)");
  const double overhead = clock_overhead_ns();
  const auto stream = reinterpret_cast<StreamHandle>(std::uintptr_t{0x1000});
  for (bool expandable : {false, true}) {
    EmberCandidate c([] { return std::make_unique<HostBackend>(); }, expandable);
    for (std::size_t n : kPairSizes) {
      constexpr int kPairs = 20000;
      double best = 1e30;
      for (int round = 0; round < 60; ++round) {
        for (int i = 0; i < 100; ++i)
          c.free(c.alloc(n, stream), n, stream);
        const auto t0 = Clock::now();
        for (int i = 0; i < kPairs; ++i)
          c.free(c.alloc(n, stream), n, stream);
        best = std::min(best, seconds_since(t0) * 1e9 / kPairs);
      }
      const PairResult one_by_one = pairs(c, n, 1, kPairs, {stream}, overhead);
      std::printf("%-18s %-10s %14.1f %18.1f\n", c.name().c_str(), size_name(n).c_str(), best,
                  one_by_one.median_ns);
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Full run on CUDA device 0

#if EMBER_WITH_CUDA

double gbps(std::size_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9;
}

void run_pinned_and_copies() {
  std::printf("\n(f) pinned host memory\n");
  // Churn: Ember's caching pinned allocator against cudaHostAlloc/cudaFreeHost.
  std::mt19937_64 rng(41);
  std::vector<std::size_t> sizes(200000);
  for (auto& s : sizes)
    s = log_uniform(rng, 4 * KiB, 4 * MiB);
  {
    CachingPinnedAllocator pinned(make_cuda_pinned_backend());
    std::vector<void*> live;
    std::size_t ops = 0;
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (live.size() < 8 || (live.size() < 32 && rng() % 2 == 0)) {
        live.push_back(pinned.allocate(sizes[i]));
      } else {
        const std::size_t k = rng() % live.size();
        pinned.deallocate(live[k], 0);
        live[k] = live.back();
        live.pop_back();
      }
      ++ops;
    }
    const double s = seconds_since(t0);
    for (void* p : live)
      pinned.deallocate(p, 0);
    const auto st = pinned.stats();
    std::printf(
        "  churn, ember caching pinned: %.1f ns/op over %zu ops, %lld cudaHostAlloc calls, "
        "peak reserved %s\n",
        s * 1e9 / static_cast<double>(ops), ops, static_cast<long long>(st.host_allocs),
        format_bytes(static_cast<std::uint64_t>(st.reserved_bytes.peak)).c_str());
  }
  {
    const int n = 200;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      void* p = nullptr;
      check(cudaHostAlloc(&p, sizes[i], cudaHostAllocPortable), "cudaHostAlloc");
      check(cudaFreeHost(p), "cudaFreeHost");
    }
    std::printf("  churn, cudaHostAlloc+cudaFreeHost: %.1f ns per pair over %d pairs\n",
                seconds_since(t0) * 1e9 / n, n);
  }

  // Bandwidth: host to device from pinned memory, from pageable memory with a plain
  // cudaMemcpyAsync, and from pageable memory through Ember's staged copy.
  const std::size_t bytes = 256 * MiB;
  void* dev = nullptr;
  void* pinned = nullptr;
  check(cudaMalloc(&dev, bytes), "cudaMalloc");
  check(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable), "cudaHostAlloc");
  std::vector<std::uint8_t> pageable(bytes);
  std::memset(pageable.data(), 1, bytes);  // resident, as a real source would be
  std::memset(pinned, 1, bytes);
  Stream stream = Stream::create(0);
  auto measure = [&](auto&& copy) {
    copy();  // warm-up
    std::vector<double> v;
    for (int i = 0; i < 8; ++i) {
      const auto t0 = Clock::now();
      copy();
      v.push_back(gbps(bytes, seconds_since(t0)));
    }
    return percentile(v, 0.5);
  };
  const double h2d_pinned = measure([&] {
    check(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, stream.handle()), "copy");
    stream.synchronize();
  });
  const double h2d_naive = measure([&] {
    check(cudaMemcpyAsync(dev, pageable.data(), bytes, cudaMemcpyHostToDevice, stream.handle()),
          "copy");
    stream.synchronize();
  });
  const double h2d_staged = measure([&] {
    copy_bytes(dev, Place::cuda(0), pageable.data(), Place::host(), bytes, stream.handle());
    stream.synchronize();
  });
  const double d2h_pinned = measure([&] {
    check(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, stream.handle()), "copy");
    stream.synchronize();
  });
  const double d2h_staged = measure([&] {
    copy_bytes(pageable.data(), Place::host(), dev, Place::cuda(0), bytes, stream.handle());
  });
  const detail::StagingConfig defaults = detail::staging_config();
  const std::string chosen = detail::describe(detail::staging_calibration(0));
  std::printf("  staging setup from the machine: %s\n", chosen.c_str());
  summary("staging setup chosen from the machine", chosen, "-", true);
  std::printf("  copies of %s, GB/s (median of 8):\n", size_name(bytes).c_str());
  std::printf("    host->device from pinned             %6.1f\n", h2d_pinned);
  std::printf("    host->device from pageable, plain    %6.1f\n", h2d_naive);
  std::printf("    host->device from pageable, staged   %6.1f  (%d copy threads, %d slots of %s)\n",
              h2d_staged, defaults.threads, defaults.slots, size_name(defaults.slot_bytes).c_str());
  std::printf("    device->host to pinned               %6.1f\n", d2h_pinned);
  std::printf("    device->host to pageable, staged     %6.1f\n", d2h_staged);

  // Other staging setups, to choose the defaults from measurements: copy threads x slot size
  // (threads + 4 slots each).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("  staged copies by setup, GB/s (median of 8), host->device / device->host:\n");
  std::printf("    %-8s", "threads");
  const std::vector<std::size_t> slot_sizes = {1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB};
  for (std::size_t slot : slot_sizes)
    std::printf(" %19s", ("slots " + size_name(slot)).c_str());
  std::printf("\n");
  double best = 0;
  std::string best_setup;
  for (int threads : {4, 8, 12, 16}) {
    if (threads > cores) break;
    std::printf("    %-8d", threads);
    for (std::size_t slot : slot_sizes) {
      detail::set_staging_config({slot, 0, threads});
      const double up = measure([&] {
        copy_bytes(dev, Place::cuda(0), pageable.data(), Place::host(), bytes, stream.handle());
        stream.synchronize();
      });
      const double down = measure([&] {
        copy_bytes(pageable.data(), Place::host(), dev, Place::cuda(0), bytes, stream.handle());
      });
      std::printf("        %5.1f / %5.1f", up, down);
      if (up > best) {
        best = up;
        best_setup = std::to_string(threads) + " threads, " + size_name(slot) + " slots";
      }
    }
    std::printf("\n");
  }
  detail::set_staging_config({});
  check(cudaFree(dev), "cudaFree");
  check(cudaFreeHost(pinned), "cudaFreeHost");
  summary("pinned host-to-device bandwidth", fixed(h2d_pinned, 1) + " GB/s", ">= 50 GB/s",
          h2d_pinned >= 50);
  const double share = h2d_staged / h2d_pinned;
  summary("pageable host-to-device through staging / pinned",
          fixed(100 * share, 0) + "% (" + fixed(h2d_staged, 1) + " GB/s)", ">= 80%", share >= 0.8);
  target("pageable host-to-device through staging, setup chosen from the machine",
         fixed(100 * share, 0) + "% of pinned (" + fixed(h2d_staged, 1) + " of " +
             fixed(h2d_pinned, 1) + " GB/s; " + std::to_string(defaults.threads) + " threads, " +
             size_name(defaults.slot_bytes) + " slots)",
         ">= 80% of pinned", share >= 0.8);
  if (!best_setup.empty()) {
    summary("pageable host-to-device through staging / pinned, best setup (" + best_setup + ")",
            fixed(100 * best / h2d_pinned, 0) + "% (" + fixed(best, 1) + " GB/s)", ">= 80%",
            best >= 0.8 * h2d_pinned);
  }
}

using PairResults = std::map<std::tuple<std::size_t, int, std::string>, PairResult>;

// Time ratio of `mine` to each peer's on one trace (or one pair size and thread count): the
// worst over all of them is what "never slower than the peer" is judged by.
struct Ratios {
  std::vector<std::pair<std::string, double>> v;
  void add(std::string what, double mine, double theirs) {
    if (theirs > 0) v.emplace_back(std::move(what), mine / theirs);
  }
  void add(const Ratios& other) { v.insert(v.end(), other.v.begin(), other.v.end()); }
  // "1.23 ((a) 128 KiB x8)" and whether it is <= 1.
  std::pair<std::string, bool> worst() const {
    if (v.empty()) return {"n/a (nothing compared)", false};
    auto w = std::max_element(v.begin(), v.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; });
    return {fixed(w->second, 2) + " (" + w->first + ")", w->second <= 1.0};
  }
};

void summarize_ratio(const std::string& metric, const Ratios& r, const std::string& failure) {
  if (!failure.empty()) {
    summary(metric, "FAILED (" + failure + ")", "<= 1.00", false);
    return;
  }
  const auto [value, met] = r.worst();
  summary(metric, value, "<= 1.00", met);
}

// Also adds the default mode's ratios to the peers to `all_torch` and `all_async` (the targets
// judge pairs and traces together).
void summarize_pairs(const PairResults& results, Candidate& main_mode, Candidate& other_mode,
                     Candidate* torch, Candidate& async, const std::string& torch_failure,
                     Ratios& all_torch, Ratios& all_async) {
  auto find = [&](std::size_t n, int threads, const Candidate* c) -> const PairResult* {
    if (c == nullptr) return nullptr;
    auto it = results.find({n, threads, c->name()});
    return it == results.end() ? nullptr : &it->second;
  };
  double worst_median_1 = 0;
  Ratios vs_torch, vs_async;
  // The default mode at 8 threads: the worst median and p99 over the sizes, and where.
  double worst_median_8 = -1, worst_p99_8 = -1;
  std::string worst_median_at, worst_p99_at;
  for (std::size_t n : kPairSizes) {
    if (const PairResult* e = find(n, 1, &main_mode)) {
      worst_median_1 = std::max(worst_median_1, e->median_ns);
    }
    for (int threads : {1, 8}) {
      const std::string what = "(a) " + size_name(n) + " x" + std::to_string(threads);
      for (Candidate* mode : {&main_mode, &other_mode}) {
        const PairResult* e = find(n, threads, mode);
        if (e == nullptr) continue;
        const PairResult* t = find(n, threads, torch);
        const PairResult* a = find(n, threads, &async);
        if (mode == &main_mode) {
          if (t != nullptr) vs_torch.add(what, e->median_ns, t->median_ns);
          if (a != nullptr) vs_async.add(what, e->median_ns, a->median_ns);
        }
        if (threads != 8) continue;
        if (mode == &main_mode && e->median_ns > worst_median_8) {
          worst_median_8 = e->median_ns;
          worst_median_at = size_name(n);
        }
        if (mode == &main_mode && e->p99_ns > worst_p99_8) {
          worst_p99_8 = e->p99_ns;
          worst_p99_at = size_name(n);
        }
        // Issue 18: at 8 threads on 8 streams, median <= 2 us and p99 <= 50 us at every size,
        // and never slower than either peer.
        std::string peers;
        bool met = e->median_ns <= 2000 && e->p99_ns <= 50000;
        if (t != nullptr) {
          peers += ", pytorch " + fixed(t->median_ns / 1000, 2) + " us";
          met = met && e->median_ns <= t->median_ns;
        } else {
          peers += ", pytorch n/a";
          met = false;
        }
        if (a != nullptr) {
          peers += ", cudaMallocAsync " + fixed(a->median_ns / 1000, 2) + " us";
          met = met && e->median_ns <= a->median_ns;
        }
        summary(mode->name() + " alloc+free pair, 8 threads on 8 streams, " + size_name(n) +
                    ": median / p99",
                fixed(e->median_ns / 1000, 2) + " / " + fixed(e->p99_ns / 1000, 1) + " us" + peers,
                "<= 2 us / <= 50 us, median <= both peers'", met);
      }
    }
  }
  summary(main_mode.name() + " cached alloc+free pair, median, 1 thread (worst size)",
          fixed(worst_median_1, 1) + " ns", "<= 200 ns", worst_median_1 <= 200);
  const PairResult* e512 = find(512, 1, &main_mode);
  const PairResult* a512 = find(512, 1, &async);
  if (e512 != nullptr && a512 != nullptr) {
    summary("cudaMallocAsync / ember pair time, 512 B, 1 thread",
            fixed(a512->median_ns / std::max(e512->median_ns, 1.0), 1) + "x", ">= 3x",
            a512->median_ns >= 3 * e512->median_ns);
  }
  summarize_ratio("ember / pytorch pair time, worst size and thread count", vs_torch,
                  torch == nullptr ? "PyTorch not loaded" : torch_failure);
  summarize_ratio("ember / cudaMallocAsync pair time, worst size and thread count", vs_async, "");
  all_torch.add(vs_torch);
  all_async.add(vs_async);
  if (worst_median_8 < 0) {
    target("alloc+free pairs, 8 threads on 8 streams, every size", "not measured",
           "median <= 2 us, p99 <= 50 us", false);
    return;
  }
  target("alloc+free pairs, 8 threads on 8 streams, every size (" + main_mode.name() + ")",
         "worst median " + fixed(worst_median_8 / 1000, 2) + " us (" + worst_median_at +
             "), worst p99 " + fixed(worst_p99_8 / 1000, 1) + " us (" + worst_p99_at + ")",
         "median <= 2 us, p99 <= 50 us", worst_median_8 <= 2000 && worst_p99_8 <= 50000);
}

void summarize_traces(const std::vector<TraceRow>& rows, Candidate& main_mode,
                      Candidate& other_mode, Candidate* torch, Candidate& async,
                      const std::string& torch_failure, Ratios& all_torch, Ratios& all_async) {
  auto find = [&](const std::string& trace, const Candidate* c) -> const TraceRow* {
    if (c == nullptr) return nullptr;
    for (const TraceRow& r : rows) {
      if (r.trace == trace && r.allocator == c->name()) return &r;
    }
    return nullptr;
  };
  Ratios vs_torch, vs_async, vs_other_mode;
  std::string fragmentation;  // the default mode on (c) and (d)
  bool fragmentation_met = true;
  for (const Trace& t : benchmark_traces()) {
    const TraceRow* e = find(t.name, &main_mode);
    if (e == nullptr) continue;
    if (const TraceRow* p = find(t.name, torch))
      vs_torch.add(t.name, e->r.ns_per_op, p->r.ns_per_op);
    if (const TraceRow* a = find(t.name, &async))
      vs_async.add(t.name, e->r.ns_per_op, a->r.ns_per_op);
    if (const TraceRow* o = find(t.name, &other_mode)) {
      vs_other_mode.add(t.name, e->r.ns_per_op, o->r.ns_per_op);
    }
    // Fragmentation per trace and mode; the target (issue 18) is on (c) and (d).
    const bool targeted = t.name.rfind("(c)", 0) == 0 || t.name.rfind("(d)", 0) == 0;
    for (Candidate* mode : {&main_mode, &other_mode}) {
      const TraceRow* r = find(t.name, mode);
      if (r == nullptr) continue;
      const double ratio =
          static_cast<double>(r->r.peak_reserved) / static_cast<double>(r->peak_live);
      summary("peak reserved / peak live, " + t.name + ", " + mode->name() +
                  (mode == &main_mode ? " (default)" : ""),
              fixed(ratio, 3), targeted ? "<= 1.10" : "-", !targeted || ratio <= 1.10);
      if (targeted && mode == &main_mode) {
        fragmentation +=
            (fragmentation.empty() ? "" : ", ") + t.name.substr(0, 3) + " " + fixed(ratio, 3);
        fragmentation_met = fragmentation_met && ratio <= 1.10;
      }
    }
  }
  summarize_ratio("ember / pytorch time, worst trace", vs_torch,
                  torch == nullptr ? "PyTorch not loaded" : torch_failure);
  summarize_ratio("ember / cudaMallocAsync time, worst trace", vs_async, "");
  // The default mode must cost no time against the other on any trace.
  summarize_ratio(main_mode.name() + " (default) / " + other_mode.name() + " time, worst trace",
                  vs_other_mode, "");
  all_torch.add(vs_torch);
  all_async.add(vs_async);
  target("fragmentation of the default mode (" + main_mode.name() + "), peak reserved / live",
         fragmentation.empty() ? "not measured" : fragmentation, "<= 1.10 on (c) and (d)",
         !fragmentation.empty() && fragmentation_met);
  const auto [cost, no_cost] = vs_other_mode.worst();
  target("the default mode costs no time: " + main_mode.name() + " / " + other_mode.name() +
             ", worst trace",
         cost, "<= 1.00", no_cost);
}

// The peers' targets: never slower than PyTorch or cudaMallocAsync, pairs and traces together.
void target_peers(const Ratios& all_torch, const Ratios& all_async,
                  const std::string& torch_failure, bool torch_loaded) {
  if (!torch_loaded || !torch_failure.empty()) {
    target("never slower than PyTorch (pairs and traces), worst ratio",
           "FAILED (" + (torch_loaded ? torch_failure : std::string("PyTorch not loaded")) + ")",
           "<= 1.00", false);
  } else {
    const auto [value, met] = all_torch.worst();
    target("never slower than PyTorch (pairs and traces), worst ratio", value, "<= 1.00", met);
  }
  const auto [value, met] = all_async.worst();
  target("never slower than cudaMallocAsync (pairs and traces), worst ratio", value, "<= 1.00",
         met);
}

void print_summaries_and_targets(const char* device_name) {
  for (const auto& s : summaries) {
    std::printf("SUMMARY | memory | %s | %s | %s | %s\n", s.metric.c_str(), s.value.c_str(),
                s.target.c_str(), s.met ? "yes" : "no");
  }
  int missed = 0;
  std::printf("\nissue 18 targets on %s:\n", device_name);
  for (const auto& t : targets) {
    std::printf("TARGET | memory | %s | %s | target %s | %s\n", t.metric.c_str(), t.value.c_str(),
                t.target.c_str(), t.met ? "met" : "NOT met");
    missed += t.met ? 0 : 1;
  }
  std::printf("TARGET | memory | all targets | %d of %zu met | %s\n",
              static_cast<int>(targets.size()) - missed, targets.size(),
              missed == 0 ? "met" : "NOT met");
}

int run_full(bool with_torch) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("bench_memory: device 0 is %s (%.1f GiB)\n", prop.name,
              static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024 * 1024));
  const auto start = Clock::now();
  const double overhead = clock_overhead_ns();

  std::vector<Stream> owned;
  std::vector<StreamHandle> streams;
  for (int i = 0; i < 8; ++i) {
    owned.push_back(Stream::create(0));
    streams.push_back(owned.back().handle());
  }

  EmberCandidate ember([] { return make_cuda_device_backend(0); });
  EmberCandidate expandable([] { return make_cuda_device_backend(0); }, true);
  if (!expandable.as_asked()) {
    std::printf(
        "device 0 has no virtual memory management: 'ember expandable' uses ordinary "
        "segments\n");
  }
  MallocAsyncCandidate async;
  RawCudaCandidate raw;
  std::unique_ptr<TorchCandidate> torch;
  if (with_torch) {
    std::string why;
    torch = TorchCandidate::load(why);
    if (torch) {
      std::printf("PyTorch %s: its CUDA caching allocator through libtorch\n",
                  torch->version().c_str());
    } else {
      std::printf("PyTorch's allocator is not compared: %s\n", why.c_str());
    }
  }
  std::vector<Candidate*> cached = {&ember, &expandable};
  if (torch) cached.push_back(torch.get());
  cached.push_back(&async);
  // A failure inside PyTorch's allocator drops its column from there on; the run goes on.
  std::string torch_failure;
  auto skip = [&](Candidate* c) { return c == torch.get() && !torch_failure.empty(); };
  auto torch_failed = [&](const TorchFailure& e) {
    torch_failure = e.what();
    std::printf("PyTorch's allocator failed (%s): its column is left out from here on\n", e.what());
  };

  // The mode EMBER_ALLOCATOR selects when unset, and the other one.
  const bool default_expandable = kDefaultAllocatorMode == AllocatorMode::Expandable;
  EmberCandidate& main_mode = default_expandable ? expandable : ember;
  EmberCandidate& other_mode = default_expandable ? ember : expandable;
  std::printf("default mode: %s\n", main_mode.name().c_str());

  // (a)
  print_pairs_header();
  // Pair results by (size, threads, allocator).
  std::map<std::tuple<std::size_t, int, std::string>, PairResult> pair_results;
  for (std::size_t n : kPairSizes) {
    for (int threads : {1, 8}) {
      for (Candidate* c : cached) {
        if (skip(c)) continue;
        PairResult r;
        try {
          r = pairs(*c, n, threads, threads == 1 ? 20000 : 5000, streams, overhead);
        } catch (const TorchFailure& e) {
          if (c != torch.get()) throw;
          torch_failed(e);
          continue;
        }
        std::printf("%-18s %-10s %8d %18.1f %18.1f\n", c->name().c_str(), size_name(n).c_str(),
                    threads, r.median_ns, r.p99_ns);
        pair_results[{n, threads, c->name()}] = r;
      }
    }
    const auto r = pairs(raw, n, 1, n >= 32 * MiB ? 50 : 200, streams, overhead);
    std::printf("%-18s %-10s %8d %18.1f %18.1f\n", raw.name().c_str(), size_name(n).c_str(), 1,
                r.median_ns, r.p99_ns);
  }

  // (b)-(e)
  std::vector<TraceRow> rows;
  constexpr int kTraceReplays = 5;  // interleaved; the median time counts (median_replay)
  for (const Trace& t : benchmark_traces()) {
    std::map<Candidate*, std::vector<ReplayResult>> runs;
    for (int rep = 0; rep < kTraceReplays; ++rep) {
      for (Candidate* c : cached) {
        if (skip(c)) continue;
        try {
          runs[c].push_back(replay(*c, t, streams));
        } catch (const TorchFailure& e) {
          if (c != torch.get()) throw;
          torch_failed(e);
        }
      }
    }
    for (Candidate* c : cached) {
      if (!skip(c) && !runs[c].empty())
        rows.push_back({t.name, c->name(), median_replay(runs[c]), t.peak_live});
    }
  }
  print_trace_table(rows);

  run_pinned_and_copies();

  Ratios all_torch, all_async;
  summarize_pairs(pair_results, main_mode, other_mode, torch.get(), async, torch_failure, all_torch,
                  all_async);
  summarize_traces(rows, main_mode, other_mode, torch.get(), async, torch_failure, all_torch,
                   all_async);
  target_peers(all_torch, all_async, torch_failure, torch != nullptr);
  const std::int64_t waits = ember.synchronizations() + ember.retries() +
                             expandable.synchronizations() + expandable.retries();
  summary("ember blocking waits + cache flushes outside OOM", std::to_string(waits), "0",
          waits == 0);
  std::printf("\nfull run took %.1f s\n\n", seconds_since(start));
  print_summaries_and_targets(prop.name);
  return 0;
}

int run_copies() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("bench_memory --copies: device 0 is %s\n", prop.name);
  run_pinned_and_copies();
  std::printf("\n");
  print_summaries_and_targets(prop.name);
  return 0;
}

#endif  // EMBER_WITH_CUDA

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  // Line by line even into a pipe: if something crashes, what was measured so far is in the log.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  bool quick = false, fast_path = false, with_torch = true, copies_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--fast-path") {
      fast_path = true;
    } else if (arg == "--copies") {
      copies_only = true;
    } else if (arg == "--no-torch") {
      with_torch = false;
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: bench_memory [--quick | --fast-path | --copies] [--no-torch]\n"
          "  --quick      short CPU run of the caching policy (no GPU needed)\n"
          "  --fast-path  1-thread cached alloc+free pairs on the host stand-in (no GPU needed)\n"
          "  --copies     only the pinned allocator and the host<->device copies (staging)\n"
          "  --no-torch   leave PyTorch's allocator out of the full run\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_memory: unknown argument '%s' (try --help)\n", arg.c_str());
      return 2;
    }
  }
  try {
    if (quick) return ember::bench::run_quick();
    if (fast_path) return ember::bench::run_fast_path();
#if EMBER_WITH_CUDA
    if (copies_only && ember::cuda_available()) return ember::bench::run_copies();
    if (ember::cuda_available()) return ember::bench::run_full(with_torch);
#endif
    (void)with_torch;
    std::printf("bench_memory: no CUDA device here, so only the quick CPU run is possible\n\n");
    return ember::bench::run_quick();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_memory: %s\n", e.what());
    return 1;
  }
}
