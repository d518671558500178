// Batches prepared ahead of their forward (prefetch()), on a stream of their own while the step
// before runs. A host table makes the batch's rows resident (sparse_embedding_cache.cpp); a
// device table whose rows follow from the keys (one-hot, hybrid) finds its rows, its exchange's
// plan and the grouping for its update, so that its forward starts at the pooling. On a GPU
// that takes the keys' work, and the hybrid's one wait for the device, off the step's path.
// Nothing here reads the table or the step count: a batch prepared ahead gives the results of
// one prepared in its forward, bit for bit. A device hash table inserts the batch's new keys
// here; its caller promises that the batch's forward is the next use of the layer, which the
// layer checks (refuse_while_inserted_ahead).
#include <string>

#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/sparse_embedding_batch.hpp"

namespace ember::embedding {

bool SparseEmbedding::prepares_ahead() const {
  return host_rows_ != nullptr || is_onehot(config_.type) || inserts_ahead();
}

bool SparseEmbedding::inserts_ahead() const {
  return table_ != nullptr && host_rows_ == nullptr && !is_onehot(config_.type) &&
         optimizer_.update_type != optim::UpdateType::Global;
}

void SparseEmbedding::refuse_while_inserted_ahead(const char* what) const {
  // A batch prepared without error inserted its keys where the layer inserts ahead.
  EMBER_CHECK(!prepared_ || !prepared_->batch || !inserts_ahead(), where(), ": ", what,
              " while a training batch prepared ahead holds the new keys it inserted; its "
              "forward must come first (prefetch() only the batch trained next)");
}

void SparseEmbedding::prefetch(const CsrTensor& batch, std::int64_t local_offset,
                               std::int64_t local_size, const Event* ready) {
  if (!prepares_ahead()) return;
  PlaceGuard guard(place_);
  if (prepared_) {
    if (prepared_->matches(batch, local_offset, local_size, true)) return;
    refuse_while_inserted_ahead("preparing another batch ahead");
    drop_prepared();
  }
  const auto start = Clock::now();
  try {
    if (host_rows_) {
      prepared_ = prepare_cached(batch, local_offset, local_size, true, ready);
      host_rows_->stats().prefetched += 1;
    } else {
      prepared_ = prepare_ahead(batch, local_offset, local_size, ready);
    }
  } catch (...) {
    // Raised by the forward of this batch, where the error belongs.
    prepared_ = Prepared::of(batch, local_offset, local_size, true);
    prepared_->error = std::current_exception();
  }
  if (host_rows_) host_rows_->stats().prefetch_ms += ms_since(start);
}

void SparseEmbedding::forget_prepared() {
  PlaceGuard guard(place_);
  drop_prepared();
}

StreamHandle SparseEmbedding::prepare_stream() {
  if (host_rows_) return host_rows_->prepare_stream();
  if (!place_.is_cuda()) return nullptr;
  if (!ahead_stream_) ahead_stream_ = Stream::create(place_.device(), kBackgroundPriority);
  return ahead_stream_.handle();
}

void SparseEmbedding::wait_for_set(int set, const Event* ready, StreamHandle stream) {
  if (stream == nullptr) return;
  // The prepare stream reuses the set once the compute stream is done with it, and reads the
  // keys once they are there.
  buffer_sets_[static_cast<std::size_t>(set)].free.block(stream);
  if (ready != nullptr && *ready) {
    ready->block(stream);
  } else {
    keys_ready_.record(this->stream());
    keys_ready_.block(stream);
  }
}

int SparseEmbedding::take_buffer_set() {
  if (place_.is_cuda() && !buffer_sets_.front().free) {
    for (auto& set : buffer_sets_) {
      set.free = Event::create(place_.device());
      set.prepared = Event::create(place_.device());
    }
    keys_ready_ = Event::create(place_.device());
  }
  // The set released longest ago: the compute stream is most likely done with it.
  int best = -1;
  for (int i = 0; i < static_cast<int>(buffer_sets_.size()); ++i) {
    const BufferSet& s = buffer_sets_[static_cast<std::size_t>(i)];
    if (s.busy) continue;
    if (best < 0 || s.released < buffer_sets_[static_cast<std::size_t>(best)].released) best = i;
  }
  EMBER_CHECK(best >= 0, where(), ": every batch buffer set is in use");
  buffer_sets_[static_cast<std::size_t>(best)].busy = true;
  return best;
}

void SparseEmbedding::release_buffer_set(int set) {
  BufferSet& s = buffer_sets_[static_cast<std::size_t>(set)];
  // Free on the host first: if recording fails (a device in error), the set is not lost too.
  s.busy = false;
  s.released = ++releases_;
  if (s.free) s.free.record(stream());
}

std::unique_ptr<SparseEmbedding::Prepared> SparseEmbedding::prepare_ahead(const CsrTensor& batch,
                                                                          std::int64_t local_offset,
                                                                          std::int64_t local_size,
                                                                          const Event* ready) {
  if (hybrid_) {
    std::int64_t B = 0;
    check_batch(batch, local_offset, local_size, &B);
    if (!hybrid_sized_for(B, local_size)) return nullptr;
  }
  const StreamHandle s = prepare_stream();
  std::unique_ptr<Prepared> p = Prepared::of(batch, local_offset, local_size, true);
  const int set = take_buffer_set();
  p->set = set;
  BufferSet& buffers = buffer_sets_[static_cast<std::size_t>(set)];
  std::unique_ptr<Batch> b;
  try {
    wait_for_set(set, ready, s);
    // After the inserts of a forward prepared in place (none since the step before otherwise).
    if (inserts_ahead() && forward_inserted_) forward_inserted_.block(s);
    const std::string tag = cat("ahead", set, "/");
    b = hybrid_ ? prepare_hybrid(batch, local_offset, local_size, true, s, tag, buffers.bad)
                : prepare_batch(batch, local_offset, local_size, true, s, tag, true, buffers.bad);
    if (s != nullptr) buffers.prepared.record(s);
  } catch (...) {
    release_buffer_set(set);
    throw;
  }
  b->release = [this, set] { release_buffer_set(set); };
  p->batch = std::move(b);
  return p;
}

std::unique_ptr<SparseEmbedding::Batch> SparseEmbedding::take_prepared(const CsrTensor& batch,
                                                                       std::int64_t local_offset,
                                                                       std::int64_t local_size,
                                                                       bool training) {
  if (!prepared_) return nullptr;
  if (!prepared_->matches(batch, local_offset, local_size, training)) {
    refuse_while_inserted_ahead(training ? "another training batch" : "an evaluation batch");
    // An evaluation batch runs between the prepared batch and its forward; another training
    // batch replaces it.
    if (training) drop_prepared();
    return nullptr;
  }
  std::unique_ptr<Prepared> p = std::move(prepared_);
  if (p->error) std::rethrow_exception(p->error);
  if (place_.is_cuda()) buffer_sets_[static_cast<std::size_t>(p->set)].prepared.block(stream());
  ++forwards_prepared_ahead_;
  return std::move(p->batch);
}

}  // namespace ember::embedding
