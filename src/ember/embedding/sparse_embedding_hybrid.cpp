// HybridSparseEmbedding (HugeCTR's MLPerf embedding; docs/embedding.md, "HybridSparseEmbedding"):
// the frequent categories are replicated on every rank and trained data parallel, their
// gradients all-reduced; the other keys live as in LocalizedSlotSparseEmbeddingOneHot (slot s on
// rank s mod D, row = key minus the slot's offset), and only the vectors of infrequent keys
// travel, by all-to-all.
//
// One forward, on every rank (each rank reads the whole global batch, one key per slot):
//   1. each key's frequent index (a hash table of the F frequent keys), then hybrid_rows: the
//      rank's samples' frequent rows and the infrequent bags it expects, and its owned slots'
//      infrequent rows for all samples;
//   2. two compactions: the owned infrequent bags to send (in sample order, so each peer's
//      block is contiguous) and the local bags whose vectors come back (in the peers' order);
//      their counts are read back, the one wait for the device (steps 1 and 2 depend on the
//      keys alone: a training batch is prepared ahead, during the step before, by prefetch());
//   3. pooling: the frequent rows into the output (zeros elsewhere), the owned infrequent rows
//      into the send buffer; the all-to-all; the received vectors scattered into the output.
//      Vectors go in the output's dtype (16 bits in mixed precision, at an even width: only
//      moved, each one rounded once, so the bits of the f32 exchange rounded).
// Backward sends the infrequent bags' gradients back the same way (in the gradient's dtype:
// a 16-bit gradient widens exactly where it is read), and all-reduces the frequent rows'
// gradient sums (each rank sums its own entries in the kGradientChunk order first) with how
// many ranks used each row; update() runs no collective: it steps the owned rows as one-hot
// does, and the frequent rows with those sums. A caller may run its own collectives (the
// dense all-reduce) once backward() is queued, beside the update.
//
// Exactness: with one rank every row's gradient is the one-hot layer's sum in the same order
// and every step the same call, so training matches LocalizedSlotSparseEmbeddingOneHot bit for
// bit; with D ranks only the frequent rows' sums differ, by the order of the D partial sums.
// The frequent rows stay bitwise identical on every rank: each takes the same all-reduced sum
// and the same step, and LazyGlobal catches up the rows the whole global batch uses.
#include <algorithm>
#include <climits>
#include <numeric>

#include "ember/core/allocator.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/batch_vectors.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/join_on_exit.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/sparse_embedding_batch.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

namespace {

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// The first n entries of 0, 1, 2, ... (i64 or i32), kept in `kept` and grown
// when too short. `user`: a stream that may still read the old one (see SparseEmbedding::scratch).
Tensor sequence(Tensor& kept, std::int64_t n, DType dtype, Place place,
                StreamHandle user = nullptr) {
  EMBER_CHECK(
      (dtype == DType::I32 || dtype == DType::I64) && (!kept.defined() || kept.dtype() == dtype),
      "hybrid embedding: a sequence of ", dtype_name(dtype),
      " asked for (i32 or i64, as the kept one)");
  if (!kept.defined() || kept.numel() < n) {
    if (user != nullptr && kept.defined()) default_allocator(place).record_use(kept.data(), user);
    const std::int64_t m = std::max<std::int64_t>(n + n / 4, 1);
    if (dtype == DType::I32) {
      std::vector<std::int32_t> v(static_cast<std::size_t>(m));
      std::iota(v.begin(), v.end(), 0);
      kept = Tensor::from_vector(v, place);
    } else {
      std::vector<std::int64_t> v(static_cast<std::size_t>(m));
      std::iota(v.begin(), v.end(), std::int64_t{0});
      kept = Tensor::from_vector(v, place);
    }
  }
  return kept.slice(0, 0, n);
}

}  // namespace

