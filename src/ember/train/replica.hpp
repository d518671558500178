// One rank's copy of a model: its shards of the sparse embeddings (model parallel), and the whole
// dense network (data parallel) as a training network and an evaluation network that share the
// weights. Every rank runs the same calls in the same order from its own thread; ranks meet in
// the communicator's collectives (embedding exchanges, the dense gradients' all-reduce).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/part_timer.hpp"
#include "ember/data/batch.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/distributed/timed_communicator.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/network/dense_network.hpp"
#include "ember/network/dense_optimizer.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/loss_watch.hpp"
#include "ember/train/model_config.hpp"

namespace ember {
class CudaGraph;
}  // namespace ember

namespace ember::train {

struct ReplicaOptions {
  Place place = Place::host();
  distributed::Communicator* comm = nullptr;
  std::int64_t train_rows = 0;  // this rank's share of a training batch
  std::int64_t eval_rows = 0;   // the most samples this rank gets of an evaluation batch
};

class Replica {
 public:
  Replica(const ModelConfig& config, const ReplicaOptions& options);
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  int rank() const { return comm_->rank(); }
  int ranks() const { return comm_->size(); }
  Place place() const { return place_; }

  // Dense weights from the solver's seed (identical on every rank) and BatchNorm statistics.
  void initialize_dense(std::uint64_t seed);

  // Profiling: with a timer, each training step opens a part of it on this replica's stream
  // before each piece of work (embedding forward, the inputs, each dense layer by its part of the
  // model, the all-reduce, the dense optimizer, embedding backward and update) and counts itself
  // as a step; nullptr (the default) times nothing. The timer must outlive its use here.
  void set_part_timer(PartTimer* timer);
  // Opens `part` on this replica's stream when a timer is set (the session's data part).
  void begin_part(std::string_view part);
  // The part of the batch's copies and of the network's label and dense inputs.
  static constexpr std::string_view kDataPart = "data: batch copies and inputs";

  // One training step on this rank's share of `batch`: embeddings forward, dense forward and
  // backward, the dense gradients' all-reduce, both optimizers. Returns the learning rate used.
  // On a GPU the embeddings' lookup, backward and update run on a stream of their own, beside
  // the dense layers that do not need their output or produce their gradient (the bottom MLP,
  // the all-reduce, the dense optimizer), unless solver.overlap_embedding is false, a part timer
  // is set, or overlap_obstacle() says why not; the step ends with the compute stream waiting
  // for that stream, so what follows sees the updated rows.
  // With solver.nan_policy "skip", a step whose loss is not finite on any rank applies no
  // update at all, dense or sparse (collective: every rank skips); see last_step_skipped().
  // `follows_last_step`: nothing has been queued on this replica's streams since its last
  // train_step() (the training loop knows; an evaluation, a checkpoint or a caller's own work
  // between steps does not qualify). Then the lookups wait only for the batch's copies and their
  // own stream, and run beside the last step's dense all-reduce and optimizer; otherwise they
  // wait for everything queued on the compute stream.
  float train_step(const data::DeviceBatch& batch, bool follows_last_step = false);
  // Collective. A batch whose keys the ranks gather (DeviceBatch::keys_from_ranks): gathers
  // them on the stream the embeddings read batches on, and makes `batch.ready` cover it. Every
  // rank calls it for the same batches in the same order, before anything reads their keys.
  void gather_keys(data::DeviceBatch& batch);
  bool last_step_skipped() const { return skipped_; }
  // The embeddings that can (SparseEmbedding::prepares_ahead: host tables, one-hot and hybrid
  // layers, device hash tables) prepare `batch`, the next training batch, while the current
  // step runs (see SparseEmbedding::prefetch). `forward_next`: nothing uses the embeddings
  // before that batch's step (no evaluation, save or load); without it the hash tables, which
  // insert the batch's new keys ahead (SparseEmbedding::inserts_ahead), prepare it in its step.
  void prefetch(const data::DeviceBatch& batch, bool forward_next);
  bool prepares_ahead() const;
  // The batch prefetched will not be trained on (SparseEmbedding::forget_prepared).
  void forget_prepared();
  // What the solver's cuda_graph made of the dense step: "off", "warming up", "replaying", or
  // why it runs without a graph.
  const std::string& cuda_graph_status() const { return graph_status_; }
  // The embeddings whose rows the training network's interactions read in place.
  std::vector<std::string> gathered_embeddings() const;
  // The loss of the last training step on this rank (waits for the device).
  double last_loss() const;
  // Captures the last step's loss for a later check that does not stall the device (see
  // LossWatch); captured_loss(1) is the step before.
  void capture_loss();
  double captured_loss(int back) const { return loss_watch_.read(back); }
  // Evaluation forward of this rank's share of `batch`; appends its logits and labels.
  void eval_step(const data::DeviceBatch& batch, std::vector<float>& logits,
                 std::vector<float>& labels);

