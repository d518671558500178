#include "ember/train/replica.hpp"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>

#include "ember/core/cuda_graph.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/layers/dropout_layer.hpp"
#include "ember/network/layers/interaction_layers.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/row_gather.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train {

namespace fs = std::filesystem;

// The blobs the dense network reads: what the data and the embeddings provide. They are bound
// once to tensors of their own, because layers that view their bottoms (Reshape) keep views of
// these tensors; each step copies (and, for 16-bit activations, converts) into them.
struct Replica::Inputs {
  std::int64_t rows = 0;
  network::BlobPtr label, dense;
  std::vector<network::BlobPtr> embeddings;  // one per embedding, [rows, slot_num, vec_size]
  // Per embedding, where an interaction reads its rows in place: each bag's code ([rows *
  // slot_num] i32, tensor/row_gather.hpp); undefined where the embedding pools into its blob.
  std::vector<Tensor> gather_codes;
  std::map<std::string, network::BlobPtr> by_name;
};

struct Replica::Overlap {
  Stream stream;
  Event step_start;        // on the compute stream: all queued there before the step
  Event embeddings_ready;  // on the embeddings' stream: the lookups written the inputs
  Event gradients_ready;   // on the compute stream (in the dense backward): their gradients
  Event exchanged;         // on the embeddings' stream: their last collective of the step
  Event updated;           // on the embeddings' stream: the rows updated

  Overlap(int device, int priority)
      : stream(Stream::create(device, priority)),
        step_start(Event::create(device)),
        embeddings_ready(Event::create(device)),
        gradients_ready(Event::create(device)),
        exchanged(Event::create(device)),
        updated(Event::create(device)) {}
};

Replica::Replica(const ModelConfig& config, const ReplicaOptions& options)
    : config_(config), place_(options.place), comm_(options.comm), loss_watch_(options.place) {
  EMBER_CHECK(comm_ != nullptr, "Replica needs a communicator");
  timed_comm_ = std::make_unique<distributed::TimedCommunicator>(*comm_);
  comm_ = timed_comm_.get();
  EMBER_CHECK(comm_->place() == place_, "rank ", comm_->rank(), ": the communicator works on ",
              comm_->place(), " but the replica on ", place_);
  const SolverConfig& solver = config.solver;
  const bool mixed = solver.mixed_precision && place_.is_cuda();
  loss_scaler_ = mixed ? solver.loss_scaler : 1.0f;

  for (const auto& e : config.embeddings) {
    const auto it =
        std::find_if(config.data.sparse.begin(), config.data.sparse.end(),
                     [&](const data::SparseInputConfig& s) { return s.top == e.bottom; });
    embedding_input_.push_back(static_cast<std::size_t>(it - config.data.sparse.begin()));
    embeddings_.push_back(
        std::make_unique<embedding::SparseEmbedding>(e, config.optimizer, *comm_));
  }

  const DType activations = mixed ? solver.mixed_precision_dtype : DType::F32;
  store_ = std::make_shared<network::ParameterStore>(place_, DType::F32, activations);
  network::BuildOptions o;
  o.place = place_;
  o.activation_dtype = activations;
  o.allow_tf32 = solver.enable_tf32_compute;
  o.algorithm_search = solver.algorithm_search;
  o.loss_scaler = loss_scaler_;
  o.replicas = comm_->size();
  // Dropout masks differ between ranks (they see different samples), and are reproducible.
  o.seed = solver.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(comm_->rank()) + 1;
  o.build_gradients = true;
  train_ = build_graph(o, options.train_rows, true);
  o.build_gradients = false;
  eval_ = build_graph(o, options.eval_rows, false);
  if (solver.embedding_gather) gather_in_place();

  optimizer_ = std::make_unique<network::DenseOptimizer>(config.optimizer, store_);
  initialize_dense(solver.seed);
  if (const std::string why = overlap_obstacle(); why.empty()) {
    // With one rank the embeddings' update and the next batch's lookups run beside the dense
    // backward; at the background priority their many blocks stop taking multiprocessors from it
    // (one H200: +1.9 %). With f16 tables pooled, the interaction forward waited about 0.1 ms
    // for the lookups, yet the step's priority or one above it measured 1-5 % slower there too
    // (read in place, embedding_gather, the pooling is off that path). With several ranks the
    // exchange follows the embeddings' backward on the step's path (two H200s: 2 % slower in the
    // background).
    const int priority = comm_->size() == 1 ? kBackgroundPriority : kStepPriority;
    overlap_ = std::make_unique<Overlap>(place_.device(), priority);
    network::DenseNetwork::InputHooks hooks;
    for (const network::BlobPtr& blob : train_.inputs->embeddings)
      hooks.inputs.push_back(blob.get());
    hooks.before_first_use = [this](StreamHandle s) {
      overlap_->embeddings_ready.block_across_capture(s);
    };
    hooks.gradients_final = [this](StreamHandle s) {
      overlap_->gradients_ready.record_across_capture(s);
    };
    train_.network->set_input_hooks(std::move(hooks));
  } else if (place_.is_cuda() && solver.overlap_embedding) {
    log_once(cat("overlap_embedding ", why), spdlog::level::info,
             cat("overlap_embedding: ", why,
                 "; the embeddings run on the compute stream, after the dense network"));
  }
  if (solver.cuda_graph || solver.holistic_cuda_graph) {
    if (solver.holistic_cuda_graph) {
      log_once("holistic_cuda_graph", spdlog::level::info,
               "holistic_cuda_graph: the dense forward and backward are captured as with "
               "cuda_graph; the embedding lookup and update, the all-reduce and the optimizers "
               "stay outside the graph (their learning rate and step count change every step)");
    }
    const std::string why = graph_obstacle();
    if (why.empty()) {
      dense_graph_ = std::make_unique<CudaGraph>();
      graph_status_ = "warming up";
    } else {
      run_without_graph(why);
    }
  }
}

