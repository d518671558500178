// Input-pipeline throughput: how fast Norm and Parquet data are parsed per thread, how the
// pipeline scales with reader threads (from the page cache), and (--gpu) how many samples per
// second it puts into device memory with nothing else running.
//
//   build/bench/bench_data [--gpu] [--quick] [--parsers] [--threads N] [--samples N] [--dir DIR]
//   build/bench/bench_data --config CONFIG.json [--threads N] [--samples N] [--gpu] ...
//
// Two Norm datasets are generated in a temporary directory (and removed at the end): DLRM-shaped
// (1 label, 13 dense, 26 one-hot slots) and multi-hot (26 slots of 1..10 keys), both with check
// Sum and u32 keys, 16 files each; the DLRM set is written again as Parquet (bench_parquet.cpp:
// the same samples and keys, Ember's writer with each codec). They are read once before timing
// so they sit in the page cache. --parsers measures the one-thread parsers alone (no pipelines,
// no peers). --config measures a model configuration's Data layer instead (bench_config.cpp).
// After each pipeline run it prints where the time went (Pipeline::stats(), the caching pinned
// allocator's counters, the process's CPU time and context switches), so a slow configuration on
// the device shows its cause in the same output.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "data/bench_data_support.hpp"
#include "ember/core/caching_allocators.hpp"
#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/norm_writer.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/random_stream.hpp"

namespace ember::benchdata {

namespace fs = std::filesystem;
using namespace ember::data;

namespace {

Args parse(int argc, char** argv) {
  Args a;
  a.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_data: %s needs a value\n", s.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (s == "--gpu")
      a.gpu = 1;
    else if (s == "--no-gpu")
      a.gpu = 0;
    else if (s == "--quick")
      a.quick = true;
    else if (s == "--parsers")
      a.parsers_only = true;
    else if (s == "--threads")
      a.threads = std::stoi(value());
    else if (s == "--samples")
      a.samples = std::stoll(value());
    else if (s == "--dir")
      a.dir = value();
    else if (s == "--config")
      a.config = value();
    else if (s == "--help" || s == "-h") {
      std::printf(
          "usage: bench_data [--gpu|--no-gpu] [--quick] [--parsers] [--threads N] [--samples N] "
          "[--dir DIR] [--config FILE]\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "bench_data: unknown argument %s\n", s.c_str());
      std::exit(2);
    }
  }
  if (a.quick) a.samples /= 8;
  return a;
}

}  // namespace

// Power-law-ish keys are irrelevant to parsing speed, uniform ones do.
void draw_sample(std::int64_t i, int nnz_max, std::vector<float>& label, std::vector<float>& dense,
                 std::vector<std::int32_t>& nnz, std::vector<std::uint32_t>& keys) {
  RandomStream rng(7, 1, static_cast<std::uint64_t>(i));
  label[0] = static_cast<float>(rng.below(2));
  for (auto& x : dense)
    x = static_cast<float>(rng.uniform() * 8);
  keys.clear();
  for (int s = 0; s < 26; ++s) {
    nnz[static_cast<std::size_t>(s)] =
        1 + static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(nnz_max)));
    for (int k = 0; k < nnz[static_cast<std::size_t>(s)]; ++k) {
      keys.push_back(static_cast<std::uint32_t>(s * 100000 + rng.below(100000)));
    }
  }
}

namespace {

Dataset write_dataset(const fs::path& dir, const std::string& name, std::int64_t samples,
                      int nnz_max, int files, int threads) {
  fs::create_directories(dir);
  Dataset d;
  d.name = name;
  d.samples = samples;
  d.layout.label_dim = 1;
  d.layout.dense_dim = 13;
  d.layout.key_type = DType::U32;
  d.layout.sparse.push_back({"data1", 26, 26 * nnz_max, nnz_max});
  std::vector<std::string> paths;
  for (int f = 0; f < files; ++f)
    paths.push_back((dir / (name + "_" + std::to_string(f) + ".data")).string());
  std::vector<std::thread> pool;
  std::atomic<int> next{0};
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&] {
      for (int f = next++; f < files; f = next++) {
        NormWriter w(paths[static_cast<std::size_t>(f)], {CheckMode::Sum, DType::U32, 1, 13, 26});
        std::vector<float> label(1), dense(13);
        std::vector<std::int32_t> nnz(26);
        std::vector<std::uint32_t> keys;
        const std::int64_t begin = samples * f / files, end = samples * (f + 1) / files;
        for (std::int64_t i = begin; i < end; ++i) {
          draw_sample(i, nnz_max, label, dense, nnz, keys);
          w.write<std::uint32_t>(label, dense, nnz, keys);
        }
        w.close();
      }
    });
  }
  for (auto& t : pool)
    t.join();
  write_file_list((dir / (name + ".txt")).string(), paths);
  d.list = (dir / (name + ".txt")).string();
  for (const auto& p : paths)
    d.bytes += fs::file_size(p);
  d.files = paths;
  return d;
}

}  // namespace

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double run_peer_samples_per_s(const std::string& command, const char* peer) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return 0;
  char buf[4096];
  std::string out;
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    out.append(buf, n);
  const int status = ::pclose(pipe);
  const auto at = out.find("\"samples_per_s\":");
  if (status != 0 || at == std::string::npos) {
    std::printf("  %s: failed (%s)\n", peer, out.c_str());
    return 0;
  }
  return std::strtod(out.c_str() + at + 16, nullptr);
}

