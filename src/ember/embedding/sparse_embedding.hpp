// One rank's part of a sparse embedding layer (HugeCTR's three types), driven SPMD: every rank
// of a distributed::Communicator owns one SparseEmbedding, calls the same methods in the same order
// from its own thread, and the ranks meet only in the communicator's collectives.
//
// Forward takes the WHOLE global batch's CSR for the layer's sparse input (rows b * slot_num + s,
// keys carrying their slot offsets) at the rank's place, plus the rank's share of the samples,
// and returns the pooled vectors of those samples, [local_size, slot_num, vec_size] f32 (the
// table itself may store its vectors in f16 or bf16: EmbeddingConfig::value_dtype).
// Ownership: DistributedSlot: key k on rank k mod D (partial pools meet in a reduce-scatter);
// LocalizedSlot (hash and one-hot): slot s on rank s mod D (pools travel by all-to-all).
// Hybrid: the frequent keys on every rank (their gradients all-reduced), the others as one-hot
// (only the vectors of infrequent keys travel, by all-to-all; sparse_embedding_hybrid.cpp).
// Backward routes the output gradient back to the owners (all-gather / all-to-all), and update()
// sums each touched row's gradients and applies the optimizer once per row.
//
// Storage (the config's "storage", storage_config.hpp): the rank's rows and their optimizer
// state live in device memory, or in host memory with a device cache of the hot rows
// (host_backed_rows.hpp); training is exact either way (docs/embedding.md). prefetch() prepares
// the next training batch while the current step runs (prepares_ahead()).
//
// On a GPU the training step does not wait for the device (with one rank, or a rank owning
// every slot; otherwise forward waits once to learn the rank's entry count). Errors found on the
// device (a full table, a reserved key, a one-hot key outside its slot) are therefore raised by
// the next forward(), snapshot(), save() or load() (table errors by rows_in_use() too), naming
// the numbers; the keys concerned read zeros and take no update meanwhile, never another key's
// row.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/embedding_config.hpp"
#include "ember/embedding/hash_table.hpp"
#include "ember/embedding/host_backed_rows.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/tensor/sparse.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::embedding {

namespace kernels {
struct LazyParams;
struct RowStates;
struct Values;
}  // namespace kernels

// Everything a model holds for one embedding, gathered from all ranks and sorted by key (i64
// whatever the key type). states[k] are the optimizer's state columns in the order of
// state_names().
struct EmbeddingSnapshot {
  std::vector<std::int64_t> keys;
  std::vector<float> vectors;              // keys.size() x vec_size
  std::vector<std::int64_t> slots;         // LocalizedSlot hash only: each key's slot
  std::vector<std::vector<float>> states;  // each keys.size() x vec_size
  std::int64_t step = 0;                   // optimizer steps taken
};

class SparseEmbedding {
 public:
  // `optimizer` is used unless the config carries its own. The communicator must outlive the
  // embedding; its place() is where this rank's tables live.
  SparseEmbedding(EmbeddingConfig config, const optim::OptimizerConfig& optimizer,
                  distributed::Communicator& comm);
  ~SparseEmbedding();
  SparseEmbedding(const SparseEmbedding&) = delete;
  SparseEmbedding& operator=(const SparseEmbedding&) = delete;

  const EmbeddingConfig& config() const { return config_; }
  const optim::OptimizerConfig& optimizer() const { return optimizer_; }
  Place place() const { return place_; }
  int rank() const { return comm_.rank(); }
  int ranks() const { return comm_.size(); }
  // Rows this rank can hold and holds.
  std::int64_t capacity() const { return capacity_; }
  std::int64_t rows_in_use() const;
  // Optimizer steps taken (update() calls).
  std::int64_t step() const { return step_; }
  // Where this rank's rows live: Device, or Host (with a device cache of cache_rows() rows).
  StorageLocation location() const {
    return host_rows_ ? StorageLocation::Host : StorageLocation::Device;
  }
  std::int64_t cache_rows() const { return host_rows_ ? host_rows_->cache_rows() : 0; }
  // A host table's counters since it was made (hit rate, rows and bytes moved, prefetch times);
  // nothing for a device table.
  std::optional<CacheStats> cache_stats();
  // Names of the optimizer's state columns (the files they are saved under).
  std::vector<std::string> state_names() const;