Replica::~Replica() = default;

Replica::Graph Replica::build_graph(const network::BuildOptions& options, std::int64_t rows,
                                    bool training) {
  Graph g;
  try {
    g.context = std::make_unique<network::BuildContext>(options, store_);
    g.inputs = make_inputs(rows, training, options.activation_dtype);
    g.network = std::make_unique<network::DenseNetwork>(config_.dense_layers, g.inputs->by_name,
                                                        *g.context);
    g.context->allocate();
  } catch (const OutOfMemoryError& e) {
    // The inputs and activations grow with the batch: say which setting to lower.
    const SolverConfig& s = config_.solver;
    const char* key = training ? "solver.batchsize" : "solver.batchsize_eval";
    EMBER_THROW_AS(OutOfMemoryError, "the ", training ? "training" : "evaluation",
                   " network's inputs and activations for ", key, " ",
                   training ? s.batchsize : s.batchsize_eval, " (", rows, " samples per rank on ",
                   place_, ") do not fit: ", e.what(), "; lower ", key);
  }
  g.network->bind();
  return g;
}

std::unique_ptr<Replica::Inputs> Replica::make_inputs(std::int64_t rows, bool training, DType act) {
  auto in = std::make_unique<Inputs>();
  in->rows = rows;
  in->label = network::make_input_blob(config_.data.label_top, {rows, config_.data.label_dim},
                                       DType::F32, place_, false);
  in->by_name[config_.data.label_top] = in->label;
  if (config_.data.dense_dim > 0) {
    in->dense = network::make_input_blob(config_.data.dense_top, {rows, config_.data.dense_dim},
                                         act, place_, false);
    in->by_name[config_.data.dense_top] = in->dense;
  }
  for (const auto& e : config_.embeddings) {
    auto blob =
        network::make_input_blob(e.top, {rows, e.slot_num, e.vec_size}, act, place_, training);
    in->embeddings.push_back(blob);
    in->by_name[e.top] = blob;
  }
  return in;
}

void Replica::gather_in_place() {
  Inputs& in = *train_.inputs;
  in.gather_codes.resize(embeddings_.size());
  for (std::size_t i = 0; i < embeddings_.size(); ++i) {
    const embedding::SparseEmbedding& e = *embeddings_[i];
    const network::Blob* blob = in.embeddings[i].get();
    if (!e.gathers() || e.config().value_dtype != blob->dtype()) continue;
    // The blob's one reader must be an interaction that reads it as its embeddings: any other
    // reader needs the pooled vectors.
    network::InteractionLayer* reader = nullptr;
    int reads = 0;
    for (const network::LayerPtr& layer : train_.network->layers()) {
      const auto& bottoms = layer->bottoms();
      for (std::size_t k = 0; k < bottoms.size(); ++k) {
        if (bottoms[k].get() != blob) continue;
        ++reads;
        if (k == 1) reader = dynamic_cast<network::InteractionLayer*>(layer.get());
      }
    }
    if (reads != 1 || reader == nullptr || !reader->can_gather()) continue;
    in.gather_codes[i] = Tensor::empty({in.rows * e.config().slot_num}, DType::I32, place_);
    reader->gather_embeddings(RowGather{e.table_data(), in.gather_codes[i].data<std::int32_t>()});
    log_once(cat("embedding_gather ", e.config().name), spdlog::level::info,
             cat("embedding '", e.config().name, "': layer '", reader->name(),
                 "' reads its rows in place in training (solver embedding_gather)"));
  }
}

