// How the input pipeline turns a filled host batch into the Batch it hands out: tensors viewing
// buffers laid out by a BatchBufferPlan. A host pipeline's devices view the host batch itself;
// a GPU pipeline's view the copies in a device slot (device_transfer.hpp). Either way the memory
// stays valid, and goes back to its pool, when the last view goes (batch.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/place.hpp"
#include "ember/data/batch.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/host_batch.hpp"

namespace ember::data {

// Where a batch stands in the pipeline's output.
struct BatchInfo {
  std::int64_t sequence = 0;
  std::int64_t epoch = 0;
  bool end_of_epoch = false;
  bool keys_from_ranks = false;  // DeviceBatch::keys_from_ranks
};

// The buffers of one batch as tensors: label and dense rows, and per sparse input the CSR of
// the whole batch.
struct BatchViews {
  Tensor label;                   // f32 [rows, label_dim]
  Tensor dense;                   // f32 [rows, dense_dim]
  std::vector<CsrTensor> sparse;  // the keys of every sample of `keys_of`
};

// Views of `memory` laid out by `plan`: `rows` label and dense rows, and the CSRs of the samples
// `keys_of` holds (their count and nnz; the keys themselves are wherever `plan` says).
BatchViews view_buffers(const AllocationPtr& memory, const BatchBufferPlan& plan,
                        const BatchLayout& layout, std::int64_t rows, const HostBatch& keys_of);

// Device d's part of a batch of `global_size` samples: its `share` of the rows (label and dense
// already cut to it) and the whole batch's keys.
DeviceBatch device_share(Tensor label, Tensor dense, std::vector<CsrTensor> sparse,
                         const Share& share, std::int64_t global_size, std::int64_t sequence,
                         Place place);

// A host pipeline's batch: every device views its share of `host`, which is held until the last
// view goes.
Batch host_batch_views(std::shared_ptr<const HostBatch> host, const BatchLayout& layout,
                       const std::vector<Place>& devices, const BatchInfo& info,
                       const RankSlice& slice = {});

// A Batch with `info` and `global_size` and no devices yet.
Batch empty_batch(const BatchInfo& info, std::int64_t global_size);

}  // namespace ember::data
