// The input pipeline: reader threads parse the shards of the dataset into host batches, a
// collector puts the batches in order (and merges partial ones), splits them over the training
// devices and, for GPUs, copies them to device memory on each device's copy stream, keeping up
// to `prefetch_depth` batches ready ahead of the consumer (Caffe's prefetching lesson).
//
//   shards (S, read by T threads) --per-shard queues--> collector (thread) --prefetch queue-->
//   next()
//
// A shard is a fixed part of the data (Norm, Parquet: files s, s+S, ...; Raw: chunks) read in
// order; which samples a batch holds depends on the shards, never on the threads. A reader thread
// is not tied to a shard: each time it is free it reads the next batch of the shard the
// collector needs soonest. So a thread that runs slower (a busier core) does not hold the others
// back, as one reader per shard would in deterministic order, where every shard must give its
// batch in turn.
//
// Host batches bound for a GPU live in pinned memory, so the copies are asynchronous DMA; the
// consumer's stream waits on an event instead of the host waiting for the copy. A CPU-only run
// makes no CUDA call at all: batches are views of the host buffers the readers filled.
//
// Memory is taken before any thread starts: the host batches a steady run holds at once
// (steady_host_batches()) and, for GPUs, the device slots (prefetch depth + 1 + the batches the
// consumer holds). Pinning memory while the pipeline runs stalls the copies (see
// host_batch_pool.hpp); stats() counts any host batch or device slot made later ("late"), which
// only a consumer holding more batches at a time than it said (`consumer_holds`) causes.
//
// The collector's device work (the copies, the slots' events and memory) goes on each device's
// copy stream, never on the compute stream: the training thread may be capturing that into a
// CUDA graph, which work queued by another thread would join (and break).
//
// Modes: Repeat (HugeCTR's max_iter: the dataset wraps around forever, every batch full) and
// Epochs (num_epochs passes, every sample exactly once per epoch, the last batch of an epoch
// possibly partial and marked end_of_epoch). Deterministic mode hands out the same batches in the
// same order whatever the thread timing and the thread count: batch i comes from shard i mod S.
//
// Errors: an exception in a reader (a bad file, a truncated sample, ...) is rethrown by next() to
// the consumer, with the file and sample named; the pipeline is then failed and rethrows it on
// every later call. Destroying the pipeline at any point stops and joins every thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/allocator.hpp"
#include "ember/core/dtype.hpp"
#include "ember/core/place.hpp"
#include "ember/data/batch.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/key_exchange.hpp"

namespace ember::data {

enum class PipelineMode { Repeat, Epochs };

struct PipelineOptions {
  std::int64_t batch_size = 0;
  // How messages name the batch size (the training layer: "solver.batchsize").
  std::string batch_size_name = "the batch size";
  // The training devices: D host "devices" (all Place::host()) or D GPUs (Place::cuda(d)).
  std::vector<Place> devices{Place::host()};
  // The shards, and as many reader threads (HugeCTR's num_workers: one reader per shard), at
  // most what the source can use (files, chunks). 0: the default_num_shards() the source can
  // use, read by min(those, default_num_workers()) threads: which samples a batch holds then
  // depends on the data alone, not on the machine's cores.
  int num_workers = 0;
  // Reader threads, when not num_workers' (at most the shards; 0: as num_workers says). The
  // batches do not depend on it.
  int reader_threads = 0;
  // Batches kept ready ahead of the consumer.
  int prefetch_depth = 3;
  // Batches the consumer holds at once: 2 for a trainer that takes the next batch before it
  // drops the one it trains on (a prefetch). Their memory is made up front too.
  int consumer_holds = 1;
  PipelineMode mode = PipelineMode::Repeat;
  // Epochs mode: passes over the data; -1 for endless epochs (an evaluation reader that is
  // drained up to end_of_epoch at each evaluation).
  std::int64_t num_epochs = 1;
  bool deterministic = false;
  // A process of a multi-process job: the ranks of all processes share each batch and `devices`
  // take the shares of ranks slice.first_rank, ... (batch.hpp). Default: `devices` are all.
  RankSlice slice;
  // Shared reading in a job of several processes (key_exchange.hpp): the readers parse only the
  // rows of this process's ranks (`slice`) in every batch and the collector swaps the keys with
  // the other processes through `exchange` before it hands the batch on, so every batch holds
  // the whole batch's keys and this process's rows' label and dense values. Needs deterministic
  // mode; every process must make its pipelines in the same order and consume the same batches.
  // Stopping the pipeline first completes the exchanges that the prefetch queue has room for,
  // which is the same set on every process (the consumers took the same batches). The reader
  // worker count is agreed at construction (the smallest of all processes'). Null: every row.
  std::shared_ptr<ProcessExchange> exchange;
  // Shared reading: the ranks gather one-hot batches' keys themselves (exchange_batch_keys'
  // gathering_ranks, DeviceBatch::keys_from_ranks); the consumer must. Needs `exchange`, and
  // host devices only one to a process (they would share one batch's memory).
  bool ranks_gather_keys = false;
  // Require batch_size to be a multiple of the rank count (HugeCTR's rule for training).
  bool require_even_split = true;
  // GPU batches: next() makes each device's current stream wait for the batch's copies.
  bool wait_on_current_stream = true;
  // Where host batches come from; null: the default allocator of Place::pinned() for GPU
  // pipelines, of Place::host() otherwise. GPU pipelines need a pinned one. It must outlive the
  // pipeline and every batch it handed out.
  Allocator* host_allocator = nullptr;
};

struct PipelineStats {
  std::int64_t batches = 0;          // handed out by next()
  std::int64_t samples = 0;          // in those batches
  std::int64_t samples_read = 0;     // parsed by this process's readers
  std::int64_t samples_skipped = 0;  // passed over for the other processes (shared reading)
  std::int64_t dropped = 0;          // samples dropped by checksum mismatches
  std::int64_t bad_samples = 0;      // samples dropped by bad_sample_policy "drop"
  std::int64_t bytes_read = 0;
  int workers = 0;  // reader threads
  int shards = 0;