std::vector<std::string> Replica::gathered_embeddings() const {
  std::vector<std::string> names;
  const auto& codes = train_.inputs->gather_codes;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i].defined()) names.push_back(config_.embeddings[i].name);
  }
  return names;
}

StreamHandle Replica::stream() const {
  return place_.is_cuda() ? current_stream(place_.device()) : nullptr;
}

void Replica::initialize_dense(std::uint64_t seed) {
  store_->initialize(seed);
}

namespace {
// The CSR with empty rows appended up to `rows`: a batch that does not divide over the ranks is
// padded to equal blocks, the shares the input pipeline hands out (see data/batch.hpp).
CsrTensor pad_rows(const CsrTensor& csr, std::int64_t rows, StreamHandle stream) {
  if (csr.rows() == rows) return csr;
  Tensor offsets = Tensor::empty({rows + 1}, DType::I64, csr.place());
  ops::copy(offsets.slice(0, 0, csr.rows() + 1), csr.row_offsets(), stream);
  ops::fill(offsets.slice(0, csr.rows() + 1, rows + 1), static_cast<double>(csr.nnz()), stream);
  return CsrTensor(offsets, csr.value_buffer(), csr.nnz());
}

// Copies `src` ([n, ...]) into the first n rows of `dst` and zeroes the rest, converting dtype.
void fill_rows(const Tensor& dst, const Tensor& src, std::int64_t n, StreamHandle stream) {
  if (n > 0) ops::copy(dst.slice(0, 0, n), src, stream);
  if (n < dst.size(0)) ops::fill(dst.slice(0, n, dst.size(0)), 0.0, stream);
}
}  // namespace

void Replica::feed(Inputs& in, const data::DeviceBatch& batch, bool training, StreamHandle s) {
  feed_embeddings(in, batch, training, s);
  if (training) begin_part(kDataPart);
  feed_data(in, batch, s);
}

void Replica::feed_embeddings(Inputs& in, const data::DeviceBatch& batch, bool training,
                              StreamHandle s) {
  const std::int64_t n = batch.local_size;
  EMBER_CHECK(n <= in.rows, "rank ", rank(), ": a batch share of ", n, " samples exceeds the ",
              in.rows, " rows the network was built for");
  EMBER_CHECK(!training || n == in.rows, "rank ", rank(), ": training batches must be full (",
              in.rows, " samples per rank), got ", n);
  const std::int64_t ranks = comm_->size(), block = (batch.global_size + ranks - 1) / ranks;
  EMBER_CHECK(batch.local_offset == std::min(batch.global_size, rank() * block), "rank ", rank(),
              ": the batch share starts at sample ", batch.local_offset,
              ", not at the equal-block offset ", rank() * block);
  // The embeddings queue their work on the current stream.
  std::optional<StreamGuard> on_stream;
  if (s != stream()) on_stream.emplace(place_.device(), s);
  if (training) begin_part("embedding forward");
  for (std::size_t i = 0; i < embeddings_.size(); ++i) {
    const std::int64_t slots = config_.embeddings[i].slot_num;
    const CsrTensor keys = pad_rows(batch.sparse.at(embedding_input_[i]), block * ranks * slots, s);
    const Tensor& dst = in.embeddings[i]->value();
    if (training && i < in.gather_codes.size() && in.gather_codes[i].defined()) {
      // Training batches are full (checked above): one code per bag of the block.
      embeddings_[i]->forward_gather(keys, rank() * block, block, in.gather_codes[i], dst, true);
    } else if (block <= dst.size(0)) {
      // Pooled straight into the network's input, in its dtype (no f32 copy and cast); the
      // padding samples' rows and the rows past the batch read zeros.
      embeddings_[i]->forward_into(keys, rank() * block, block, dst.slice(0, 0, block), training);
      if (n < dst.size(0)) ops::fill(dst.slice(0, n, dst.size(0)), 0.0, s);
    } else {
      const Tensor out = embeddings_[i]->forward(keys, rank() * block, block, training);
      fill_rows(dst, out.slice(0, 0, n), n, s);
    }
  }
}