void SparseEmbedding::make_hybrid() {
  hybrid_ = std::make_unique<Hybrid>();
  Hybrid& h = *hybrid_;
  const std::vector<std::int64_t>& keys = config_.hybrid.frequent_keys;
  const auto F = static_cast<std::int64_t>(keys.size());
  const std::int64_t V = config_.vec_size, S = config_.slot_num;
  const int D = comm_.size(), me = comm_.rank();
  h.frequent = F;
  const std::vector<std::int64_t> begin = slot_begin();
  std::vector<std::int64_t> base(static_cast<std::size_t>(S), -1);
  std::int64_t next = 0;
  for (std::int64_t s : owned_slots_) {
    base[s] = next;
    next += config_.slot_size_array[s];
  }
  h.slot_begin = Tensor::from_vector(begin, place_);
  h.local_base = Tensor::from_vector(base, place_);
  h.count = Tensor::from_vector(std::vector<std::int64_t>{F}, place_);
  h.index_by_owner.assign(static_cast<std::size_t>(D), {});
  std::vector<std::int64_t> owned_rows;
  for (std::int64_t f = 0; f < F; ++f) {
    const std::int64_t key = keys[f];
    const std::int64_t s = (std::upper_bound(begin.begin(), begin.end(), key) - begin.begin()) - 1;
    const int p = static_cast<int>(s % D);
    h.index_by_owner[p].push_back(f);
    if (p == me) owned_rows.push_back(base[s] + (key - begin[s]));
  }
  h.owned = static_cast<std::int64_t>(owned_rows.size());
  auto upload = [&](std::vector<std::int64_t> v) {
    if (v.empty()) v.push_back(0);
    return Tensor::from_vector(v, place_);
  };
  h.owned_index = upload(h.index_by_owner[me]);
  h.owned_rows = upload(owned_rows);
  if (F == 0) return;
  // The frequent rows start as their one-hot rows do: values from (seed, key), initial states.
  const Tensor key_tensor = Tensor::from_vector(keys).to(config_.key_dtype).to(place_);
  h.values = Tensor::empty({F, V}, config_.value_dtype, place_);
  kernels::Values values = table_values();
  values.data = h.values.data();
  dispatch_key(config_.key_dtype, "embedding keys", [&](auto tag) {
    using Key = typename decltype(tag)::type;
    kernels::on(place_).keys<Key>().init_rows(values, V, 0, F, key_tensor.data<Key>(), config_.seed,
                                              config_.init_bound, stream());
  });
  for (int k = 0; k < optimizer_.state_count(); ++k) {
    (k == 0 ? h.state0 : h.state1) =
        Tensor::full({F, V}, optimizer_.initial_state(k), DType::F32, place_);
  }
  if (optimizer_.update_type != optim::UpdateType::Local) {
    h.last_step = Tensor::zeros({F}, DType::I64, place_);
  }
  h.index = std::make_unique<HashTable>(config_.key_dtype, F, place_, 0, where(),
                                        "(the frequent categories' index)");
  h.index->load(key_tensor, sequence(h.iota64, F, DType::I64, place_));
}

void SparseEmbedding::throw_hybrid_error(std::int64_t bag, std::int64_t key,
                                         std::int64_t count) const {
  const std::int64_t S = config_.slot_num, s = bag % S;
  const char* late = place_.is_cuda() ? " (found on the GPU in an earlier batch: the step does "
                                        "not wait for the device)"
                                      : "";
  if (count > 1) {
    EMBER_THROW_AS(DataError, where(), ": slot ", s, " of sample ", bag / S, " has ", count,
                   " keys (the first ", key,
                   "); HybridSparseEmbedding takes one key per slot, as in HugeCTR", late);
  }
  const std::vector<std::int64_t> begin = slot_begin();
  EMBER_THROW_AS(DataError, where(), ": key ", key, " of sample ", bag / S, " in slot ", s,
                 " is outside the slot's range [", begin[s], ", ", begin[s + 1],
                 ") (HybridSparseEmbedding: keys carry slot offsets and must lie within "
                 "slot_size_array)",
                 late);
}

std::int64_t SparseEmbedding::hybrid_constants_for(std::int64_t global_batch,
                                                   std::int64_t local_size) const {
  // A bag is at most one entry.
  return std::max(
      {local_size * config_.slot_num, global_batch * config_.slot_num, hybrid_->frequent});
}

bool SparseEmbedding::hybrid_sized_for(std::int64_t global_batch, std::int64_t local_size) const {
  const Hybrid& h = *hybrid_;
  const std::int64_t most = hybrid_constants_for(global_batch, local_size);
  return h.iota64.defined() && h.iota64.numel() > most && h.bounds_for == local_size &&
         index_local_batch_ == local_size;
}