  // training: unknown keys are inserted (initialised rows) and the batch is kept for backward;
  // evaluation: unknown keys read zeros and nothing is inserted. First raises any error of an
  // earlier batch that the device found (see above).
  Tensor forward(const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size,
                 bool training = true);
  // The same, written into `out`: [local_size, slot_num, vec_size], contiguous, f32, f16 or bf16
  // at place() (the network's input blob). A 16-bit `out` holds each pooled f32 vector rounded
  // to nearest even; with one rank the pooling writes it directly (no f32 copy, no cast pass).
  void forward_into(const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size,
                    const Tensor& out, bool training = true);
  // Whether forward_gather() can stand for forward_into(): one rank, the rows in device memory
  // (or on the CPU), not the hybrid layer, fewer than 2^31 - 1 rows.
  bool gathers() const;
  // The rows a gather reads: capacity() rows of vec_size values of config().value_dtype. They
  // stay at this address for the layer's life.
  const void* table_data() const;
  // forward_into() for a reader that reads the rows in place (gathers()): instead of pooling
  // every bag into `out`, writes each bag's code into `codes` ([local_size * slot_num] i32 at
  // place(); tensor/row_gather.hpp: the row of a bag's one entry, or zeros) and pools only the
  // bags of several entries, into their rows of `out` (then their code names that row). The
  // reader must read the rows before the next update() changes them.
  void forward_gather(const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size,
                      const Tensor& codes, const Tensor& out, bool training = true);
  // Prepares a training batch ahead, on a stream of its own, while the step before it runs
  // (prepares_ahead()): what the forward needs that depends on the keys alone, and for a host
  // table its rows made resident by a plan (the missing rows staged); the forward() of the same
  // batch then starts from there. `ready` (GPU batches) is the event after which the batch's
  // keys are at place(). Does nothing for a layer that cannot. Errors are raised by the
  // forward() of that batch. A layer that inserts_ahead() must see that batch's training
  // forward next: an evaluation, another batch, a save or a load in between is an error.
  void prefetch(const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size,
                const Event* ready = nullptr);
  // Whether prefetch() does anything: a host table, a device table whose rows follow from the
  // keys (one-hot and hybrid layers: their rows, the exchange's plan and the grouping for the
  // update are found ahead), or a device hash table that inserts_ahead().
  bool prepares_ahead() const;
  // A device hash table (update types Local and LazyGlobal): preparing a training batch ahead
  // inserts its new keys (rows initialised as in its forward, a function of seed, key and step),
  // so its rows and the grouping for the update are found ahead too. Then nothing but that
  // batch's forward may use the layer next: an evaluation in between would find the new keys
  // (it reads zeros for keys not yet trained), a save would write them. Global updates every row
  // in use, which the new rows must not be yet, so it prepares in the forward.
  bool inserts_ahead() const;
  // Forgets the batch prefetch() prepared: its forward will not come. A caller whose batch goes
  // away unused calls it, since a batch is known by its tensors' addresses, which a later batch
  // may reuse. Keys a forgotten batch inserted ahead stay in the table, with their initial rows.
  void forget_prepared();
  // Forwards of a device table that started from a batch prepare ahead.
  std::int64_t forwards_prepared_ahead() const { return forwards_prepared_ahead_; }
  // grad: [local_size, slot_num, vec_size] f32, f16 or bf16 at place(), the gradient of
  // forward's output. With one rank a 16-bit gradient is read as it is by update() (widened
  // exactly, so the sums are those of its f32 copy): it must stay unchanged until then.
  // Exchanges between ranks move it as it is where they only move it, else in f32
  // (exchange_dtype). A training step's collectives are all in forward() and backward().
  void backward(const Tensor& grad);
  // One optimizer step on the rows of the last backward (all rows for Global), with the
  // learning rate of the schedule's next step. Gradients arrive multiplied by loss_scaler. It
  // runs no collective: a caller may run its own beside it.
  void update(float loss_scaler = 1.0f);
  // LocalizedSlot on two GPU ranks, HybridSparseEmbedding on two or more: whether the
  // exchanges' transfers run on a stream of their own, beside the pooling (forward) and
  // gathering (backward) of this rank's own block (the hybrid: of the frequent rows), rather
  // than on the current stream after it. Off by default; the results are the same. A caller
  // that times parts on one stream leaves it off.
  void set_exchange_overlap(bool on);