void Replica::feed_data(Inputs& in, const data::DeviceBatch& batch, StreamHandle s) {
  const std::int64_t n = batch.local_size;
  fill_rows(in.label->value(), batch.label, n, s);
  if (in.dense) fill_rows(in.dense->value(), batch.dense, n, s);
}

void Replica::prefetch(const data::DeviceBatch& batch, bool forward_next) {
  const std::int64_t ranks = comm_->size(), block = (batch.global_size + ranks - 1) / ranks;
  for (std::size_t i = 0; i < embeddings_.size(); ++i) {
    if (!embeddings_[i]->prepares_ahead()) continue;
    if (!forward_next && embeddings_[i]->inserts_ahead()) continue;
    // Training batches are full: the CSR needs no padding, so the forward sees these tensors.
    const CsrTensor& keys = batch.sparse.at(embedding_input_[i]);
    if (keys.rows() != block * ranks * config_.embeddings[i].slot_num) continue;
    embeddings_[i]->prefetch(keys, rank() * block, block, batch.ready.get());
  }
}

void Replica::gather_keys(data::DeviceBatch& batch) {
  if (!batch.keys_from_ranks) return;
  const std::int64_t ranks = comm_->size();
  // The stream the step's lookups will read the keys on (a profiled step's one stream, where
  // the gather is timed as a part of it).
  const StreamHandle s = overlap_ && parts_ == nullptr ? overlap_->stream.handle() : stream();
  batch.wait(s);  // this process's keys copied
  for (std::size_t i = 0; i < batch.sparse.size(); ++i) {
    const Tensor& keys = batch.sparse[i].values();
    // One-hot rows in equal blocks of samples: rank r's keys are the r-th block of the keys.
    if (keys.numel() % ranks != 0) {
      EMBER_THROW("rank ", rank(), ": batch ", batch.sequence, "'s sparse input ", i, " has ",
                  keys.numel(), " keys, not ", ranks, " equal blocks for its ranks to gather");
    }
    const std::int64_t block = keys.numel() / ranks;
    comm_->all_gather(keys.slice(0, rank() * block, (rank() + 1) * block), keys, s);
  }
  if (place_.is_cuda()) {
    auto gathered = std::make_shared<Event>(Event::create(place_.device()));
    gathered->record(s);
    batch.ready = std::move(gathered);
  }
  batch.keys_from_ranks = false;
}

bool Replica::prepares_ahead() const {
  for (const auto& e : embeddings_) {
    if (e->prepares_ahead()) return true;
  }
  return false;
}

void Replica::forget_prepared() {
  for (const auto& e : embeddings_)
    e->forget_prepared();
}

void Replica::set_part_timer(PartTimer* timer) {
  parts_ = timer;
  timed_comm_->set_part_timer(timer);
  if (timer == nullptr) train_.network->set_part_timer(nullptr);
}

void Replica::begin_part(std::string_view part) {
  if (parts_ != nullptr) parts_->begin(part, stream());
}

float Replica::train_step(const data::DeviceBatch& batch, bool follows_last_step) {
  const StreamHandle s = stream();
  // A profiled step runs whole on the compute stream, whose parts tile its timeline.
  const StreamHandle side = overlap_ && parts_ == nullptr ? overlap_->stream.handle() : s;
  // A captured dense step is timed whole: events inside a graph would not time its replays.
  if (parts_ != nullptr) train_.network->set_part_timer(dense_graph_ ? nullptr : parts_);
  // With several ranks the embeddings' transfers also get a stream of their own (the same
  // condition: a profiled step keeps them on the one stream its parts tile).
  for (const auto& e : embeddings_)
    e->set_exchange_overlap(side != s);
  if (side != s) {
    // The lookups overwrite inputs the last step's backward read, and read the batch. Right
    // after an overlapped step their stream has already waited for that backward (its
    // gradients, before the embeddings' backward), so the batch's copies are all they need:
    // the last step's dense all-reduce and optimizer, still queued on the compute stream, touch
    // nothing they read or write. Anything else queued there since (an evaluation's lookups, a
    // checkpoint's reads or loads of the rows) is waited for.
    if (follows_last_step && last_step_overlapped_) {
      batch.wait(side);
    } else {
      overlap_->step_start.record(s);
      overlap_->step_start.block(side);
    }
  } else if (batch.ready) {
    // The batch's keys may have been gathered on the embeddings' stream (gather_keys).
    batch.wait(s);
  }
  last_step_overlapped_ = false;
  float lr = 0;
  try {
    feed_embeddings(*train_.inputs, batch, true, side);
    // Recorded on one stream too (a profiled step): the captured graph's wait node reads it.
    if (overlap_) overlap_->embeddings_ready.record(side);
    begin_part(kDataPart);
    feed_data(*train_.inputs, batch, s);
    if (dense_graph_ != nullptr) begin_part("dense forward + backward (CUDA graph)");
    run_dense(s);
    skipped_ = config_.solver.nan_policy == NanPolicy::Skip && !loss_finite_on_every_rank(s);
    lr = skipped_ ? optimizer_->schedule().current() : apply_updates(s, side);
  } catch (...) {
    // Whatever runs after a failed step (a checkpoint, the tables' release) is queued on the
    // compute stream: it waits for the embeddings' work already queued.
    if (side != s) {
      try {
        wait_for_stream(s, side, place_.device());
      } catch (...) {
        // The device's own error reaches the caller through the first exception.
      }
    }
    throw;
  }
  if (parts_ != nullptr) {
    parts_->end(s);
    parts_->count_step();
  }
  last_step_overlapped_ = side != s;
  return lr;
}