std::unique_ptr<SparseEmbedding::Batch> SparseEmbedding::prepare_hybrid(
    const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size, bool training,
    StreamHandle stream, const std::string& tag, ErrorWords& errors) {
  std::int64_t B = 0;
  check_batch(batch, local_offset, local_size, &B);
  Hybrid& h = *hybrid_;
  const std::int64_t S = config_.slot_num;
  EMBER_CHECK(B * S < INT32_MAX, where(), ": ", B * S,
              " (sample, slot) pairs in one batch exceed 2^31 - 1");
  auto b = std::make_unique<Batch>();
  b->hybrid = std::make_unique<HybridBatch>();
  b->global_batch = B;
  b->local_size = local_size;
  b->hybrid->local_bags = local_size * S;
  b->errors = &errors;
  // The constants this batch reads, sized once (in a forward: prepare_ahead waits for that). A
  // batch prepared ahead may still read the old ones.
  const std::int64_t most = hybrid_constants_for(B, local_size);
  const StreamHandle ahead = ahead_stream_ ? ahead_stream_.handle() : nullptr;
  sequence(h.iota64, most + 1, DType::I64, place_, ahead);
  find_hybrid_rows(batch, local_offset, *b, training, tag, stream, errors);
  plan_hybrid_exchange(*b, tag, stream);
  group_hybrid_rows(*b, training, tag, stream);
  return b;
}

void SparseEmbedding::find_hybrid_rows(const CsrTensor& batch, std::int64_t local_offset, Batch& b,
                                       bool training, const std::string& tag, StreamHandle s,
                                       ErrorWords& errors) {
  Hybrid& h = *hybrid_;
  HybridBatch& hb = *b.hybrid;
  const std::int64_t S = config_.slot_num, F = h.frequent, nnz = batch.nnz();
  const auto owned_count = static_cast<std::int64_t>(owned_slots_.size());
  Tensor frequent_of_key;
  if (F > 0 && nnz > 0) {
    frequent_of_key = scratch(tag + "frequent_of_key", nnz, DType::I64, s);
    h.index->find(batch.values(), frequent_of_key, s);
  }
  kernels::HybridArgs a;
  a.offsets = batch.row_offsets().data<std::int64_t>();
  a.frequent = ptr<std::int64_t>(frequent_of_key);
  a.batch = b.global_batch;
  a.slot_num = S;
  a.local_offset = local_offset;
  a.local_size = b.local_size;
  a.ranks = comm_.size();
  a.rank = comm_.rank();
  a.slot_begin = h.slot_begin.data<std::int64_t>();
  a.local_base = h.local_base.data<std::int64_t>();
  a.owned_count = owned_count;
  hb.frequent_rows = scratch(tag + "frequent_rows", hb.local_bags, DType::I64, s);
  hb.expect = scratch(tag + "expect", hb.local_bags, DType::I64, s);
  hb.owned_rows = scratch(tag + "owned_rows", b.global_batch * owned_count, DType::I64, s);
  if (optimizer_.update_type == optim::UpdateType::LazyGlobal && F > 0) {
    hb.used = scratch(tag + "used", F, DType::I32, s);
    ops::fill(hb.used, 0.0, s);
  }
  if (training && F > 0) {
    hb.local_used = scratch(tag + "local_used", F, DType::I32, s);
    ops::fill(hb.local_used, 0.0, s);
  }
  make_error_words(errors, s);
  kernels::HybridRows out;
  out.frequent_rows = hb.frequent_rows.data<std::int64_t>();
  out.expect = hb.expect.data<std::int64_t>();
  out.owned_rows = hb.owned_rows.data<std::int64_t>();
  out.used = ptr<std::int32_t>(hb.used);
  out.local_used = ptr<std::int32_t>(hb.local_used);
  out.bad = errors.device.data<std::int64_t>();
  const Tensor keys = batch.values();
  dispatch_key(config_.key_dtype, "embedding keys", [&](auto key_type) {
    using Key = typename decltype(key_type)::type;
    kernels::on(place_).keys<Key>().hybrid_rows(a, keys.data<Key>(), out, s);
  });
  collect_errors(errors, s);
}

