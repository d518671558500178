// The batch contract between the input pipeline and the layers that consume it (embeddings,
// dense network, metrics).
//
// For each training device d of D the pipeline hands out a DeviceBatch:
//   label  f32 [local_size, label_dim]  } this device's share of the samples: rows
//   dense  f32 [local_size, dense_dim]  } [local_offset, local_offset + local_size)
//   sparse one CsrTensor per sparse input with the keys of the WHOLE global batch, on this
//          device's place: rows = global_size * slot_num (row = sample * slot_num + slot),
//          row offsets i64, values u32 or i64 (the key type). Raw/Parquet slot offsets are
//          already applied. Model-parallel embeddings pick their keys out of it themselves.
// Samples are split evenly (HugeCTR's rule: the training batch size is a multiple of D).
// In a job of several processes D counts the ranks of all of them (RankSlice): every process
// reads the whole batch (the keys of all samples are needed by every rank) and hands its
// devices their shares of the global split. A batch
// that does not divide (the last partial batch of an epoch, evaluation) is cut in blocks of
// ceil(global_size / D): device d gets [d * block, min(global_size, (d + 1) * block)), so the
// last devices get fewer samples, or none. These are the shares a model-parallel embedding
// computes when it pads the batch to D blocks of that size.
//
// Places: Place::cuda(d) for GPUs; Place::host() for CPU "devices" (D of them share the host and
// the same memory; label/dense are views into one host buffer).
//
// Memory: a batch's tensors stay valid for as long as any copy of them lives. On a GPU the
// pipeline reuses a batch's device memory only after the last reference is dropped AND the work
// queued on the device's current stream (as of that moment) has finished, so dropping a batch
// right after enqueuing the kernels that read it is safe. Work on other streams must be ordered
// by the consumer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ember/core/place.hpp"
#include "ember/core/stream.hpp"
#include "ember/tensor/sparse.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::data {

struct DeviceBatch {
  Tensor label;                   // f32 [local_size, label_dim]
  Tensor dense;                   // f32 [local_size, dense_dim]
  std::vector<CsrTensor> sparse;  // one per sparse input, the whole global batch
  std::int64_t global_size = 0;
  std::int64_t local_offset = 0;
  std::int64_t local_size = 0;
  std::int64_t sequence = 0;  // batch number since the pipeline started, from 0
  Place place;
  // GPU batches: recorded on the copy stream after this device's copies. Null on the host.
  std::shared_ptr<const Event> ready;
  // Shared reading with the keys left to the ranks (key_exchange.hpp, exchange_batch_keys):
  // the row offsets are the whole batch's, but each input's keys hold only this process's
  // samples'; the ranks, in equal blocks of the keys, must gather the others' (all_gather in
  // place) before anything reads them (the training layer does, as it takes the batch).
  bool keys_from_ranks = false;

  // Makes `stream` wait (on the device, not the host) until the batch's copies are done. The
  // pipeline already does this for the device's current stream unless told not to.
  void wait(StreamHandle stream) const;
};

struct Batch {
  std::vector<DeviceBatch> devices;  // one per training device, in the order given
  std::int64_t sequence = 0;
  std::int64_t epoch = 0;  // epochs mode: which epoch; repeat mode: 0
  std::int64_t global_size = 0;
  // Epochs mode: the last batch of its epoch (it may be partial: global_size < batch size).
  bool end_of_epoch = false;
};

// How `n` samples are shared among `parts` devices: blocks of ceil(n / parts), the last ones
// shorter (or empty).
struct Share {
  std::int64_t offset = 0;
  std::int64_t size = 0;
};
std::vector<Share> split_evenly(std::int64_t n, int parts);

// The devices of one process of a multi-process job: `world_ranks` share every batch (blocks as
// above), and this process's devices are ranks first_rank ... first_rank + local_ranks - 1.
// A single process is {0, 0}: its devices are all the ranks.
struct RankSlice {
  int world_ranks = 0;  // 0: the process's own device count
  int first_rank = 0;
};
// The shares of this process's `local_ranks` devices.
std::vector<Share> local_shares(std::int64_t n, const RankSlice& slice, int local_ranks);

}  // namespace ember::data