float Replica::apply_updates(StreamHandle s, StreamHandle side) {
  if (side != s) overlap_->gradients_ready.block(side);
  {
    std::optional<StreamGuard> on_stream;
    if (side != s) on_stream.emplace(place_.device(), side);
    // Every backward first (all the embeddings' collectives), then every update (each
    // embedding's own rows, so the order between embeddings changes nothing, and no
    // collective): with several ranks the dense all-reduce need not wait for the updates,
    // which then run beside it and the dense optimizer.
    for (std::size_t i = 0; i < embeddings_.size(); ++i) {
      begin_part("embedding backward");
      // A 16-bit gradient goes as it is: the update reads it (one rank) or the exchange widens
      // it.
      embeddings_[i]->backward(train_.inputs->embeddings[i]->grad());
    }
    if (side != s) overlap_->exchanged.record(side);
    for (std::size_t i = 0; i < embeddings_.size(); ++i) {
      begin_part("embedding update");
      embeddings_[i]->update(loss_scaler_);
    }
  }
  if (side != s) overlap_->updated.record(side);
  if (comm_->size() > 1) {
    // One collective at a time, in the same order on every rank: the embeddings' exchanges go
    // first. Timed as the communicator's all-reduce part when profiling (TimedCommunicator).
    if (side != s) overlap_->exchanged.block(s);
    comm_->all_reduce(store_->grads(), distributed::ReduceOp::Sum, s);
  }
  begin_part("dense optimizer");
  const float lr = optimizer_->step(s, loss_scaler_, train_.network->loss().regularizer());
  // The next lookups, an evaluation or a checkpoint (all on the compute stream) see the rows
  // updated.
  if (side != s) overlap_->updated.block(s);
  return lr;
}

std::string Replica::overlap_obstacle() const {
  if (!place_.is_cuda()) return "training runs on the CPU";
  if (!config_.solver.overlap_embedding) return "off in the solver";
  if (config_.solver.nan_policy == NanPolicy::Skip) {
    return "nan_policy \"skip\" decides on the host whether the step's updates apply";
  }
  for (std::size_t i = 0; i < embeddings_.size(); ++i) {
    if (embeddings_[i]->location() == embedding::StorageLocation::Host) {
      return cat("embedding '", config_.embeddings[i].name,
                 "' keeps its table in host memory, whose prefetch and write-back are ordered "
                 "on the compute stream");
    }
  }
  return {};
}

double Replica::last_loss() const {
  return train_.network->loss().read_loss(stream());
}

void Replica::capture_loss() {
  loss_watch_.capture(train_.network->loss().loss(), stream());
}

bool Replica::loss_finite_on_every_rank(StreamHandle s) {
  const bool finite = std::isfinite(train_.network->loss().read_loss(s));
  if (comm_->size() == 1) return finite;
  const Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{finite ? 0 : 1}, place_);
  comm_->all_reduce(bad, distributed::ReduceOp::Max, s);
  if (s != nullptr) synchronize_stream(s);
  return bad.to(Place::host()).to_vector<std::int64_t>()[0] == 0;
}