void SparseEmbedding::plan_hybrid_exchange(Batch& b, const std::string& tag, StreamHandle s) {
  Hybrid& h = *hybrid_;
  HybridBatch& hb = *b.hybrid;
  const std::int64_t S = config_.slot_num, Bl = b.local_size;
  const int D = comm_.size();
  const auto owned_count = static_cast<std::int64_t>(owned_slots_.size());
  const std::int64_t owned_bags = b.global_batch * owned_count;
  build_exchange_index(Bl);
  if (h.bounds_for != Bl) {
    // Sends: the owned bags of peer q's samples; receipts: the bags of peer p's slots.
    std::vector<std::int64_t> send(static_cast<std::size_t>(D) + 1), recv(send.size(), 0);
    for (int p = 0; p <= D; ++p)
      send[p] = p * Bl * owned_count;
    for (int p = 0; p < D; ++p) {
      const std::int64_t owned_by_p = p < S ? (S - p + D - 1) / D : 0;
      recv[p + 1] = recv[p] + Bl * owned_by_p;
    }
    h.send_bounds = Tensor::from_vector(send, place_);
    h.recv_bounds = Tensor::from_vector(recv, place_);
    h.bounds_for = Bl;
  }
  const Tensor send_bags = scratch(tag + "send_bags", owned_bags, DType::I64, s);
  hb.recv_rows = scratch(tag + "recv_rows", hb.local_bags, DType::I64, s);
  const Tensor counts = scratch(tag + "counts", 2 * D, DType::I64, s);
  const kernels::KernelTable& k = kernels::on(place_);
  k.select_items(hb.owned_rows.data<std::int64_t>(), nullptr, owned_bags, -1, INT64_MAX,
                 h.send_bounds.data<std::int64_t>(), D, send_bags.data<std::int64_t>(),
                 counts.data<std::int64_t>(), s);
  k.select_items(hb.expect.data<std::int64_t>(), backward_index_.data<std::int64_t>(),
                 hb.local_bags, 1, 1, h.recv_bounds.data<std::int64_t>(), D,
                 hb.recv_rows.data<std::int64_t>(), counts.data<std::int64_t>() + D, s);
  // The one wait for the device: all_to_all_v takes its counts on the host.
  const std::vector<std::int64_t> both = counts.to(Place::host(), s).to_vector<std::int64_t>();
  hb.send_counts.assign(both.begin(), both.begin() + D);
  hb.recv_counts.assign(both.begin() + D, both.end());
  const std::int64_t N =
      std::accumulate(hb.send_counts.begin(), hb.send_counts.end(), std::int64_t{0});
  b.bags = b.entries = N;
  b.rows = scratch(tag + "rows", N, DType::I64, s);
  if (N > 0) {
    k.move_rows(b.rows.data(), nullptr, hb.owned_rows.data(), send_bags.data<std::int64_t>(), N,
                sizeof(std::int64_t), s);
  }
}

void SparseEmbedding::group_hybrid_rows(Batch& b, bool training, const std::string& tag,
                                        StreamHandle s) {
  Hybrid& h = *hybrid_;
  HybridBatch& hb = *b.hybrid;
  const std::int64_t F = h.frequent, N = b.entries;
  const bool lazy = optimizer_.update_type == optim::UpdateType::LazyGlobal;
  const kernels::KernelTable& k = kernels::on(place_);
  if (training || lazy) {
    b.sorted_bags = scratch(tag + "sorted_bags", N, DType::I32, s);
    b.unique_rows = scratch(tag + "unique_rows", N, DType::I64, s);
    b.segment_offsets = scratch(tag + "segment_offsets", N + 1, DType::I64, s);
    b.unique_count = scratch(tag + "unique_count", 1, DType::I64, s);
    k.segments(b.rows.data<std::int64_t>(), h.iota64.data<std::int64_t>(), N, capacity_,
               b.sorted_bags.data<std::int32_t>(), b.unique_rows.data<std::int64_t>(),
               b.segment_offsets.data<std::int64_t>(), b.unique_count.data<std::int64_t>(), s);
  }
  if (training && F > 0) {
    hb.sorted_bags = scratch(tag + "frequent_sorted_bags", hb.local_bags, DType::I32, s);
    hb.unique_rows = scratch(tag + "frequent_unique_rows", hb.local_bags, DType::I64, s);
    hb.segment_offsets = scratch(tag + "frequent_offsets", hb.local_bags + 1, DType::I64, s);
    hb.unique_count = scratch(tag + "frequent_count", 1, DType::I64, s);
    k.segments(hb.frequent_rows.data<std::int64_t>(), h.iota64.data<std::int64_t>(), hb.local_bags,
               F, hb.sorted_bags.data<std::int32_t>(), hb.unique_rows.data<std::int64_t>(),
               hb.segment_offsets.data<std::int64_t>(), hb.unique_count.data<std::int64_t>(), s);
  }
}