  // Host batches (pinned for GPUs): made in all, made up front (steady_host_batches()), made
  // later because none was free (only a consumer of a host pipeline holding more than one batch
  // at a time causes that, in either mode), bytes each, and seconds spent making them.
  std::int64_t host_batches = 0;
  std::int64_t reserved_host_batches = 0;
  std::int64_t late_host_batches = 0;
  std::size_t host_batch_bytes = 0;
  double host_batch_seconds = 0;
  // GPU pipelines: device slots made (up front: prefetch depth + 1 + consumer_holds; later, when
  // the consumer holds more batches at a time), and slots taken while the consumer's release of
  // their previous batch had not completed on the device (the copies then wait there, inside
  // copy_wait_seconds). Slots have the capacity of a full batch (every key budget), so a
  // multi-hot batch of any size fits: they are never grown.
  std::int64_t device_slots = 0;
  std::int64_t late_device_slots = 0;
  std::int64_t slot_reuse_waits = 0;
  // Batches the collector assembled from partial ones (host memcpy on its thread).
  std::int64_t merged_batches = 0;
  // Shared reading: batches handed out with their keys left to the ranks (ranks_gather_keys).
  std::int64_t keys_from_ranks_batches = 0;

  // Where the time goes, seconds since the pipeline started (take differences over a window).
  // The collector is one thread; the workers' figure is summed over all of them. Every wait is a
  // condition-variable wait (no thread spins), except copy_wait, a query of the copies' event
  // every 20 microseconds.
  double collector_input_wait_seconds = 0;   // no worker's batch ready (input-bound)
  double collector_output_wait_seconds = 0;  // prefetch queue full (consumer-bound)
  double merge_seconds = 0;                  // merging partial batches
  double exchange_seconds = 0;               // shared reading: swapping keys with the processes
  double exchange_meet_seconds = 0;          // of which in the counts' all-gather (waiting)
  double copy_issue_seconds = 0;             // queuing the device copies (host side)
  double copy_wait_seconds = 0;              // waiting for the copies to finish
  double worker_output_wait_seconds = 0;     // readers: no shard to read ahead (collector-bound)
  double consumer_wait_seconds = 0;          // next() waiting for a batch
};

// Host batches a steady run holds at once, made before the threads start: the readers'
// lookahead, two batches per reader thread (filled or being filled, ahead of the collector), and
// one more from the shard the collector waits for; the collector's two (the one it took from a
// shard, the one gathering partial batches), plus in Epochs mode the one held back to mark the
// epoch's end; for host pipelines also the prefetch queue's and the consumer's `consumer_holds`
// (GPU pipelines return a host batch as soon as its copies are done).
std::int64_t steady_host_batches(int reader_threads, bool gpu, int prefetch_depth,
                                 PipelineMode mode, int consumer_holds = 1);

// Device slots a GPU pipeline makes up front: the prefetch queue's, the one the collector fills
// and the consumer's.
int steady_device_slots(int prefetch_depth, int consumer_holds);

// The reader threads used when PipelineOptions::num_workers is 0 (before the shards' limit):
// every hardware thread for host pipelines; two fewer for GPU pipelines, whose collector
// (queuing copies) and training thread (launching kernels) must not wait for a core behind busy
// readers. An explicit num_workers is used as given.
int default_num_workers(int hardware_threads, bool gpu);

// The shards used when PipelineOptions::num_workers is 0: every one the source can use (a file
// each for Norm and Parquet), at most this many. A fixed number rather than one tied to the
// cores, so that the batches are the same on every machine; more shards than reader threads let
// a fast thread read ahead where a slow one lags.
constexpr int kMaxDefaultShards = 128;
int default_num_shards(int usable);

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
  int num_workers() const;  // reader threads
  int num_shards() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::data