void Replica::eval_step(const data::DeviceBatch& batch, std::vector<float>& logits,
                        std::vector<float>& labels) {
  const StreamHandle s = stream();
  feed(*eval_.inputs, batch, false, s);
  eval_.network->forward(false, s);
  const std::int64_t n = batch.local_size;
  if (n == 0) return;
  const Tensor out = eval_.network->logits().value().slice(0, 0, n);
  const std::vector<float> host =
      (out.dtype() == DType::F32 ? out : ops::cast(out, DType::F32, s)).to_vector<float>();
  logits.insert(logits.end(), host.begin(), host.end());
  const std::vector<float> y = batch.label.to_vector<float>();
  labels.insert(labels.end(), y.begin(), y.end());
}

std::int64_t Replica::steps() const {
  return optimizer_->steps();
}

void Replica::resume_at(std::int64_t iteration, std::int64_t optimizer_steps) {
  optimizer_->schedule().set_step(optimizer_steps);
  // A skipped batch still ran its forward: the dropout masks count iterations.
  for (const auto& layer : train_.network->layers()) {
    if (auto* dropout = dynamic_cast<network::DropoutLayer*>(layer.get())) {
      dropout->set_steps(static_cast<std::uint64_t>(iteration));
    }
  }
}

// ---- persistence ------------------------------------------------------------------------------

void Replica::write_dense(const fs::path& dir, bool with_states) {
  const auto& params = store_->parameters();
  auto write_file = [&](const char* name, auto&& each) {
    const fs::path path = dir / name;
    std::ofstream out(path, std::ios::binary);
    if (!out) EMBER_THROW_AS(DataError, "cannot create ", path.string());
    each(out, path);
    out.flush();
    if (!out) EMBER_THROW_AS(DataError, "cannot write ", path.string(), " (disk full?)");
  };
  write_file("dense.model", [&](std::ofstream& out, const fs::path& path) {
    for (const auto& p : params) {
      if (p->trainable()) write_raw(out, p->value(), path);
    }
  });
  write_file("dense.non_trainable", [&](std::ofstream& out, const fs::path& path) {
    for (const auto& p : params) {
      if (!p->trainable()) write_raw(out, p->value(), path);
    }
  });
  if (with_states && optimizer_->state_count() > 0) {
    write_file("dense_opt_states.model", [&](std::ofstream& out, const fs::path& path) {
      for (int slot = 0; slot < optimizer_->state_count(); ++slot) {
        const Tensor& state = optimizer_->state(slot);
        for (const auto& p : params) {
          if (!p->trainable()) continue;
          write_raw(out, state.slice(0, p->block_offset(), p->block_offset() + p->numel()), path);
        }
      }
    });
  }
}

std::uint64_t Replica::trainable_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& p : store_->parameters()) {
    if (p->trainable()) bytes += static_cast<std::uint64_t>(p->numel()) * 4;
  }
  return bytes;
}

void Replica::read_dense_states(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) EMBER_THROW_AS(DataError, "cannot open ", path.string());
  for (int slot = 0; slot < optimizer_->state_count(); ++slot) {
    const Tensor& state = optimizer_->state(slot);
    for (const auto& p : store_->parameters()) {
      if (p->trainable()) {
        read_raw(in, state.slice(0, p->block_offset(), p->block_offset() + p->numel()), path);
      }
    }
  }
}

void Replica::read_dense(const fs::path& dir, bool with_states) {
  const auto& params = store_->parameters();
  const int slots = with_states ? optimizer_->state_count() : 0;
  const fs::path model = dir / "dense.model", buffers = dir / "dense.non_trainable",
                 states = dir / "dense_opt_states.model";
  const std::uint64_t weight_bytes = trainable_bytes();
  std::uint64_t buffer_bytes = 0;
  for (const auto& p : params) {
    if (!p->trainable()) buffer_bytes += static_cast<std::uint64_t>(p->numel()) * 4;
  }
  // Every size is checked before anything is read, so a file of another model changes nothing.
  auto check_size = [](const fs::path& path, std::uint64_t need) {
    const auto size = fs::exists(path) ? static_cast<std::uint64_t>(fs::file_size(path)) : 0;
    if (size != need) {
      EMBER_THROW_AS(DataError, path.string(), " has ", size, " bytes but this model needs ", need,
                     " (a different model configuration?)");
    }
  };
  check_size(model, weight_bytes);
  if (fs::exists(buffers)) check_size(buffers, buffer_bytes);
  const bool read_states = slots > 0 && fs::exists(states);
  if (read_states) check_size(states, weight_bytes * static_cast<std::uint64_t>(slots));
  auto read_file = [](const fs::path& path, auto&& each) {
    std::ifstream in(path, std::ios::binary);
    if (!in) EMBER_THROW_AS(DataError, "cannot open ", path.string());
    each(in, path);
  };
  read_file(model, [&](std::ifstream& in, const fs::path& path) {
    for (const auto& p : params) {
      if (p->trainable()) read_raw(in, p->value(), path);
    }
  });
  if (fs::exists(buffers)) {
    read_file(buffers, [&](std::ifstream& in, const fs::path& path) {
      for (const auto& p : params) {
        if (!p->trainable()) read_raw(in, p->value(), path);
      }
    });
  }
  store_->sync_compute_copy(stream());
  if (read_states) read_dense_states(states);
}

