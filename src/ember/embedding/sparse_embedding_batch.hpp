// What the files of SparseEmbedding share and nothing else uses: one forward's bookkeeping
// (kept for backward and update) and a batch prepared ahead of its forward (host tables).
#pragma once

#include <exception>
#include <functional>

#include "ember/core/log.hpp"
#include "ember/embedding/cache_directory.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/sparse_embedding.hpp"

namespace ember::embedding {

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
  Tensor local_offsets, local_keys, entry_bag, scale, rows;
  // The entries grouped by row (kernels::segments); the distinct-row count is a word at the
  // rank's place, so nothing waits for it.
  Tensor sorted_bags, unique_rows, segment_offsets, unique_count;
  Tensor grad;  // [bags, vec_size] after backward
  kernels::Segments segments() const {
    return kernels::Segments{sorted_bags.data<std::int32_t>(), unique_rows.data<std::int64_t>(),
                             segment_offsets.data<std::int64_t>(),
                             unique_count.data<std::int64_t>(), entries};
  }
};

// A batch prepared ahead of its forward (host tables, sparse_embedding_cache.cpp).
struct SparseEmbedding::Prepared {
  // Which batch: its buffers and shares (the pipeline hands out the same tensors to both calls).
  const void* offsets = nullptr;
  const void* keys = nullptr;
  std::int64_t nnz = 0, local_offset = 0, local_size = 0;
  bool training = false;
  std::unique_ptr<Batch> batch;
  CachePlan plan;
  bool installed = false;  // its row moves are queued (a later plan came before its forward)
  std::exception_ptr error;

  bool matches(const CsrTensor& b, std::int64_t offset, std::int64_t size, bool train) const {
    return b.defined() && b.row_offsets().data() == offsets && b.values().data() == keys &&
           b.nnz() == nnz && offset == local_offset && size == local_size && train == training;
  }
};

}  // namespace ember::embedding
