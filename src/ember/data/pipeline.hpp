// The input pipeline: reader workers parse their shards of the dataset into host batches, a
// collector puts the batches in order (and merges partial ones), splits them over the training
// devices and, for GPUs, copies them to device memory on each device's copy stream, keeping up
// to `prefetch_depth` batches ready ahead of the consumer (Caffe's prefetching lesson).
//
//   workers (threads) --per-worker queues--> collector (thread) --prefetch queue--> next()
//
// Host batches bound for a GPU live in pinned memory, so the copies are asynchronous DMA; the
// consumer's stream waits on an event instead of the host waiting for the copy. A CPU-only run
// makes no CUDA call at all: batches are views of the host buffers the workers filled.
//
// Modes: Repeat (HugeCTR's max_iter: the dataset wraps around forever, every batch full) and
// Epochs (num_epochs passes, every sample exactly once per epoch, the last batch of an epoch
// possibly partial and marked end_of_epoch). Deterministic mode hands out the same batches in the
// same order whatever the thread timing: batch i comes from worker i mod W.
//
// Errors: an exception in a worker (a bad file, a truncated sample, ...) is rethrown by next() to
// the consumer, with the file and sample named; the pipeline is then failed and rethrows it on
// every later call. Destroying the pipeline at any point stops and joins every thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/core/place.hpp"
#include "ember/data/batch.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/data_source.hpp"

namespace ember::data {

enum class PipelineMode { Repeat, Epochs };

struct PipelineOptions {
  std::int64_t batch_size = 0;
  // The training devices: D host "devices" (all Place::host()) or D GPUs (Place::cuda(d)).
  std::vector<Place> devices{Place::host()};
  // Reader threads; 0: min(hardware threads, what the source can use (files, chunks)).
  int num_workers = 0;
  // Batches kept ready ahead of the consumer.
  int prefetch_depth = 3;
  PipelineMode mode = PipelineMode::Repeat;
  // Epochs mode: passes over the data; -1 for endless epochs (an evaluation reader that is
  // drained up to end_of_epoch at each evaluation).
  std::int64_t num_epochs = 1;
  bool deterministic = false;
  // Require batch_size to be a multiple of the device count (HugeCTR's rule for training).
  bool require_even_split = true;
  // GPU batches: next() makes each device's current stream wait for the batch's copies.
  bool wait_on_current_stream = true;
};

struct PipelineStats {
  std::int64_t batches = 0;  // handed out by next()
  std::int64_t samples = 0;  // in those batches
  std::int64_t samples_read = 0;
  std::int64_t dropped = 0;  // samples dropped by checksum mismatches
  std::int64_t bytes_read = 0;
  int workers = 0;
};

class Pipeline {
 public:
  Pipeline(std::shared_ptr<const DataSource> source, PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch; std::nullopt once every epoch has been handed out (Epochs mode). Rethrows
  // any error of the workers or of the device copies.
  std::optional<Batch> next();

  PipelineStats stats() const;
  const BatchLayout& layout() const;
  const PipelineOptions& options() const;
  int num_workers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class DataSplit { Train, Eval };

// The source a Data layer describes: Norm file list or Raw file (training or evaluation side).
// Raw training chunks are shuffled with `seed`. Parquet is a ConfigError for now.
std::shared_ptr<DataSource> make_data_source(const DataConfig& config, DType key_type,
                                             DataSplit split, std::uint64_t seed = 0);

}  // namespace ember::data
