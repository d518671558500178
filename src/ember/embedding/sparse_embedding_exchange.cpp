// The exchanges between ranks of SparseEmbedding (docs/embedding.md, "Embedding layers").
//
// LocalizedSlot: rank p owns slots p, p + D, ... and pools them for every sample of the global
// batch; each sample's vectors go to the rank that holds the sample, and the gradients come back
// the same way.
// - Two ranks: the peer's block of bags is pooled (forward) or gathered (backward) first and
//   sent while this rank's own block, which never travels, is written straight into the receive
//   buffer; with an exchange stream (set_exchange_overlap) the transfer runs beside that work.
// - More ranks: one all-to-all of every block, own included. Peer-by-peer rounds (rank r to
//   r + k in round k) were measured slower there: NCCL moves one peer's block at a time more
//   slowly than all peers' blocks at once (4 H200s, DLRM-Kaggle mixed: 31.1 against 38.9 M
//   samples/s; docs/performance.md).
// Either way the values and their places are those of one all-to-all: only the order of the
// work changes, so the results are the same bit for bit.
//
// DistributedSlot: every rank pools partial sums over its rows for all samples; a reduce-scatter
// sums them and leaves each rank its samples. Its backward all-gathers the gradients.
#include <cstddef>
#include <utility>

#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/batch_vectors.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/join_on_exit.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/sparse_embedding_batch.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

namespace {

std::byte* row_at(const Tensor& t, std::int64_t row, std::int64_t row_bytes) {
  return static_cast<std::byte*>(t.data()) + row * row_bytes;
}

}  // namespace

DType SparseEmbedding::exchange_dtype(DType dtype, bool sums) const {
  if (dtype == DType::F32 || sums) return DType::F32;
  return config_.vec_size % 2 == 0 ? dtype : DType::F32;
}

std::int64_t SparseEmbedding::slots_of_rank(int p) const {
  const std::int64_t S = config_.slot_num, D = comm_.size();
  return p < S ? (S - p + D - 1) / D : std::int64_t{0};
}

void SparseEmbedding::set_exchange_overlap(bool on) {
  const int D = comm_.size();
  exchange_overlap_ = on && place_.is_cuda() && D > 1 &&
                      (hybrid_ != nullptr || (D == 2 && is_localized(config_.type)));
  if (exchange_overlap_ && !exchange_stream_) {
    exchange_stream_ = Stream::create(place_.device(), kTransferPriority);
    exchange_block_ready_ = Event::create(place_.device());
    exchange_done_ = Event::create(place_.device());
  }
}

StreamHandle SparseEmbedding::exchange_stream() const {
  return exchange_overlap_ ? exchange_stream_.handle() : stream();
}

void SparseEmbedding::exchange_with_peer(const Tensor& send, const Tensor& recv, int peer) {
  std::vector<std::int64_t> send_counts(2, 0), recv_counts(2, 0);
  send_counts[peer] = send.numel();
  recv_counts[peer] = recv.numel();
  exchange_beside(send, send_counts, recv, recv_counts);
}

void SparseEmbedding::exchange_beside(const Tensor& send,
                                      const std::vector<std::int64_t>& send_counts,
                                      const Tensor& recv,
                                      const std::vector<std::int64_t>& recv_counts) {
  const StreamHandle s = stream(), x = exchange_stream();
  if (x != s) {
    // `send` is written on the embedding's stream, which goes on with other work meanwhile.
    exchange_block_ready_.record(s);
    exchange_block_ready_.block(x);
  }
  comm_.all_to_all_v(as_words(send), word_counts(send_counts, send), as_words(recv),
                     word_counts(recv_counts, recv), x);
}

void SparseEmbedding::join_exchange() {
  const StreamHandle s = stream(), x = exchange_stream();
  if (x == s) return;
  // What follows on the embedding's stream reads the received blocks, and the next batch
  // rewrites the buffers the transfers read.
  exchange_done_.record(x);
  exchange_done_.block(s);
}