  // Collective. Writes this model into a checkpoint staging directory (rank 0 writes the dense
  // files; every rank writes its own rows of each embedding, a shard rank_<r>/ when there are
  // several ranks). Returns the rows this rank wrote of each embedding, in configuration order,
  // and rank 0's failure to write the dense files ("" for none: the ranks finish together
  // either way, and the caller makes it every process's error).
  struct Saved {
    std::vector<std::int64_t> rows;
    std::string failure;
  };
  Saved save(const std::filesystem::path& dir, bool with_optimizer_states);
  // The files of this rank's shards of a checkpoint written by save() with several ranks, their
  // paths relative to `dir` (the rank hashes what it wrote); none with one rank (the writer of
  // meta.json hashes the files itself).
  std::vector<CheckpointFile> hash_own_shards(const std::filesystem::path& dir) const;
  // Collective. Reads a verified checkpoint: dense weights (and optimizer states when present
  // and wanted), every embedding, and the step counts.
  void load(const std::filesystem::path& dir, bool with_optimizer_states);
  // Loads HugeCTR-style model files named by the solver: dense_model_file, sparse_model_file,
  // and the optimizer states dense_opt_states_file and sparse_opt_states_file (see
  // docs/training.md, "Starting from model files").
  void load_model_files(const SolverConfig& solver);

  // Optimizer steps taken (the iteration count).
  std::int64_t steps() const;
  // After loading a checkpoint of `iteration` whose optimizers took `optimizer_steps` steps
  // (fewer when batches were skipped): the dense schedule and the dropout masks continue from
  // there (the embeddings restore their own step counts).
  void resume_at(std::int64_t iteration, std::int64_t optimizer_steps);
  const network::DenseNetwork& train_network() const { return *train_.network; }
  network::ParameterStore& parameters() { return *store_; }
  const std::vector<std::unique_ptr<embedding::SparseEmbedding>>& embeddings() const {
    return embeddings_;
  }
  network::LossLayer::Kind loss_kind() const { return train_.network->loss().kind(); }
  const std::vector<float>& loss_target_weight() const {
    return train_.network->loss().target_weight();
  }

 private:
  struct Inputs;
  // A dense network with its build context and the input blobs it reads. The training one (with
  // gradients) and the evaluation one share the parameter store.
  struct Graph {
    std::unique_ptr<network::BuildContext> context;
    std::unique_ptr<Inputs> inputs;
    std::unique_ptr<network::DenseNetwork> network;
  };
  Graph build_graph(const network::BuildOptions& options, std::int64_t rows, bool training);
  std::unique_ptr<Inputs> make_inputs(std::int64_t rows, bool training, DType activations);
  // solver.embedding_gather: the training network's interactions read the rows of the
  // embeddings that allow it in place (SparseEmbedding::gathers, InteractionLayer::can_gather).
  void gather_in_place();
  void feed(Inputs& in, const data::DeviceBatch& batch, bool training, StreamHandle stream);
  // feed()'s two halves: the embeddings' lookups into their input blobs (queued on `stream`,
  // which becomes the current stream meanwhile), then the label and dense features.
  void feed_embeddings(Inputs& in, const data::DeviceBatch& batch, bool training,
                       StreamHandle stream);
  void feed_data(Inputs& in, const data::DeviceBatch& batch, StreamHandle stream);
  StreamHandle stream() const;
  // The training step's dense forward and backward: eagerly, or (solver cuda_graph) captured
  // on the second step and replayed from then on.
  void run_dense(StreamHandle s);
  // The step's updates after the dense backward: embedding backward and update (queued on
  // `embedding_stream`), all-reduce, dense optimizer (on `s`). Returns the learning rate used.
  float apply_updates(StreamHandle s, StreamHandle embedding_stream);
  // Why the embeddings cannot run beside the dense network ("" when they can).
  std::string overlap_obstacle() const;
  // Why this replica's dense step cannot be a graph ("" when it can).
  std::string graph_obstacle() const;
  void run_without_graph(const std::string& why);
  void write_dense(const std::filesystem::path& dir, bool with_optimizer_states);
  void read_dense(const std::filesystem::path& dir, bool with_optimizer_states);
  // The trainable weights' bytes (dense.model's size).
  std::uint64_t trainable_bytes() const;
  // Reads every optimizer state slot, each in dense.model's layout (the size already checked).
  void read_dense_states(const std::filesystem::path& path);
  void load_dense_opt_states(const std::filesystem::path& path);
  void load_sparse_model(std::size_t i, const std::filesystem::path& model,
                         const std::filesystem::path& states);
  // False when the last step's loss is not finite on some rank (collective; waits for the
  // device).
  bool loss_finite_on_every_rank(StreamHandle stream);

  const ModelConfig& config_;
  Place place_;
  // The session's communicator behind a wrapper that times collectives while profiling; every
  // collective of this replica (its embeddings' too) goes through comm_, the wrapper.
  std::unique_ptr<distributed::TimedCommunicator> timed_comm_;
  distributed::Communicator* comm_;
  std::vector<std::unique_ptr<embedding::SparseEmbedding>> embeddings_;
  std::vector<std::size_t> embedding_input_;  // the data sparse input each embedding reads
  std::shared_ptr<network::ParameterStore> store_;
  Graph train_, eval_;
  std::unique_ptr<network::DenseOptimizer> optimizer_;
  float loss_scaler_ = 1.0f;
  // The embeddings beside the dense network (solver overlap_embedding): their stream and the
  // events between it and the compute stream; null where the step runs on one stream. Declared
  // before the graph, whose replays record and wait on these events.
  struct Overlap;
  std::unique_ptr<Overlap> overlap_;
  std::unique_ptr<CudaGraph> dense_graph_;  // null: no graph (off, or given up)
  int eager_dense_steps_ = 0;
  std::string graph_status_ = "off";
  bool skipped_ = false;
  // The last train_step() ran its embeddings on their own stream and returned normally.
  bool last_step_overlapped_ = false;
  LossWatch loss_watch_;
  PartTimer* parts_ = nullptr;
};

}  // namespace ember::train
