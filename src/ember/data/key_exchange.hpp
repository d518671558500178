// Shared reading in a job of several processes. Each process parses only the samples of its own
// ranks in every batch (a window of rows: PipelineOptions::exchange, ShardSpec::window); the
// dense features and labels of those rows are all its ranks need, but model-parallel embeddings
// need every sample's keys on every rank. So, batch by batch, the processes swap the keys of
// their windows, in two steps: a small message with every process's key counts (from which each
// builds the whole batch's row offsets), then the keys themselves, gathered in place into each
// input's key array. That gives every process the whole batch's key CSR it would have parsed
// itself.
//
// The data layer knows nothing of MPI: the transport is a ProcessExchange, which the training
// layer implements over a process channel (distributed/process_channel.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/data/batch.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/time_counter.hpp"

namespace ember::data {

// Every process's message back to back, in process order: process p's bytes are
// [offsets[p], offsets[p + 1]) of `bytes`. Reused from call to call.
struct GatheredMessages {
  std::vector<std::byte> bytes;
  std::vector<std::int64_t> offsets;
  int count() const { return offsets.empty() ? 0 : static_cast<int>(offsets.size()) - 1; }
};

class ProcessExchange {
 public:
  virtual ~ProcessExchange() = default;
  // This process's rank among the processes and their count.
  virtual int process() const = 0;
  virtual int processes() const = 0;
  // Every process's bytes, in process order. Every process makes the same calls in the same
  // order, from one thread (the pipeline's collector).
  virtual std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) = 0;
  // The same into `all`, whose memory is kept from call to call: an exchange per batch then
  // allocates, and faults in, nothing new once the batches' sizes are reached, and the messages
  // are not copied apart. The default calls all_gather and lays its messages end to end.
  virtual void all_gather_into(const std::vector<std::byte>& mine, GatheredMessages& all);
  // Every process's piece of one buffer into its place, each process holding its own already:
  // process p's counts[p] bytes at displs[p] (every process passes the same counts and displs).
  // The keys move this way, straight from one batch's array into the others', with no message
  // packed or unpacked. The default gathers the pieces with all_gather and copies them in.
  virtual void all_gather_in_place(std::byte* buffer, const std::vector<std::int64_t>& counts,
                                   const std::vector<std::int64_t>& displs);
  // This process cannot take part in exchanges that the others will wait for (its pipeline
  // failed while it was being stopped, so no consumer will see the error): end the job, saying
  // `why`. The default throws, for exchanges whose peers cannot wait (tests).
  [[noreturn]] virtual void abandon(const std::string& why);
};

// What a batch's exchange checks that every process agrees on: the batch's place in the stream,
// its size, and how the data was split (the batches' content depends on the shards).
struct ExchangeCheck {
  std::int64_t sequence = 0;
  std::int64_t samples = 0;
  std::int64_t shards = 0;
};

// The messages one pipeline's exchanges reuse from batch to batch (its collector's).
struct KeyExchangeBuffers {
  std::vector<std::byte> mine;
  GatheredMessages all;
  // Time in the counts' all-gather: waiting for the other processes to reach the batch (their
  // collectors' lag), beside this process's own work on the exchange.
  TimeCounter meeting;
};

// Completes the keys of `batch`: rows [window.offset, window.offset + window.size) hold this
// process's parsed samples; the other rows are overwritten with the keys of the processes that
// own them. Every process's window must be the next after the previous process's, the first at
// row 0 and the last ending at batch.size() (local_shares of consecutive ranks). A process whose
// batch differs (`check`, the windows) is a DataError naming both processes and the numbers.
// A window whose rows all hold the same key count (one-hot data) sends that count once instead
// of one per row. `buffers` (optional) keeps the messages' memory for the next batch.
//
// `gathering_ranks` > 0: the job's ranks (that many, over every process) can gather the keys
// themselves, over their own communicator (NVLink between GPUs, instead of host memory twice
// and the copies of every process's keys to every GPU). Where every process's rows hold
// keys_reserved_per_row() keys in every row of every input (one-hot data) and the batch splits
// evenly over those ranks, the exchange stops after the counts: the row offsets are then the
// whole batch's, this process's keys are in place, rank r's keys are the r-th of the ranks'
// equal blocks of each input's keys, and the other processes' keys are not there. Returns true
// then (the consumer must gather them: DeviceBatch::keys_from_ranks), false when it moved them.
bool exchange_batch_keys(HostBatch& batch, const Share& window, const ExchangeCheck& check,
                         ProcessExchange& exchange, KeyExchangeBuffers* buffers = nullptr,
                         std::int64_t gathering_ranks = 0);

// The rows of a batch of `n` samples whose samples this process's `local_ranks` ranks take.
Share process_window(std::int64_t n, const RankSlice& slice, int local_ranks);

}  // namespace ember::data