void SparseEmbedding::pool_and_exchange(const Batch& b, const std::string& tag, const Tensor& out) {
  const DType moved = exchange_dtype(out.dtype(), false);
  if (moved != out.dtype()) {
    // An odd 16-bit width moves in f32 (whole 32-bit words): rounded into the output once.
    Tensor wide = scratch("exchanged", out.numel(), moved).reshape(out.shape());
    pool_and_exchange(b, tag, wide);
    ops::copy(out, wide, stream());
    return;
  }
  const int D = comm_.size(), r = comm_.rank();
  const std::int64_t S = config_.slot_num, V = config_.vec_size, Bl = out.size(0);
  const std::int64_t mine = slots_of_rank(r), block = Bl * mine;  // bags per peer's samples
  EMBER_CHECK(b.bags == block * D, where(), ": ", b.bags, " bags for ", D, " ranks of ", Bl,
              " samples and ", mine, " slots");
  build_exchange_index(Bl);
  const std::int64_t row_bytes = V * static_cast<std::int64_t>(out.element_size());
  // Peer p's samples' bags are p * block ... (p + 1) * block - 1 (sample-major, owned slots).
  // What travels: with two ranks the peer's block alone, with more every block.
  const Tensor pooled = scratch(tag + "pooled", (D == 2 ? block : b.bags) * V, out.dtype());
  // Received from peer p: its slots for this rank's samples, at recv_first_[p] rows.
  const Tensor recv = scratch("a2a_recv", Bl * S * V, out.dtype());
  const kernels::KernelTable& k = kernels::on(place_);
  // Bags first ... first + count - 1 into dst (their entries taken as the batch's mean: the
  // count only picks the kernel).
  auto pool_bags = [&](std::int64_t first, std::int64_t count, void* dst) {
    if (count == 0) return;
    const std::int64_t entries = b.bags == 0 ? 0 : b.entries * count / b.bags;
    k.pool(b.local_offsets.data<std::int64_t>() + first,
           b.rows.defined() ? b.rows.data<std::int64_t>() : nullptr, b.bag_scale(first), count,
           entries, table_values(), V, dst, vector_type(out.dtype()), stream());
  };
  JoinOnExit join([this] { join_exchange(); });
  if (D == 2) {
    const int peer = 1 - r;
    pool_bags(peer * block, block, pooled.data());
    exchange_with_peer(pooled, recv.slice(0, recv_first_[peer] * V, recv_first_[peer + 1] * V),
                       peer);
    pool_bags(r * block, block, row_at(recv, recv_first_[r], row_bytes));
  } else {
    pool_bags(0, b.bags, pooled.data());
    std::vector<std::int64_t> send_counts(D), recv_counts(D);
    for (int p = 0; p < D; ++p) {
      send_counts[p] = block * V;
      recv_counts[p] = Bl * slots_of_rank(p) * V;
    }
    comm_.all_to_all_v(as_words(pooled), word_counts(send_counts, pooled), as_words(recv),
                       word_counts(recv_counts, recv), stream());
  }
  join.now();
  if (Bl * S > 0) {
    // Rows move as bytes, in whatever dtype they are.
    k.move_rows(out.data(), nullptr, recv.data(), forward_index_.data<std::int64_t>(), Bl * S,
                row_bytes, stream());
  }
}

void SparseEmbedding::exchange_forward(const Tensor& pooled, const Tensor& out) {
  EMBER_CHECK(!is_localized(config_.type), where(),
              ": the LocalizedSlot exchange pools as it sends (pool_and_exchange)");
  if (out.dtype() != pooled.dtype()) {
    // Pooled in f32 (a sum across ranks): rounded into the output once.
    Tensor wide = scratch("exchanged", out.numel(), pooled.dtype()).reshape(out.shape());
    exchange_forward(pooled, wide);
    ops::copy(out, wide, stream());
    return;
  }
  comm_.reduce_scatter(pooled.reshape({-1}), out.reshape({-1}), distributed::ReduceOp::Sum,
                       stream());
}