Replica::Saved Replica::save(const fs::path& dir, bool with_optimizer_states) {
  Saved saved;
  for (auto& e : embeddings_)
    saved.rows.push_back(e->save(dir / "sparse" / e->config().name, with_optimizer_states));
  if (rank() == 0) {
    try {
      write_dense(dir, with_optimizer_states);
    } catch (const std::exception& e) {
      saved.failure = e.what();
    }
  }
  comm_->barrier();
  return saved;
}

std::vector<CheckpointFile> Replica::hash_own_shards(const fs::path& dir) const {
  std::vector<CheckpointFile> files;
  if (ranks() == 1) return files;
  for (const auto& e : embeddings_) {
    for (CheckpointFile& f :
         hash_files_under(dir, fs::path("sparse") / e->config().name / cat("rank_", rank())))
      files.push_back(std::move(f));
  }
  return files;
}

void Replica::load(const fs::path& dir, bool with_optimizer_states) {
  read_dense(dir, with_optimizer_states);
  for (auto& e : embeddings_) {
    const fs::path sub = dir / "sparse" / e->config().name;
    if (!fs::is_directory(sub)) {
      EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), " has no sparse model for embedding '",
                     e->config().name, "' (expected ", sub.string(), ")");
    }
    e->load(sub);
  }
}

void Replica::load_model_files(const SolverConfig& solver) {
  if (!solver.dense_model_file.empty()) {
    const fs::path path(solver.dense_model_file);
    const std::uint64_t need = trainable_bytes();
    const auto size = fs::exists(path) ? static_cast<std::uint64_t>(fs::file_size(path)) : 0;
    if (size != need) {
      EMBER_THROW_AS(DataError, "solver.dense_model_file ", path.string(), " has ", size,
                     " bytes; this model's dense weights need ", need);
    }
    std::ifstream in(path, std::ios::binary);
    for (const auto& p : store_->parameters()) {
      if (p->trainable()) read_raw(in, p->value(), path);
    }
    store_->sync_compute_copy(stream());
  }
  if (!solver.dense_opt_states_file.empty()) load_dense_opt_states(solver.dense_opt_states_file);
  const auto& models = solver.sparse_model_files;
  const auto& states = solver.sparse_opt_states_files;
  if (!states.empty() && models.empty()) {
    EMBER_THROW_AS(ConfigError,
                   "solver.sparse_opt_states_file needs solver.sparse_model_file: the states are "
                   "rows of a saved embedding's keys");
  }
  for (const auto* list : {&models, &states}) {
    if (!list->empty() && list->size() != embeddings_.size()) {
      EMBER_THROW_AS(ConfigError, "solver.",
                     list == &models ? "sparse_model_file" : "sparse_opt_states_file", " lists ",
                     list->size(), " entries but the configuration has ", embeddings_.size(),
                     " embedding(s)");
    }
  }
  for (std::size_t i = 0; i < models.size(); ++i) {
    load_sparse_model(i, models[i], states.empty() ? fs::path() : fs::path(states[i]));
  }
}

void Replica::load_dense_opt_states(const fs::path& path) {
  const int slots = optimizer_->state_count();
  if (slots == 0) {
    log_once("dense_opt_states_file", spdlog::level::warn,
             cat("solver.dense_opt_states_file ", path.string(), ": the ",
                 optim::optimizer_name(config_.optimizer.type),
                 " optimizer keeps no state; nothing is loaded"));
    return;
  }
  const std::uint64_t need = trainable_bytes() * static_cast<std::uint64_t>(slots);
  const auto size = fs::is_regular_file(path) ? static_cast<std::uint64_t>(fs::file_size(path)) : 0;
  if (!fs::is_regular_file(path) || size != need) {
    EMBER_THROW_AS(
        DataError, "solver.dense_opt_states_file ", path.string(),
        fs::is_regular_file(path) ? cat(" has ", size, " bytes") : std::string(" is not a file"),
        "; this model's ", slots, " optimizer state slot(s) need ", need, " bytes");
  }
  read_dense_states(path);
}