namespace {

// One thread, NormFileReader straight into a batch buffer: the parser's own speed (samples per
// CPU-second, returned).
double bench_parser(const Dataset& d, std::vector<std::string>& summary) {
  const FileList list = read_file_list(d.list);
  NormFileReader reader(d.layout, CheckMode::Sum);
  HostBatch batch(d.layout, 65536);
  double best = 1e30, best_cpu = 1e30;
  std::int64_t samples = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    samples = 0;
    for (const auto& f : list.files) {
      reader.open(f);
      while (!reader.done()) {
        batch.clear();
        samples += reader.read(batch);
      }
    }
    best = std::min(best, seconds_since(t0));
    best_cpu = std::min(best_cpu, thread_cpu_seconds() - c0);
  }
  const double gbps = static_cast<double>(d.bytes) / best_cpu / 1e9;
  std::printf(
      "  parser, 1 thread           %8.2f M samples/s  %6.2f GB/s wall; %.2f GB/s per CPU-second\n",
      static_cast<double>(samples) / best / 1e6, static_cast<double>(d.bytes) / best / 1e9, gbps);
  char line[256];
  std::snprintf(
      line, sizeof line,
      "SUMMARY | data | Norm parse 1 thread (%s), per CPU-second | %.2f GB/s | >= 1 GB/s | %s",
      d.name.c_str(), gbps, gbps >= 1.0 ? "yes" : "no");
  summary.emplace_back(line);
  return static_cast<double>(samples) / best_cpu;
}

// The caching pinned allocator's counters (GPU runs only: it needs a device).
struct PinnedSnapshot {
  bool valid = false;
  std::int64_t host_allocs = 0;  // cudaHostAlloc calls
  std::int64_t num_allocs = 0;   // blocks handed out
  std::int64_t reserved = 0;     // bytes pinned, in use or cached
};

PinnedSnapshot pinned_snapshot(bool gpu) {
  PinnedSnapshot p;
  if (!gpu || !caching_allocators_enabled()) return p;
  const PinnedAllocatorStats s = caching_pinned_allocator().stats();
  p.valid = true;
  p.host_allocs = s.host_allocs;
  p.num_allocs = s.num_allocs;
  p.reserved = s.reserved_bytes.current;
  return p;
}

// The whole process's CPU time and context switches: how many cores the pipeline kept busy, and
// whether its threads were pushed off their cores (involuntary switches: more runnable threads
// than cores) or slept (voluntary: condition-variable waits).
struct ProcessCpu {
  double cpu_seconds = 0;
  long voluntary = 0, involuntary = 0;
};

ProcessCpu process_cpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  ProcessCpu c;
  c.cpu_seconds = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  c.voluntary = u.ru_nvcsw;
  c.involuntary = u.ru_nivcsw;
  return c;
}

struct PipelineResult {
  double samples_per_s = 0, gb_per_s = 0;
  // For print_diagnosis: counters at the start of the timed window and at its end.
  double start_seconds = 0, window_seconds = 0;
  PipelineStats s0, s1;
  PinnedSnapshot before, p0, p1;
  ProcessCpu c0, c1;
};

