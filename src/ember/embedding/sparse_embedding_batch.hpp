// What the files of SparseEmbedding share and nothing else uses: one forward's bookkeeping
// (kept for backward and update) and a batch prepared ahead of its forward.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "ember/core/log.hpp"
#include "ember/embedding/cache_directory.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/sparse_embedding.hpp"

namespace ember::embedding {

using Clock = std::chrono::steady_clock;

// Milliseconds since `start` (the host tables' timings, CacheStats).
inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// What a HybridSparseEmbedding forward keeps beyond Batch (whose entries are then the owned
// infrequent bags this rank sends, one entry each, in send order).
struct HybridBatch {
  std::int64_t local_bags = 0;  // local_size x slot_num
  Tensor frequent_rows;         // [local_bags]: the bag's frequent index, or -1
  Tensor local_used;            // i32 [F]: 1 at each frequent index this rank's samples use
  Tensor recv_rows;             // the output row of each infrequent vector received, in order
  // hybrid_rows' other outputs (HybridRows), read within the forward.
  Tensor expect, owned_rows, used;
  std::vector<std::int64_t> send_counts, recv_counts;  // vectors to / from each rank
  // The frequent entries grouped by row (one entry per local bag, rows -1 first).
  Tensor sorted_bags, unique_rows, segment_offsets, unique_count;
  Tensor local_grad;  // [local_bags, vec_size] after backward
  // f32 [F x vec_size + F] after backward: every rank's gradient sums of the frequent rows, then
  // how many ranks used each row (local_used then holds that count too).
  Tensor sums;
  kernels::Segments segments() const {
    return kernels::Segments{sorted_bags.data<std::int32_t>(), unique_rows.data<std::int64_t>(),
                             segment_offsets.data<std::int64_t>(),
                             unique_count.data<std::int64_t>(), local_bags};
  }
};

// HybridSparseEmbedding's frequent rows, replicated on every rank, and what its steps share.
struct SparseEmbedding::Hybrid {
  std::int64_t frequent = 0;         // F, the frequent categories
  std::unique_ptr<HashTable> index;  // frequent key -> frequent index (F > 0)
  Tensor values, state0, state1;     // [F, vec_size]: value_dtype, f32, f32
  Tensor last_step;                  // i64 [F] (Global, LazyGlobal)
  Tensor slot_begin, local_base;     // kernels::HybridArgs' geometry, at the place
  Tensor count;                      // i64 {F}: the frequent update's distinct rows
  // This rank's frequent keys (those of its slots): their frequent indices and one-hot rows.
  Tensor owned_index, owned_rows;
  std::int64_t owned = 0;
  // Per rank, the frequent indices of the keys it owns, in the order of its owned_index.
  std::vector<std::vector<std::int64_t>> index_by_owner;
  // Constants grown on demand: 0, 1, 2, ... as i64 and i32.
  Tensor iota64, iota32;
  // The all-to-all selections' segment bounds for a local batch of bounds_for samples.
  Tensor send_bounds, recv_bounds;
  std::int64_t bounds_for = -1;
};

// The bookkeeping of one forward, kept for backward and update.
struct SparseEmbedding::Batch {
  // A host table's batch buffers go back to their set when the batch goes.
  std::function<void()> release;
  // Never throws: a batch also goes while an error unwinds the step, and on a GPU whose earlier
  // kernel faulted every later call fails too; the error that unwinds is the one to report.
  ~Batch() {
    if (!release) return;
    try {
      release();
    } catch (const std::exception& e) {
      EMBER_LOG_ERROR("sparse embedding: releasing a batch's buffers failed: {}", e.what());
    } catch (...) {
      EMBER_LOG_ERROR("sparse embedding: releasing a batch's buffers failed");
    }
  }
  std::int64_t global_batch = 0, local_size = 0, bags = 0, entries = 0;
  // scale: each bag's factor (mean: 1 / its entries); undefined where every one is 1 (sum, or
  // one entry a bag), which spares the kernels a load per bag.
  Tensor local_offsets, local_keys, entry_bag, scale, rows;
  const float* bag_scale(std::int64_t first = 0) const {
    return scale.defined() ? scale.data<float>() + first : nullptr;
  }
  // The entries grouped by row (kernels::segments); the distinct-row count is a word at the
  // rank's place, so nothing waits for it.
  Tensor sorted_bags, unique_rows, segment_offsets, unique_count;
  Tensor grad;                          // [bags, vec_size] after backward
  ErrorWords* errors = nullptr;         // where its kernels wrote its data errors, if they did
  std::unique_ptr<HybridBatch> hybrid;  // HybridSparseEmbedding
  kernels::Segments segments() const {
    return kernels::Segments{sorted_bags.data<std::int32_t>(), unique_rows.data<std::int64_t>(),
                             segment_offsets.data<std::int64_t>(),
                             unique_count.data<std::int64_t>(), entries};
  }
};

// A batch prepared ahead of its forward (sparse_embedding_ahead.cpp; host tables:
// sparse_embedding_cache.cpp).
struct SparseEmbedding::Prepared {
  // Which batch: its buffers and shares (the pipeline hands out the same tensors to both calls).
  const void* offsets = nullptr;
  const void* keys = nullptr;
  std::int64_t nnz = 0, local_offset = 0, local_size = 0;
  bool training = false;
  int set = -1;  // its buffer set
  std::unique_ptr<Batch> batch;
  CachePlan plan;
  bool installed = false;  // its row moves are queued (a later plan came before its forward)
  std::exception_ptr error;

  // A Prepared that names `b` and the shares (nothing prepared yet).
  static std::unique_ptr<Prepared> of(const CsrTensor& b, std::int64_t offset, std::int64_t size,
                                      bool train) {
    auto p = std::make_unique<Prepared>();
    p->offsets = b.defined() ? b.row_offsets().data() : nullptr;
    p->keys = b.defined() ? b.values().data() : nullptr;
    p->nnz = b.defined() ? b.nnz() : 0;
    p->local_offset = offset;
    p->local_size = size;
    p->training = train;
    return p;
  }
  bool matches(const CsrTensor& b, std::int64_t offset, std::int64_t size, bool train) const {
    return b.defined() && b.row_offsets().data() == offsets && b.values().data() == keys &&
           b.nnz() == nnz && offset == local_offset && size == local_size && train == training;
  }
};

}  // namespace ember::embedding