namespace {

std::uint64_t size_or_zero(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<std::uint64_t>(size);
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  if (size_or_zero(a) != size_or_zero(b)) return false;
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  return std::equal(std::istreambuf_iterator<char>(x), std::istreambuf_iterator<char>(),
                    std::istreambuf_iterator<char>(y), std::istreambuf_iterator<char>());
}

}  // namespace

// A saved embedding (Ember's layout, docs/embedding.md) and, optionally, a directory of its
// optimizer state files whose rows are the model's keys in order (shard by shard, for a save of
// several ranks). The embedding reads one directory, so the two are joined in a directory of
// links, one per rank.
void Replica::load_sparse_model(std::size_t i, const fs::path& model, const fs::path& states) {
  embedding::SparseEmbedding& e = *embeddings_[i];
  if (states.empty()) {
    e.load(model);
    return;
  }
  const std::string what = cat("solver.sparse_opt_states_file[", i, "] ", states.string());
  const auto names = e.state_names();
  if (names.empty()) {
    log_once(cat("sparse_opt_states_file", i), spdlog::level::warn,
             cat(what, ": embedding '", e.config().name, "' uses ",
                 optim::optimizer_name(e.optimizer().type),
                 ", which keeps no state; nothing is loaded from it"));
    e.load(model);
    return;
  }
  if (!fs::is_directory(states)) {
    EMBER_THROW_AS(DataError, what,
                   " is not a directory (it holds the state files of the embedding's optimizer)");
  }
  const fs::path view = fs::temp_directory_path() /
                        cat("ember-sparse-", ::getpid(), "-", rank(), "-", e.config().name);
  fs::remove_all(view);
  fs::create_directories(view);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{view};
  // A save of one rank is one file set; a save of several, one per shard rank_<r>/ (the states
  // sharded the same way).
  std::vector<fs::path> sets;
  if (fs::exists(model / "keys")) {
    sets.emplace_back();
  } else {
    for (int r = 0; fs::is_directory(model / cat("rank_", r)); ++r)
      sets.emplace_back(cat("rank_", r));
    if (sets.empty()) {
      e.load(model);  // no saved embedding there: its error names the model's files
      return;
    }
  }
  for (const fs::path& set : sets) {
    const fs::path from = model / set, with = states / set, into = view / set;
    if (!fs::is_directory(with)) {
      EMBER_THROW_AS(DataError, what, ": no shard ", set.string(), " (the model ", model.string(),
                     " is saved in shards; the states must be saved the same way)");
    }
    if (fs::exists(with / "keys") && !same_bytes(with / "keys", from / "keys")) {
      EMBER_THROW_AS(DataError, what, ": its keys differ from ", (from / "keys").string(),
                     "; the states must come from the same save as the model");
    }
    const std::uint64_t rows_bytes = size_or_zero(from / "vectors");
    for (const std::string& name : names) {
      if (!fs::is_regular_file(with / name)) {
        std::string all;
        for (const std::string& n : names)
          all += (all.empty() ? "'" : ", '") + n + "'";
        EMBER_THROW_AS(DataError, what, ": no '", (set / name).string(), "' file (",
                       optim::optimizer_name(e.optimizer().type), " keeps its state in ", all, ")");
      }
      if (size_or_zero(with / name) != rows_bytes) {
        EMBER_THROW_AS(DataError, what, ": ", (set / name).string(), " has ",
                       size_or_zero(with / name), " bytes but the model's vectors have ",
                       rows_bytes, " (one state row per saved key)");
      }
    }
    fs::create_directories(into);
    for (const char* name : {"keys", "vectors", "slot_ids"}) {
      if (fs::exists(from / name)) fs::create_symlink(fs::absolute(from / name), into / name);
    }
    for (const std::string& name : names)
      fs::create_symlink(fs::absolute(with / name), into / name);
    const fs::path step =
        fs::exists(with / "optimizer_step") ? with / "optimizer_step" : from / "optimizer_step";
    if (fs::exists(step)) fs::create_symlink(fs::absolute(step), into / "optimizer_step");
  }
  e.load(view);
}

}  // namespace ember::train