void SparseEmbedding::finish_hybrid_forward(std::unique_ptr<Batch> b, bool training,
                                            const Tensor& out) {
  Hybrid& h = *hybrid_;
  HybridBatch& hb = *b->hybrid;
  const std::int64_t F = h.frequent, V = config_.vec_size;
  const std::string tag = training ? "train/" : "eval/";
  const StreamHandle s = stream();
  const kernels::KernelTable& k = kernels::on(place_);
  const std::int64_t N = b->entries;
  if (optimizer_.update_type == optim::UpdateType::LazyGlobal) {
    // The owned rows this rank sends, and the frequent rows the whole global batch uses (the
    // same set on every rank, so the replicas stay identical), brought to this step.
    const kernels::LazyParams lp = lazy_params(step_);
    if (N > 0) {
      k.catch_up_rows(b->unique_rows.data<std::int64_t>(), N, b->unique_count.data<std::int64_t>(),
                      table_values(), V, row_states(), step_, lp, s);
    }
    if (F > 0) {
      const Tensor rows = scratch(tag + "used_rows", F, DType::I64);
      k.flagged_rows(hb.used.data<std::int32_t>(), F, rows.data<std::int64_t>(), s);
      kernels::Values values = table_values();
      values.data = h.values.data();
      k.catch_up_rows(rows.data<std::int64_t>(), F, nullptr, values, V,
                      kernels::RowStates{ptr<float>(h.state0), ptr<float>(h.state1),
                                         ptr<std::int64_t>(h.last_step)},
                      step_, lp, s);
    }
  }

  // Pooling (one entry per bag: no offsets, a gather) and the exchange of infrequent vectors, in
  // the dtype they move in (exchange_dtype: out's, or f32 for an odd 16-bit width, rounded into
  // out at the end).
  const std::int64_t M =
      std::accumulate(hb.recv_counts.begin(), hb.recv_counts.end(), std::int64_t{0});
  const DType moved = exchange_dtype(out.dtype(), false);
  const Tensor target =
      moved == out.dtype() ? out : scratch(tag + "hybrid_wide", out.numel(), moved);
  const kernels::ValueType type = vector_type(moved);
  const Tensor send = scratch(tag + "send", N * V, moved);
  if (N > 0) {
    k.pool(nullptr, b->rows.data<std::int64_t>(), nullptr, N, N, table_values(), V, send.data(),
           type, s);
  }
  const Tensor recv = scratch(tag + "recv", M * V, moved);
  std::vector<std::int64_t> send_counts = hb.send_counts, recv_counts = hb.recv_counts;
  for (auto& c : send_counts)
    c *= V;
  for (auto& c : recv_counts)
    c *= V;
  // The infrequent vectors travel (beside, with set_exchange_overlap) while the frequent rows
  // are pooled into the output (zeros at the infrequent bags, which the scatter overwrites).
  JoinOnExit join([this] { join_exchange(); });
  exchange_beside(send, send_counts, recv, recv_counts);
  if (hb.local_bags > 0) {
    kernels::Values frequent_values = table_values();
    frequent_values.data = h.values.defined() ? h.values.data() : nullptr;
    k.pool(nullptr, hb.frequent_rows.data<std::int64_t>(), nullptr, hb.local_bags, hb.local_bags,
           frequent_values, V, target.data(), type, s);
  }
  join.now();
  if (M > 0) {
    k.move_rows(target.data(), hb.recv_rows.data<std::int64_t>(), recv.data(), nullptr, M,
                V * static_cast<std::int64_t>(recv.element_size()), s);
  }
  if (target.data() != out.data()) ops::copy(out, target.reshape(out.shape()), s);
  if (training) batch_ = std::move(b);
}