// What the next device run needs to tell a slow configuration's cause: the start-up cost (and
// how much memory it pinned), whether anything was allocated inside the timed window, and where
// the pipeline's threads spent the window.
void print_diagnosis(const PipelineResult& r) {
  const PipelineStats& s0 = r.s0;
  const PipelineStats& s1 = r.s1;
  const PinnedSnapshot& before = r.before;
  const PinnedSnapshot& p0 = r.p0;
  const PinnedSnapshot& p1 = r.p1;
  const double start_seconds = r.start_seconds, window_seconds = r.window_seconds;
  const auto batches = static_cast<double>(std::max<std::int64_t>(1, s1.batches - s0.batches));
  const auto ms = [&](double a, double b) { return 1e3 * (b - a) / batches; };
  const double delivered = static_cast<double>(std::max<std::int64_t>(1, s1.samples - s0.samples));
  std::printf(
      "      start %.2f s (construction + warm-up), %d reader threads, %d shards: %lld host "
      "batches of %.1f MB (%lld up front), %.2f s making them",
      start_seconds, s1.workers, s1.shards, static_cast<long long>(s0.host_batches),
      static_cast<double>(s1.host_batch_bytes) / 1e6,
      static_cast<long long>(s0.reserved_host_batches), s0.host_batch_seconds);
  if (p0.valid) {
    std::printf("; %lld cudaHostAlloc, %.2f GB pinned",
                static_cast<long long>(p0.host_allocs - before.host_allocs),
                static_cast<double>(p0.reserved) / 1e9);
  }
  std::printf("\n");
  std::printf("      timed %.2f s, %lld batches: %lld host batches made (%.2f s)", window_seconds,
              static_cast<long long>(s1.batches - s0.batches),
              static_cast<long long>(s1.host_batches - s0.host_batches),
              s1.host_batch_seconds - s0.host_batch_seconds);
  if (p1.valid) {
    std::printf(", %lld cudaHostAlloc, %lld pinned blocks handed out",
                static_cast<long long>(p1.host_allocs - p0.host_allocs),
                static_cast<long long>(p1.num_allocs - p0.num_allocs));
  }
  std::printf(
      ", %lld device slots (%lld late); workers read %.2fx the samples delivered, %lld "
      "batches merged\n",
      static_cast<long long>(s1.device_slots), static_cast<long long>(s1.late_device_slots),
      static_cast<double>(s1.samples_read - s0.samples_read) / delivered,
      static_cast<long long>(s1.merged_batches - s0.merged_batches));
  std::printf(
      "      ms per batch: collector waits for workers %.2f, merges %.2f, queues copies %.2f, "
      "waits for copies %.2f, waits for consumer %.2f; workers wait (sum) %.2f; consumer "
      "waits %.2f; slot reuses before release %lld\n",
      ms(s0.collector_input_wait_seconds, s1.collector_input_wait_seconds),
      ms(s0.merge_seconds, s1.merge_seconds), ms(s0.copy_issue_seconds, s1.copy_issue_seconds),
      ms(s0.copy_wait_seconds, s1.copy_wait_seconds),
      ms(s0.collector_output_wait_seconds, s1.collector_output_wait_seconds),
      ms(s0.worker_output_wait_seconds, s1.worker_output_wait_seconds),
      ms(s0.consumer_wait_seconds, s1.consumer_wait_seconds),
      static_cast<long long>(s1.slot_reuse_waits - s0.slot_reuse_waits));
  std::printf(
      "      CPU: %.1f cores busy on average (of %u); context switches per batch: %.1f "
      "voluntary, %.1f involuntary\n",
      (r.c1.cpu_seconds - r.c0.cpu_seconds) / std::max(1e-9, window_seconds),
      std::thread::hardware_concurrency(),
      static_cast<double>(r.c1.voluntary - r.c0.voluntary) / batches,
      static_cast<double>(r.c1.involuntary - r.c0.involuntary) / batches);
}