  // Collective. Gathers every rank's rows (LazyGlobal rows brought up to date first); the
  // snapshot is complete on rank 0 and empty elsewhere.
  EmbeddingSnapshot snapshot();
  // Collective. Writes the model into directory `dir` (see docs/embedding.md for the layout):
  // with one rank the files in `dir`, with several each rank's own rows in `dir`/rank_<r>/
  // (written in parallel); under a temporary name, renamed into place by rank 0 once every rank
  // has written. Returns the rows this rank wrote.
  std::int64_t save(const std::filesystem::path& dir, bool with_optimizer_states = true);
  // Collective. Reads `dir` (written with any rank count, one file set or shards); every rank
  // takes the keys it owns. When the shards are this job's own (one per rank, each holding only
  // its rank's keys), rank r reads only rank_<r>/; otherwise every rank streams through every
  // shard. Rows named in the files are replaced; states and the step count are restored when
  // present.
  void load(const std::filesystem::path& dir);

 private:
  struct Batch;
  struct Prepared;
  struct Hybrid;
  // Where the device writes a batch's data errors (kernels::onehot_rows' or hybrid_rows' three
  // words), and on a GPU their pinned copy and the event after the copy.
  struct ErrorWords {
    Tensor device, host;
    Event copied;
  };
  std::string where() const;
  // Where each slot's keys begin when keys carry slot offsets (slot_size_array's running sums;
  // [slot_num + 1], zeros without a slot_size_array).
  std::vector<std::int64_t> slot_begin() const;
  // Rows this rank's table holds (the owned slots' vocabulary where it is known).
  std::int64_t rank_capacity() const;
  // One-hot: where each owned slot's keys begin, its size, its first local row, and the key of
  // every local row.
  void build_onehot_geometry();
  // A buffer kept between batches, grown when too small. `user`: the stream that uses it when
  // not the current one (a host table's prepare stream): new memory comes from the current
  // stream's pool, so `user` first waits for the work queued there.
  Tensor scratch(const std::string& name, std::int64_t numel, DType dtype,
                 StreamHandle user = nullptr);
  StreamHandle stream() const;
  // Raises the errors of earlier batches found on the device (GPU ranks).
  void check_deferred_errors();
  // Makes `w` once; its device words are first written on `user`.
  void make_error_words(ErrorWords& w, StreamHandle user);
  // After kernels on `s` wrote `w`: on the CPU raises their error now; on a GPU queues the copy
  // that check_deferred_errors reads once the batch's forward has made `w` the pending words.
  void collect_errors(ErrorWords& w, StreamHandle s);
  [[noreturn]] void throw_data_error(const std::int64_t* words) const;
  [[noreturn]] void throw_onehot_error(std::int64_t key, std::int64_t bag) const;
  void check_batch(const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size,
                   std::int64_t* global_batch) const;
  // Selects the rank's keys, finds (training: inserts) their rows and groups the entries by row,
  // on `stream`, into the scratch buffers named `tag`. start_rows: new rows are started in the
  // table (a device table; a host table starts them in their cache slots later).
  std::unique_ptr<Batch> prepare_batch(const CsrTensor& batch, std::int64_t local_offset,
                                       std::int64_t local_size, bool training, StreamHandle stream,
                                       const std::string& tag, bool start_rows, ErrorWords& errors);
  // The batch the forward starts from: prepared ahead (host tables always), else prepared now
  // (prepare_hybrid for a hybrid layer).
  std::unique_ptr<Batch> take_batch(const CsrTensor& batch, std::int64_t local_offset,
                                    std::int64_t local_size, bool training);
  // A device table's batch prepared ahead (sparse_embedding_ahead.cpp): none when the layer's
  // constants or exchange plan were sized for another batch (they grow only in a forward).
  std::unique_ptr<Prepared> prepare_ahead(const CsrTensor& batch, std::int64_t local_offset,
                                          std::int64_t local_size, const Event* ready);
  // The prepared batch, when it is this one (its stream's work ordered before the current
  // stream's); a training batch that is not replaces it.
  std::unique_ptr<Batch> take_prepared(const CsrTensor& batch, std::int64_t local_offset,
                                       std::int64_t local_size, bool training);
  // Batches prepared ahead: the stream they are prepared on (a host table's, else one of the
  // layer's own; none on the CPU), and that stream's wait for the set's last user and the keys.
  StreamHandle prepare_stream();
  void wait_for_set(int set, const Event* ready, StreamHandle stream);
  // Refuses `what` (an evaluation, a save, ...) while a batch prepared ahead holds keys it
  // inserted for its forward (inserts_ahead()).
  void refuse_while_inserted_ahead(const char* what) const;
  // LazyGlobal's catch-up, pooling and the exchange into `out` (forward_into's), or with `codes`
  // the gather's codes (forward_gather's); keeps the batch for backward (training).
  void finish_forward(std::unique_ptr<Batch> b, bool training, const Tensor& out,
                      const Tensor* codes = nullptr);
  // The layer's forward from its batch (finish_forward, or finish_hybrid_forward).
  void run_forward(std::unique_ptr<Batch> b, bool training, const Tensor& out);
  void check_output(const Tensor& out, std::int64_t local_size) const;
  // Finds (training: inserts) the batch's rows; one-hot rows report their data errors in
  // `errors` (Batch::errors).
  void lookup(Batch& b, bool training, StreamHandle stream, bool start_rows, ErrorWords& errors);
  // ---- host tables (sparse_embedding_cache.cpp) ----
  StorageDecision decide_location() const;
  void make_host_rows(const StorageDecision& decision);
  RowColumns row_columns() const;
  std::unique_ptr<Batch> take_cached_batch(const CsrTensor& batch, std::int64_t local_offset,
                                           std::int64_t local_size, bool training);
  std::unique_ptr<Prepared> prepare_cached(const CsrTensor& batch, std::int64_t local_offset,
                                           std::int64_t local_size, bool training,
                                           const Event* ready);
  std::vector<std::int64_t> read_unique_rows(const Batch& b, StreamHandle stream);
  // Installs a prepared batch's row moves before other work uses the cache (it stays prepared).
  void settle_prepared();
  // Forgets a prepared batch.
  void drop_prepared();
  std::int64_t replay_target() const;
  int take_buffer_set();
  void release_buffer_set(int set);
  // Brings every row to the current step (LazyGlobal catch-up, Global replay), host rows too.
  void bring_rows_current();
  // ---- HybridSparseEmbedding (sparse_embedding_hybrid.cpp) ----
  // The frequent rows (replicated) and what the hybrid's steps share.
  void make_hybrid();
  // What the hybrid's forward needs from the keys alone, on `stream` into the scratch buffers
  // named `tag`: each bag's rows (and the data errors, in `errors`), what goes to and comes from
  // each rank (the one wait for the device), the rows grouped for the update.
  std::unique_ptr<Batch> prepare_hybrid(const CsrTensor& batch, std::int64_t local_offset,
                                        std::int64_t local_size, bool training, StreamHandle stream,
                                        const std::string& tag, ErrorWords& errors);
  // Whether the constants and the exchange's segment bounds fit a batch (prepare_ahead).
  bool hybrid_sized_for(std::int64_t global_batch, std::int64_t local_size) const;
  // The constants' length a batch needs.
  std::int64_t hybrid_constants_for(std::int64_t global_batch, std::int64_t local_size) const;
  void find_hybrid_rows(const CsrTensor& batch, std::int64_t local_offset, Batch& b, bool training,
                        const std::string& tag, StreamHandle stream, ErrorWords& errors);
  void plan_hybrid_exchange(Batch& b, const std::string& tag, StreamHandle stream);
  void group_hybrid_rows(Batch& b, bool training, const std::string& tag, StreamHandle stream);
  // LazyGlobal's catch-up of the rows a batch reads, pooling and the exchange.
  void finish_hybrid_forward(std::unique_ptr<Batch> b, bool training, const Tensor& out);
  // The infrequent vectors' gradients back to their owners ([entries, vec_size] at the owner),
  // and the frequent rows' gradient sums over every rank.
  Tensor hybrid_exchange_backward(const Tensor& grad);
  // The frequent rows' gradient sums and users (HybridBatch::sums): this rank's, every rank's.
  void sum_local_frequent_gradients();
  void all_reduce_frequent_gradients();
  // The frequent rows' step, with those sums.
  void update_frequent(std::int64_t step, const optim::UpdateStep& u,
                       const kernels::LazyParams* lazy);
  void catch_up_frequent();
  // Copies the frequent rows into their owners' one-hot rows (which otherwise go unused), so
  // that saves and snapshots write the one-hot layout; and back after a load.
  void frequent_rows_to_owners();
  void frequent_rows_from_owners();
  [[noreturn]] void throw_hybrid_error(std::int64_t bag, std::int64_t key,
                                       std::int64_t count) const;
  // The all-to-all orders of the LocalizedSlot exchange for a local batch of `local_size`, and
  // where each peer's block starts in the forward's receive buffer (recv_first_).
  void build_exchange_index(std::int64_t local_size);
  // ---- persistence (sparse_embedding_io.cpp) ----
  // Rank 0's sink receives the whole model's rows in key order (then slot), streamed from every
  // rank a chunk at a time: (rows, keys, slots or null, vectors, each state's rows).
  using RowSink = std::function<void(std::int64_t, const std::int64_t*, const std::int64_t*,
                                     const float*, const std::vector<const float*>&)>;
  void stream_model(const RowSink& sink);
  // This rank's rows (made rows only, for a host table) with their keys and slots (LocalizedSlot
  // hash), in key order, then slot.
  void local_rows_in_key_order(std::vector<std::int64_t>& rows, std::vector<std::int64_t>& keys,
                               std::vector<std::int64_t>& slots);
  // Writes this rank's rows as one file set in `dir`; returns the failure ("" for none).
  std::string write_shard(const std::filesystem::path& dir, bool with_optimizer_states,
                          std::int64_t& rows_written);
  // Collective: the lowest rank that passed `failed`, or ranks() when none did.
  int first_failed_rank(bool failed);
  // Whether a saved row belongs to this rank: its key and its slot (LocalizedSlot hash: the
  // saved slot id; the other types: the key's slot of slot_size_array, or -1 when none applies).
  bool owns(std::int64_t key, std::int64_t slot) const;
  void read_rows(const std::vector<std::int64_t>& rows, std::vector<float>& vectors,
                 std::vector<std::vector<float>>& states);
  // The dtype in which pooled vectors and gradients of `dtype` cross between ranks: the vectors'
  // own where the exchange only moves them (LocalizedSlot's all-to-all, the gradients'
  // all-gather; 16-bit rows go as 32-bit words, so an odd 16-bit width goes in f32), f32 where it
  // sums them (DistributedSlot's reduce-scatter). Moving 16-bit values as they are gives the
  // same bits as widening, moving and rounding them back, with half the bytes on the links.
  DType exchange_dtype(DType dtype, bool sums) const;
  // LocalizedSlot slots of rank p (p, p + D, ...).
  std::int64_t slots_of_rank(int p) const;
  // LocalizedSlot, several ranks: pools the batch's bags and sends each peer its block (with
  // two ranks the peer's block first, sent while the own block is pooled), then reorders what
  // arrived into `out` (any of forward_into's dtypes).
  void pool_and_exchange(const Batch& b, const std::string& tag, const Tensor& out);
  // The two-rank exchange's transfer: `send` to `peer` and `recv` from it, on the exchange
  // stream once the current stream has written `send`.
  void exchange_with_peer(const Tensor& send, const Tensor& recv, int peer);
  // An all-to-all on the exchange stream (the current stream without set_exchange_overlap)
  // once the current stream has written `send`; the current stream joins it (join_exchange)
  // before it reads `recv` or rewrites `send`.
  void exchange_beside(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                       const Tensor& recv, const std::vector<std::int64_t>& recv_counts);
  // The current stream waits for the exchange stream's transfer.
  void join_exchange();
  StreamHandle exchange_stream() const;
  // DistributedSlot: the pooled partial sums (f32) reduce-scattered into `out` (any of
  // forward_into's dtypes).
  void exchange_forward(const Tensor& pooled, const Tensor& out);
  // The output gradient (f32, or 16-bit where exchange_dtype keeps it) to the ranks that own its
  // rows; the result is in the same dtype.
  Tensor exchange_backward(const Tensor& grad);
  void catch_up_all();
  void drop_batch();
  void ensure_step_values(std::int64_t steps);
  // What a LazyGlobal catch-up to `steps` needs (Adam's step sizes or Ftrl's rates made ready
  // up to there).
  kernels::LazyParams lazy_params(std::int64_t steps);
  kernels::RowStates row_states() const;
  // The table's vectors as the kernels take them (value type, rounding).
  kernels::Values table_values() const;
  void insert_loaded(const EmbeddingSnapshot& file, const std::vector<bool>& have_states);
  void fill_loaded_steps();