Tensor SparseEmbedding::hybrid_exchange_backward(const Tensor& grad) {
  HybridBatch& hb = *batch_->hybrid;
  const std::int64_t V = config_.vec_size, N = batch_->entries;
  hb.local_grad = grad.contiguous().reshape({hb.local_bags, V});
  std::int64_t M = 0;
  std::vector<std::int64_t> send_counts = hb.recv_counts, recv_counts = hb.send_counts;
  for (auto& c : send_counts) {
    M += c;
    c *= V;
  }
  for (auto& c : recv_counts)
    c *= V;
  const Tensor send = scratch("grad_send", M * V, grad.dtype());
  if (M > 0) {
    kernels::on(place_).move_rows(send.data(), nullptr, hb.local_grad.data(),
                                  hb.recv_rows.data<std::int64_t>(), M,
                                  V * static_cast<std::int64_t>(grad.element_size()), stream());
  }
  const Tensor recv = scratch("grad_recv", N * V, grad.dtype());
  {
    // The infrequent gradients travel (beside, with set_exchange_overlap) while this rank sums
    // the frequent rows' gradients; the all-reduce of the sums follows the exchange.
    JoinOnExit join([this] { join_exchange(); });
    exchange_beside(send, send_counts, recv, recv_counts);
    sum_local_frequent_gradients();
    join.now();
  }
  all_reduce_frequent_gradients();
  return recv.reshape({N, V});
}

void SparseEmbedding::sum_local_frequent_gradients() {
  Hybrid& h = *hybrid_;
  HybridBatch& hb = *batch_->hybrid;
  const std::int64_t F = h.frequent, V = config_.vec_size;
  if (F == 0) return;
  const StreamHandle s = stream();
  // [F x V sums | F users]: one all-reduce for both (a user count is exact in f32).
  hb.sums = scratch("hybrid/gradient_sums", F * V + F, DType::F32);
  ops::fill(hb.sums, 0.0, s);
  // In the order one-hot sums a row (entries by bag).
  kernels::Values sum_table{hb.sums.data(), kernels::ValueType::F32};
  if (hb.local_bags > 0) {
    kernels::on(place_).update_rows(
        hb.segments(), nullptr, hb.local_grad.data(), vector_type(hb.local_grad.dtype()), sum_table,
        V, kernels::RowStates{}, step_ + 1, optim::store_sum_step(), nullptr, s);
  }
  ops::copy(hb.sums.slice(0, F * V, F * V + F), hb.local_used, s);
}

void SparseEmbedding::all_reduce_frequent_gradients() {
  const std::int64_t F = hybrid_->frequent, V = config_.vec_size;
  if (F == 0) return;
  HybridBatch& hb = *batch_->hybrid;
  comm_.all_reduce(hb.sums, distributed::ReduceOp::Sum, stream());
  ops::copy(hb.local_used, hb.sums.slice(0, F * V, F * V + F), stream());
}

void SparseEmbedding::update_frequent(std::int64_t step, const optim::UpdateStep& u,
                                      const kernels::LazyParams* lazy) {
  Hybrid& h = *hybrid_;
  const std::int64_t F = h.frequent, V = config_.vec_size;
  if (F == 0) return;
  const HybridBatch& hb = *batch_->hybrid;
  const StreamHandle s = stream();
  const kernels::KernelTable& k = kernels::on(place_);
  // One entry per frequent row that some rank used (rows -1 are skipped), bag = the row.
  const Tensor rows = scratch("hybrid/update_rows", F, DType::I64);
  k.flagged_rows(hb.local_used.data<std::int32_t>(), F, rows.data<std::int64_t>(), s);
  const kernels::Segments seg{sequence(h.iota32, F, DType::I32, place_).data<std::int32_t>(),
                              rows.data<std::int64_t>(),
                              sequence(h.iota64, F + 1, DType::I64, place_).data<std::int64_t>(),
                              h.count.data<std::int64_t>(), F};
  kernels::Values values = table_values();
  values.data = h.values.data();
  const kernels::RowStates states{ptr<float>(h.state0), ptr<float>(h.state1),
                                  ptr<std::int64_t>(h.last_step)};
  k.update_rows(seg, nullptr, hb.sums.data<float>(), kernels::ValueType::F32, values, V, states,
                step, u, lazy, s);
  if (optimizer_.update_type == optim::UpdateType::Global) {
    k.update_untouched(F, nullptr, values, V, states, step, u, s);
  }
}