// `workers` reader threads, each with a shard of its own (HugeCTR's num_workers), or with
// `file_shards` over the default shards (a file each, as `ember train` reads when the Data layer
// sets no num_workers).
PipelineResult run_pipeline(const Dataset& d, int workers, std::vector<Place> devices,
                            std::int64_t batch_size, double min_seconds, bool deterministic = false,
                            bool file_shards = false) {
  PipelineOptions o;
  o.deterministic = deterministic;
  o.batch_size = batch_size;
  o.devices = std::move(devices);
  o.num_workers = file_shards ? 0 : workers;
  o.reader_threads = workers;
  o.prefetch_depth = 3;
  o.mode = PipelineMode::Repeat;
  const bool gpu = o.devices.front().is_cuda();
  PipelineResult r;
  r.before = pinned_snapshot(gpu);
  const auto start = Clock::now();
  {
    Pipeline p(d.make_source ? d.make_source()
                             : std::make_shared<NormSource>(d.list, CheckMode::Sum, d.layout),
               o);
    // Warm-up: every worker has delivered once.
    for (int i = 0; i < std::max(3, p.num_workers()); ++i)
      p.next();
    r.start_seconds = seconds_since(start);
    r.s0 = p.stats();
    r.p0 = pinned_snapshot(gpu);
    r.c0 = process_cpu();
    const auto t0 = Clock::now();
    std::int64_t samples = 0;
    do {
      for (int i = 0; i < 4; ++i)
        samples += p.next()->global_size;
    } while (seconds_since(t0) < min_seconds);
    r.window_seconds = seconds_since(t0);
    r.s1 = p.stats();
    r.p1 = pinned_snapshot(gpu);
    r.c1 = process_cpu();
    r.samples_per_s = static_cast<double>(samples) / r.window_seconds;
    r.gb_per_s = static_cast<double>(r.s1.bytes_read - r.s0.bytes_read) / r.window_seconds / 1e9;
  }
  // Each run starts from an empty pinned cache: its start-up figure is its own, and blocks of
  // an earlier run's size class do not sit pinned beside this one's.
  if (gpu && caching_allocators_enabled()) caching_pinned_allocator().empty_cache();
  return r;
}

std::vector<int> thread_counts(int max) {
  std::vector<int> v;
  for (int t = 1; t < max; t *= 2)
    v.push_back(t);
  v.push_back(max);
  return v;
}

}  // namespace

void bench_host_pipeline(const Dataset& d, const Args& a, std::vector<std::string>& summary) {
  PipelineResult last;
  for (int t : thread_counts(a.threads)) {
    last = run_pipeline(d, t, {Place::host()}, 65536, a.quick ? 0.5 : 1.5);
    std::printf("  pipeline -> host, %2d thr  %8.2f M samples/s  %6.2f GB/s parsed\n", t,
                last.samples_per_s / 1e6, last.gb_per_s);
    print_diagnosis(last);
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "SUMMARY | data | pipeline %s -> host, %d threads | %.2f M samples/s | - | -",
                d.name.c_str(), a.threads, last.samples_per_s / 1e6);
  summary.emplace_back(line);
}

void bench_gpu_pipeline(const Dataset& d, const Args& a, std::vector<std::string>& summary,
                        bool has_target) {
  PipelineResult last;
  for (int t : thread_counts(a.threads)) {
    if (t < a.threads / 2 && t != 1) continue;  // the interesting end of the curve
    last = run_pipeline(d, t, {Place::cuda(0)}, 65536, a.quick ? 0.5 : 2.0);
    std::printf("  pipeline -> cuda:0, %2d thr %8.2f M samples/s  %6.2f GB/s parsed\n", t,
                last.samples_per_s / 1e6, last.gb_per_s);
    print_diagnosis(last);
  }
  char line[256];
  if (has_target) {
    std::snprintf(line, sizeof line,
                  "SUMMARY | data | pipeline %s -> cuda:0, %d threads | %.2f M samples/s | >= 10 M "
                  "samples/s | %s",
                  d.name.c_str(), a.threads, last.samples_per_s / 1e6,
                  last.samples_per_s >= 10e6 ? "yes" : "no");
  } else {
    std::snprintf(line, sizeof line,
                  "SUMMARY | data | pipeline %s -> cuda:0, %d threads | %.2f M samples/s | - | -",
                  d.name.c_str(), a.threads, last.samples_per_s / 1e6);
  }
  summary.emplace_back(line);
}

double host_pipeline_rate(const Dataset& d, int workers, double seconds) {
  return run_pipeline(d, workers, {Place::host()}, 65536, seconds).samples_per_s;
}

double measure_pipeline(const Dataset& d, int threads, Place device, bool deterministic,
                        bool file_shards, double seconds) {
  const PipelineResult r =
      run_pipeline(d, threads, {device}, 65536, seconds, deterministic, file_shards);
  std::printf("  pipeline -> %-6s %2d thr, %-13s %-16s %8.2f M samples/s  %6.2f GB/s parsed\n",
              device.is_cuda() ? "cuda:0" : "host", threads,
              deterministic ? "deterministic," : "free order,",
              file_shards ? "a shard per file" : "a shard each", r.samples_per_s / 1e6, r.gb_per_s);
  print_diagnosis(r);
  return r.samples_per_s;
}

