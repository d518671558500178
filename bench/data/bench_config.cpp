// The input pipeline of a model configuration's Data layer (--config FILE): a dataset shaped like
// it (`ember datagen --like`: its dims, sparse inputs, key type and check, 16 files), read the
// way `ember train` reads it (the source with the loss's label checks, deterministic batch
// order, a shard per file) and, to tell what that way costs, without the checks, with a shard
// per reader thread and in free order.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "data/bench_data_support.hpp"
#include "ember/core/error.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/datagen.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/sample_check.hpp"

namespace ember::benchdata {

namespace fs = std::filesystem;
using namespace ember::data;

namespace {

// The data layer reads the configuration's Data layer itself (parse_data_layer); the whole model
// is not its to check.
nlohmann::json read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) EMBER_THROW_AS(ConfigError, "bench_data --config: cannot open '", path, "'");
  try {
    return nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    EMBER_THROW_AS(ConfigError, "bench_data --config '", path, "': not valid JSON: ", e.what());
  }
}

// One reader over every file, straight into a batch: samples per CPU-second of the thread.
double parser_rate(const DataSource& source, std::int64_t& samples) {
  ShardSpec spec;
  spec.batch_size = 65536;
  HostBatch batch(source.layout(), spec.batch_size);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto reader = source.open_shard(spec);
    const double c0 = thread_cpu_seconds();
    samples = 0;
    for (;;) {
      batch.clear();
      const std::int64_t n = reader->fill(batch);
      if (n == 0) break;
      samples += n;
    }
    best = std::min(best, thread_cpu_seconds() - c0);
  }
  return static_cast<double>(samples) / best;
}

}  // namespace

void bench_config(const fs::path& dir, const Args& a, std::vector<std::string>& summary) {
  const nlohmann::json config = read_config(a.config);
  DatagenOptions o;
  apply_model_config(config, a.config, o);
  if (o.format != DataFormat::Norm) {
    EMBER_THROW_AS(ConfigError, "bench_data --config: '", a.config,
                   "' reads Raw or Parquet data; only Norm Data layers are measured here");
  }
  o.out_dir = (dir / "config").string();
  o.samples = a.samples;
  o.eval_samples = 1;
  o.files = 16;
  o.threads = a.threads;
  const DatasetDescription desc = generate_dataset(o);
  DataConfig dc = parse_data_layer(config.at("layers").at(0), a.config + " (Data layer)");
  dc.source = desc.train.file_list;
  DataSourceOptions checked;
  checked.labels = LabelRange{};
  checked.labels->taken_by = "the loss";
  const auto trained = make_data_source(dc, o.key_type, DataSplit::Train, 1, checked);
  const auto unchecked = make_data_source(dc, o.key_type, DataSplit::Train, 1, {});
  std::uint64_t bytes = 0;
  for (const auto& f : desc.train.files)
    bytes += fs::file_size(f);
  std::printf("%s: %lld samples in %zu files, %.0f bytes/sample, %s keys\n", a.config.c_str(),
              static_cast<long long>(o.samples), desc.train.files.size(),
              static_cast<double>(bytes) / static_cast<double>(o.samples),
              o.key_type == DType::U32 ? "32-bit" : "64-bit");
  for (const auto* s : {&trained, &unchecked}) {
    std::int64_t samples = 0;
    const double rate = parser_rate(**s, samples);  // also warms the page cache
    std::printf("  parser, 1 thread, %-16s %8.2f M samples per CPU-second\n",
                s == &trained ? "label checks" : "no label checks", rate / 1e6);
  }
  if (a.parsers_only) return;
  Dataset d;
  d.name = fs::path(a.config).stem().string();
  d.samples = o.samples;
  d.bytes = bytes;
  d.layout = trained->layout();
  d.make_source = [&] { return trained; };
  const double seconds = a.quick ? 0.5 : 2.0;
  std::vector<Place> devices{Place::host()};
  if (a.gpu) devices.push_back(Place::cuda(0));
  for (const Place& device : devices) {
    double last = 0;
    for (int t = 1;; t = std::min(a.threads, t * 2)) {
      last = measure_pipeline(d, t, device, true, true, seconds);
      if (t == a.threads) break;
    }
    // What the shards per file buy: a thread per shard (the earlier default) has each shard's
    // batch wait for its one thread; free order shows what the threads make with no order.
    measure_pipeline(d, a.threads, device, true, false, seconds);
    measure_pipeline(d, a.threads, device, false, true, seconds);
    char line[256];
    std::snprintf(line, sizeof line,
                  "SUMMARY | data | %s pipeline -> %s, %d threads, deterministic | %.2f M "
                  "samples/s | - | -",
                  d.name.c_str(), device.is_cuda() ? "cuda:0" : "host", a.threads, last / 1e6);
    summary.emplace_back(line);
  }
}

}  // namespace ember::benchdata