void SparseEmbedding::catch_up_frequent() {
  const Hybrid& h = *hybrid_;
  if (h.frequent == 0 || optimizer_.update_type != optim::UpdateType::LazyGlobal) return;
  kernels::Values values = table_values();
  values.data = h.values.data();
  const kernels::RowStates states{ptr<float>(h.state0), ptr<float>(h.state1),
                                  ptr<std::int64_t>(h.last_step)};
  kernels::on(place_).catch_up_rows(nullptr, h.frequent, nullptr, values, config_.vec_size, states,
                                    step_, lazy_params(step_), stream());
}

void SparseEmbedding::frequent_rows_to_owners() {
  const Hybrid& h = *hybrid_;
  const std::int64_t n = h.owned, V = config_.vec_size;
  if (n == 0) return;
  const kernels::KernelTable& k = kernels::on(place_);
  const auto* to = h.owned_rows.data<std::int64_t>();
  const auto* from = h.owned_index.data<std::int64_t>();
  const auto value_bytes = static_cast<std::int64_t>(V * dtype_size(config_.value_dtype));
  k.move_rows(values_.data(), to, h.values.data(), from, n, value_bytes, stream());
  if (state0_.defined()) k.move_rows(state0_.data(), to, h.state0.data(), from, n, V * 4, stream());
  if (state1_.defined()) k.move_rows(state1_.data(), to, h.state1.data(), from, n, V * 4, stream());
  if (last_step_.defined()) {
    k.move_rows(last_step_.data(), to, h.last_step.data(), from, n, 8, stream());
  }
  if (stream() != nullptr) synchronize_stream(stream());
}

void SparseEmbedding::frequent_rows_from_owners() {
  const Hybrid& h = *hybrid_;
  const std::int64_t V = config_.vec_size;
  const int D = comm_.size(), me = comm_.rank();
  const kernels::KernelTable& k = kernels::on(place_);
  const StreamHandle s = stream();
  kernels::Values values = table_values();
  values.data = h.values.defined() ? h.values.data() : nullptr;
  // Each owner broadcasts its frequent keys' rows (values widened to f32, exactly), every rank
  // puts them in its frequent rows.
  for (int p = 0; p < D; ++p) {
    const std::vector<std::int64_t>& index = h.index_by_owner[static_cast<std::size_t>(p)];
    const auto n = static_cast<std::int64_t>(index.size());
    if (n == 0) continue;
    const Tensor at = Tensor::from_vector(index, place_);
    const Tensor rows = Tensor::empty({n, V}, DType::F32, place_);
    auto share = [&](const Tensor& from_table, float* to_frequent, bool is_values) {
      if (p == me) {
        if (is_values) {
          k.gather_values(rows.data<float>(), table_values(), h.owned_rows.data<std::int64_t>(), n,
                          V, s);
        } else {
          k.gather_rows(rows.data<float>(), from_table.data<float>(),
                        h.owned_rows.data<std::int64_t>(), n, V, s);
        }
      }
      comm_.broadcast(rows, p, s);
      if (is_values) {
        k.scatter_values(values, rows.data<float>(), at.data<std::int64_t>(), n, V, s);
      } else {
        k.scatter_rows(to_frequent, rows.data<float>(), at.data<std::int64_t>(), n, V, s);
      }
    };
    share(values_, nullptr, true);
    if (state0_.defined()) share(state0_, h.state0.data<float>(), false);
    if (state1_.defined()) share(state1_, h.state1.data<float>(), false);
    if (last_step_.defined()) {
      const Tensor steps = Tensor::empty({n}, DType::I64, place_);
      if (p == me) {
        k.move_rows(steps.data(), nullptr, last_step_.data(), h.owned_rows.data<std::int64_t>(), n,
                    8, s);
      }
      comm_.broadcast(steps, p, s);
      k.move_rows(h.last_step.data(), at.data<std::int64_t>(), steps.data(), nullptr, n, 8, s);
    }
    if (s != nullptr) synchronize_stream(s);
  }
}

}  // namespace ember::embedding
