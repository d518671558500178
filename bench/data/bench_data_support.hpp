// What bench_data.cpp (Norm, the pipeline, main) and bench_parquet.cpp (Parquet) share: the
// command line, the generated datasets, CPU timing and the pipeline runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/place.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/data_source.hpp"

namespace ember::benchdata {

using Clock = std::chrono::steady_clock;

struct Args {
  // The GPU part runs whenever a device is present (scripts/gpu-check passes no flags);
  // --gpu insists on it, --no-gpu skips it.
  int gpu = -1;
  bool quick = false;
  bool parsers_only = false;  // --parsers: the one-thread parser figures alone, no pipelines
  int threads = 1;
  std::int64_t samples = 2000000;  // DLRM-shaped; the multi-hot set has a quarter of it
  std::string dir;
  std::string config;  // --config: only the pipeline of this model configuration's Data layer
};

struct Dataset {
  std::string name;
  std::string list;
  data::BatchLayout layout;
  std::int64_t samples = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> files;
  std::function<std::shared_ptr<data::DataSource>()> make_source;  // Norm when empty
};

// Sample i of a set: random DLRM-like values (label, 13 dense, 26 slots of 1..nnz_max keys,
// slot s's keys in [s * 100000, s * 100000 + 100000)).
void draw_sample(std::int64_t i, int nnz_max, std::vector<float>& label, std::vector<float>& dense,
                 std::vector<std::int32_t>& nnz, std::vector<std::uint32_t>& keys);

double seconds_since(Clock::time_point t0);
// CPU time of the calling thread: on a shared machine, what the parser itself costs.
double thread_cpu_seconds();

// Runs a peer's command line (a script printing JSON with "samples_per_s") and returns that
// figure, or 0 after printing "  <peer>: failed (<its output>)" when it fails.
double run_peer_samples_per_s(const std::string& command, const char* peer);

// The pipeline over `d` into host batches with 1, 2, 4 ... a.threads workers (and into cuda:0),
// each run's figures and diagnosis printed.
void bench_host_pipeline(const Dataset& d, const Args& a, std::vector<std::string>& summary);
void bench_gpu_pipeline(const Dataset& d, const Args& a, std::vector<std::string>& summary,
                        bool has_target);
// Samples per second of the pipeline into host batches with `workers` workers.
double host_pipeline_rate(const Dataset& d, int workers, double seconds);
// One pipeline run into `device` (batch 65536) with `threads` reader threads: in deterministic
// order (as `ember train` reads) or in free order; over a shard per file (`ember train`'s
// default) or a shard per thread (HugeCTR's num_workers). Prints its rate and diagnosis, returns
// samples per second.
double measure_pipeline(const Dataset& d, int threads, Place device, bool deterministic,
                        bool file_shards, double seconds);

// The Parquet part (bench_parquet.cpp): writes the DLRM set as Parquet under `dir` and measures
// its readers; `norm_rate` is Norm's parser in samples per CPU-second.
void bench_parquet(const std::filesystem::path& dir, double norm_rate, const Args& a,
                   std::vector<std::string>& summary);

// The --config part (bench_config.cpp): a dataset shaped like a.config's Data layer under `dir`,
// its parser and its pipeline as `ember train` makes it.
void bench_config(const std::filesystem::path& dir, const Args& a,
                  std::vector<std::string>& summary);

}  // namespace ember::benchdata