void SparseEmbedding::build_exchange_index(std::int64_t Bl) {
  if (index_local_batch_ == Bl) return;
  const int D = comm_.size();
  const std::int64_t S = config_.slot_num;
  // forward: out row b * S + s comes from peer p = s % D, its slot j = s / D.
  // backward: the send block of peer p lists grad rows b * S + (p + j * D).
  std::vector<std::int64_t> fwd(Bl * S), bwd;
  recv_first_.assign(static_cast<std::size_t>(D) + 1, 0);
  for (int p = 0; p < D; ++p)
    recv_first_[p + 1] = recv_first_[p] + Bl * slots_of_rank(p);
  for (std::int64_t b = 0; b < Bl; ++b) {
    for (std::int64_t s = 0; s < S; ++s) {
      const int p = static_cast<int>(s % D);
      fwd[b * S + s] = recv_first_[p] + b * slots_of_rank(p) + s / D;
    }
  }
  for (int p = 0; p < D; ++p) {
    for (std::int64_t b = 0; b < Bl; ++b) {
      for (std::int64_t j = 0; j < slots_of_rank(p); ++j)
        bwd.push_back(b * S + p + j * D);
    }
  }
  forward_index_ = Tensor::from_vector(fwd.empty() ? std::vector<std::int64_t>{0} : fwd, place_);
  backward_index_ = Tensor::from_vector(bwd.empty() ? std::vector<std::int64_t>{0} : bwd, place_);
  index_local_batch_ = Bl;
}

Tensor SparseEmbedding::exchange_backward(const Tensor& grad) {
  const int D = comm_.size(), r = comm_.rank();
  const std::int64_t S = config_.slot_num, V = config_.vec_size;
  const std::int64_t Bl = grad.size(0), B = Bl * D;
  if (D == 1) return grad.contiguous().reshape({Bl * S, V});
  if (!is_localized(config_.type)) {
    Tensor all = scratch("grad_all", B * S * V, grad.dtype());
    comm_.all_gather(as_words(grad.contiguous()), as_words(all), stream());
    return all.reshape({B * S, V});
  }
  EMBER_CHECK(index_local_batch_ == Bl, where(), ": backward with a local batch of ", Bl,
              " after a forward of ", index_local_batch_);
  const std::int64_t mine = slots_of_rank(r), block = Bl * mine;
  const std::int64_t row_bytes = V * static_cast<std::int64_t>(grad.element_size());
  const Tensor g = grad.contiguous();
  // To peer p: the gradients of its slots for this rank's samples (backward_index_ from
  // recv_first_[p]; with two ranks only the peer's block is sent); from peer p: this rank's
  // slots for p's samples, at p * block rows (the global batch's sample order, as the update
  // reads them).
  const std::int64_t sent = D == 2 ? Bl * slots_of_rank(1 - r) : Bl * S;
  const Tensor send = scratch("grad_send", sent * V, grad.dtype());
  const Tensor recv = scratch("grad_recv", B * mine * V, grad.dtype());
  const kernels::KernelTable& k = kernels::on(place_);
  // The gradient rows listed at backward_index_[first ... first + count - 1] into dst.
  auto gather_rows = [&](std::int64_t first, std::int64_t count, void* dst) {
    if (count == 0) return;
    k.move_rows(dst, nullptr, g.data(), backward_index_.data<std::int64_t>() + first, count,
                row_bytes, stream());
  };
  JoinOnExit join([this] { join_exchange(); });
  if (D == 2) {
    const int peer = 1 - r;
    gather_rows(recv_first_[peer], sent, send.data());
    exchange_with_peer(send, recv.slice(0, peer * block * V, (peer + 1) * block * V), peer);
    gather_rows(recv_first_[r], block, row_at(recv, r * block, row_bytes));
  } else {
    // Every peer's block at once: backward_index_ lists them in send's order.
    gather_rows(0, Bl * S, send.data());
    std::vector<std::int64_t> send_counts(D), recv_counts(D);
    for (int p = 0; p < D; ++p) {
      send_counts[p] = Bl * slots_of_rank(p) * V;
      recv_counts[p] = block * V;
    }
    comm_.all_to_all_v(as_words(send), word_counts(send_counts, send), as_words(recv),
                       word_counts(recv_counts, recv), stream());
  }
  join.now();
  return recv.reshape({B * mine, V});
}

}  // namespace ember::embedding