  EmbeddingConfig config_;
  optim::OptimizerConfig optimizer_;
  distributed::Communicator& comm_;
  Place place_;
  std::int64_t capacity_ = 0;
  std::vector<std::int64_t> owned_slots_;            // Localized: this rank's slots, ascending
  Tensor owned_slots_dev_;                           // same, at place_
  std::unique_ptr<HashTable> table_;                 // hash types
  Tensor values_;                                    // [capacity, vec_size] of value_dtype
  Tensor state0_, state1_;                           // optimizer states, [capacity, vec_size]
  Tensor last_step_;                                 // Global / LazyGlobal: i64 [capacity]
  Tensor row_slot_;                                  // LocalizedSlot hash: i64 [capacity]
  Tensor onehot_keys_;                               // one-hot: key of each local row
  Tensor onehot_begin_, onehot_size_, onehot_base_;  // one-hot geometry per owned slot
  // The data errors of batches prepared in their forward, and (GPU) the words of the last
  // forward's batch, read by the next call.
  ErrorWords forward_bad_;
  const ErrorWords* bad_pending_ = nullptr;
  optim::LearningRateSchedule schedule_;
  std::int64_t step_ = 0;
  std::vector<float> step_values_host_;  // LazyGlobal Adam / Ftrl: LazyParams::step_values
  Tensor step_values_;
  std::unique_ptr<Batch> batch_;           // the last training forward's bookkeeping
  Tensor forward_index_, backward_index_;  // LocalizedSlot all-to-all reorders
  std::vector<std::int64_t> recv_first_;   // their peers' blocks: first row of each, and the end
  std::int64_t index_local_batch_ = -1;    // the local batch they were built for
  bool exchange_overlap_ = false;          // set_exchange_overlap
  Stream exchange_stream_;                 // CUDA, created when first asked for
  Event exchange_block_ready_, exchange_done_;
  std::map<std::string, Tensor> scratch_;
  // Host tables: the rows in host memory with their device cache. Batches prepared ahead (host
  // and device tables): the one prepared, and three sets of batch buffers (one prepared, one
  // running, one being released).
  std::unique_ptr<HostBackedRows> host_rows_;
  std::unique_ptr<Prepared> prepared_;
  std::int64_t forwards_prepared_ahead_ = 0;
  struct BufferSet {
    Event free;      // CUDA: the compute stream is done with the set
    Event prepared;  // CUDA: a device table's batch is prepared in the set
    ErrorWords bad;  // a device table's batch's data errors
    bool busy = false;
    std::uint64_t released = 0;
  };
  std::array<BufferSet, 3> buffer_sets_;
  std::uint64_t releases_ = 0;
  Event keys_ready_;  // CUDA: a batch's keys are ready on the compute stream
  // CUDA: a training forward's own inserts are done (a batch inserted ahead comes after them,
  // so that each insert's new rows stay contiguous and in batch order)
  Event forward_inserted_;
  Stream ahead_stream_;                         // CUDA: where a device table prepares batches ahead
  Tensor readback_;                             // pinned: the distinct-row count and rows read back
  std::vector<std::int64_t> onehot_host_keys_;  // one-hot: the key of each local row
  std::unique_ptr<Hybrid> hybrid_;              // HybridSparseEmbedding
};

}  // namespace ember::embedding