namespace {

// The PyTorch peer: numpy + torch reading the same one-hot files (fixed-size records).
void run_peer(const Dataset& d, const Args& a, double ember_samples_per_s,
              std::vector<std::string>& summary) {
  if (std::system("python3 -c 'import torch, numpy' > /dev/null 2>&1") != 0) {
    std::printf("  PyTorch peer: skipped (python3 with torch and numpy not available)\n");
    return;
  }
  const std::string cmd =
      std::string("python3 ") + EMBER_BENCH_DATA_DIR + "/norm_reader_peer.py --json --list '" +
      d.list + "' --batch 65536 --seconds " + (a.quick ? "0.5" : "2") + (a.gpu ? " --gpu" : "");
  const double peer = run_peer_samples_per_s(cmd, "PyTorch peer");
  if (peer <= 0) return;
  std::printf("  PyTorch peer (numpy memmap + torch%s): %.2f M samples/s; Ember / peer = %.2f\n",
              a.gpu ? ", pinned -> cuda:0" : "", peer / 1e6, ember_samples_per_s / peer);
  char line[256];
  std::snprintf(line, sizeof line,
                "SUMMARY | data | %s Ember / PyTorch-numpy peer (%s) | %.2fx | - | -",
                d.name.c_str(), a.gpu ? "to cuda:0" : "host", ember_samples_per_s / peer);
  summary.emplace_back(line);
}

}  // namespace
}  // namespace ember::benchdata

int main(int argc, char** argv) {
  using namespace ember;
  using namespace ember::benchdata;
  namespace fs = std::filesystem;
  Args a = parse(argc, argv);
  if (a.gpu < 0) a.gpu = (!a.quick && cuda_available()) ? 1 : 0;
  if (a.gpu == 1 && !cuda_available()) {
    std::fprintf(stderr, "bench_data: --gpu but no CUDA device is available\n");
    return 1;
  }
  const fs::path dir =
      a.dir.empty() ? fs::temp_directory_path() / ("ember-bench-data-" + std::to_string(::getpid()))
                    : fs::path(a.dir);
  std::vector<std::string> summary;
  try {
    std::printf("bench_data: %d threads at most, %s\n", a.threads,
                a.gpu ? "with cuda:0" : "host only (--gpu for the device figures)");
    if (!a.config.empty()) {
      bench_config(dir, a, summary);
      if (a.dir.empty()) fs::remove_all(dir);
      for (const auto& line : summary)
        std::printf("%s\n", line.c_str());
      return 0;
    }
    const auto t0 = Clock::now();
    const Dataset dlrm = write_dataset(dir, "dlrm", a.samples, 1, 16, a.threads);
    const Dataset multi = write_dataset(dir, "multihot", a.samples / 4, 10, 16, a.threads);
    std::printf("generated %s: %lld samples, %.0f MB; %s: %lld samples, %.0f MB (%.1f s)\n",
                dlrm.name.c_str(), static_cast<long long>(dlrm.samples), dlrm.bytes / 1e6,
                multi.name.c_str(), static_cast<long long>(multi.samples), multi.bytes / 1e6,
                seconds_since(t0));
    double norm_rate = 0;
    for (const Dataset* d : {&dlrm, &multi}) {
      std::printf("%s (%.0f bytes/sample):\n", d->name.c_str(),
                  static_cast<double>(d->bytes) / static_cast<double>(d->samples));
      const double rate = bench_parser(*d, summary);  // also warms the page cache
      if (d == &dlrm) norm_rate = rate;
      if (a.parsers_only) break;
      bench_host_pipeline(*d, a, summary);
      if (a.gpu) bench_gpu_pipeline(*d, a, summary, d == &dlrm);
    }
    bench_parquet(dir, norm_rate, a, summary);
    if (!a.parsers_only) {
      const double ember_rate =
          a.gpu ? run_pipeline(dlrm, a.threads, {Place::cuda(0)}, 65536, 1.0).samples_per_s
                : run_pipeline(dlrm, a.threads, {Place::host()}, 65536, 1.0).samples_per_s;
      run_peer(dlrm, a, ember_rate, summary);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data: %s\n", e.what());
    if (a.dir.empty()) fs::remove_all(dir);
    return 1;
  }
  if (a.dir.empty()) fs::remove_all(dir);
  for (const auto& line : summary)
    std::printf("%s\n", line.c_str());
  return 0;
}
