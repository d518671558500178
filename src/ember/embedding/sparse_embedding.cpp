#include "ember/embedding/sparse_embedding.hpp"

#include <algorithm>
#include <climits>
#include <functional>
#include <numeric>

#include "ember/core/allocator.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/batch_vectors.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding_batch.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

namespace {

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

bool is_vector_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

}  // namespace

SparseEmbedding::SparseEmbedding(EmbeddingConfig config, const optim::OptimizerConfig& optimizer,
                                 distributed::Communicator& comm)
    : config_(std::move(config)),
      optimizer_(config_.optimizer.value_or(optimizer)),
      comm_(comm),
      place_(comm.place()) {
  config_.validate();
  ember::optim::validate(optimizer_, where() + ".optimizer");
  EMBER_CHECK(place_.is_host() || place_.is_cuda(), where(),
              ": ranks live on the host or a "
              "CUDA device, not ",
              place_);
  PlaceGuard guard(place_);
  schedule_ = optim::LearningRateSchedule(optimizer_.schedule);
  const int D = comm_.size(), r = comm_.rank();
  const std::int64_t S = config_.slot_num, V = config_.vec_size;
  if (is_localized(config_.type)) {
    for (std::int64_t s = r; s < S; s += D)
      owned_slots_.push_back(s);
    owned_slots_dev_ = Tensor::from_vector(
        owned_slots_.empty() ? std::vector<std::int64_t>{0} : owned_slots_, place_);
  }
  capacity_ = rank_capacity();
  // Where the rows go is decided before anything is allocated, so that a table that fits
  // nowhere fails at once, with its numbers.
  const StorageDecision storage = decide_location();
  if (config_.type == EmbeddingType::Hybrid && storage.location == StorageLocation::Host) {
    EMBER_THROW_AS(OutOfMemoryError, where(),
                   ": the rank's table does not fit on the device, and HybridSparseEmbedding "
                   "keeps its tables there (no host storage): ",
                   storage.log_line);
  }
  // The allocators know the bytes, not whose they are: a table that does not fit is named.
  const auto table_does_not_fit = [&](const std::string& why, const std::string& at) {
    const int states = optimizer_.state_count();
    return OutOfMemoryError(
        cat(where(), ": the rank's table (", capacity_, " rows x ", V, " ",
            dtype_name(config_.value_dtype), " values",
            states > 0 ? cat(", and ", states, " f32 optimizer state(s) as large") : "",
            ") does not fit on ", place_, ": ", why),
        at);
  };
  try {
    if (is_onehot(config_.type)) {
      build_onehot_geometry();
    } else {
      table_ = std::make_unique<HashTable>(
          config_.key_dtype, capacity_, place_, 0, where(),
          "raise workspace_size_per_gpu_in_mb or max_vocabulary_size_per_gpu in its "
          "sparse_embedding_hparam");
    }
    if (storage.location == StorageLocation::Host) make_host_rows(storage);
    if (!host_rows_) {
      try {
        values_ = Tensor::empty({capacity_, V}, config_.value_dtype, place_);
        for (int k = 0; k < optimizer_.state_count(); ++k) {
          Tensor st = Tensor::full({capacity_, V}, optimizer_.initial_state(k), DType::F32, place_);
          (k == 0 ? state0_ : state1_) = st;
        }
        if (optimizer_.update_type != optim::UpdateType::Local) {
          last_step_ = Tensor::zeros({capacity_}, DType::I64, place_);
        }
      } catch (const OutOfMemoryError& e) {
        throw table_does_not_fit(e.what(), e.where());
      }
    }
  } catch (const std::bad_alloc&) {
    // Host vectors of the table's keys (the one-hot layer's geometry) or rows.
    throw table_does_not_fit("out of host memory (std::bad_alloc)", "");
  }
  if (config_.type == EmbeddingType::LocalizedSlotHash) {
    row_slot_ = Tensor::full({capacity_}, -1, DType::I64, place_);
  }
  if (is_onehot(config_.type) && capacity_ > 0 && !host_rows_) {
    dispatch_key(config_.key_dtype, "embedding keys", [&](auto tag) {
      using Key = typename decltype(tag)::type;
      kernels::on(place_).keys<Key>().init_rows(table_values(), V, 0, capacity_,
                                                onehot_keys_.data<Key>(), config_.seed,
                                                config_.init_bound, stream());
    });
  }
  // With no frequent category the hybrid layer is the one-hot layer (the same rows, the same
  // results), and runs its code: the hybrid's machinery would only add an exchange with itself.
  if (config_.type == EmbeddingType::Hybrid && !config_.hybrid.frequent_keys.empty()) {
    make_hybrid();
  }
}

std::int64_t SparseEmbedding::rank_capacity() const {
  std::int64_t owned_vocabulary = 0;
  for (std::int64_t s : owned_slots_) {
    if (!config_.slot_size_array.empty()) owned_vocabulary += config_.slot_size_array[s];
  }
  switch (config_.type) {
    case EmbeddingType::DistributedSlotHash:
      return config_.configured_capacity();
    case EmbeddingType::LocalizedSlotHash:
      return config_.slot_size_array.empty() ? config_.configured_capacity()
                                             : std::max<std::int64_t>(1, owned_vocabulary);
    case EmbeddingType::LocalizedSlotOneHot:
    case EmbeddingType::Hybrid:
      return owned_vocabulary;
  }
  return 0;
}

std::vector<std::int64_t> SparseEmbedding::slot_begin() const {
  std::vector<std::int64_t> begin(config_.slot_num + 1, 0);
  for (std::int64_t s = 0; s < static_cast<std::int64_t>(config_.slot_size_array.size()); ++s)
    begin[s + 1] = begin[s] + config_.slot_size_array[s];
  return begin;
}

void SparseEmbedding::build_onehot_geometry() {
  const std::vector<std::int64_t> slot_begin = this->slot_begin();
  std::vector<std::int64_t> begin, size, base, keys;
  // One allocation of every owned row's key: a table too large fails here at once, before a
  // single key is written.
  keys.reserve(static_cast<std::size_t>(capacity_));
  std::int64_t next = 0;
  for (std::int64_t s : owned_slots_) {
    begin.push_back(slot_begin[s]);
    size.push_back(config_.slot_size_array[s]);
    base.push_back(next);
    next += config_.slot_size_array[s];
    for (std::int64_t k = 0; k < config_.slot_size_array[s]; ++k)
      keys.push_back(slot_begin[s] + k);
  }
  auto upload = [&](std::vector<std::int64_t> v) {
    if (v.empty()) v.push_back(0);
    return Tensor::from_vector(v, place_);
  };
  onehot_begin_ = upload(begin);
  onehot_size_ = upload(size);
  onehot_base_ = upload(base);
  onehot_keys_ = Tensor::from_vector(keys, Place::host()).to(config_.key_dtype).to(place_);
  onehot_host_keys_ = std::move(keys);
}

SparseEmbedding::~SparseEmbedding() {
  // Batches give their buffer sets back as they go: before the sets do.
  try {
    PlaceGuard guard(place_);
    prepared_.reset();
    batch_.reset();
  } catch (...) {  // a destructor must not throw
  }
}

std::string SparseEmbedding::where() const {
  return cat("embedding layer '", config_.name, "' (rank ", comm_.rank(), " of ", comm_.size(),
             ")");
}

StreamHandle SparseEmbedding::stream() const {
  return place_.is_cuda() ? current_stream(place_.device()) : nullptr;
}

std::int64_t SparseEmbedding::rows_in_use() const {
  if (host_rows_) {
    if (table_) table_->check();
    return host_rows_->directory().materialized();
  }
  return table_ ? table_->size() : capacity_;
}

std::vector<std::string> SparseEmbedding::state_names() const {
  switch (optimizer_.type) {
    case optim::OptimizerType::SGD:
      return {};
    case optim::OptimizerType::MomentumSGD:
    case optim::OptimizerType::Nesterov:
      return {"momentum"};
    case optim::OptimizerType::Adam:
      return {"adam_m", "adam_v"};
    case optim::OptimizerType::AdaGrad:
      return {"adagrad_accumulator"};
    case optim::OptimizerType::RMSProp:
      return {"rmsprop_mean_square"};
    case optim::OptimizerType::Ftrl:
      return {"ftrl_n", "ftrl_z"};
  }
  return {};
}

Tensor SparseEmbedding::scratch(const std::string& name, std::int64_t numel, DType dtype,
                                StreamHandle user) {
  Tensor& t = scratch_[name];
  if (!t.defined() || t.dtype() != dtype || t.numel() < std::max<std::int64_t>(numel, 1)) {
    const StreamHandle own = stream();
    const bool elsewhere = user != nullptr && user != own;
    // The old block goes back to the current stream's pool, which reuses it at once: not
    // before the work `user` has queued with it is done.
    if (elsewhere && t.defined()) default_allocator(place_).record_use(t.data(), user);
    t = Tensor::empty({std::max<std::int64_t>(numel, 1) + numel / 4}, dtype, place_);
    // The new block may be one the current stream's queued kernels still use (freed on the
    // host already): `user` must not write it before they are done.
    if (elsewhere) wait_for_stream(user, own, place_.device());
  }
  return t.slice(0, 0, numel);
}

void SparseEmbedding::check_batch(const CsrTensor& batch, std::int64_t local_offset,
                                  std::int64_t local_size, std::int64_t* global_batch) const {
  EMBER_CHECK(batch.defined(), where(), ": forward got an empty batch");
  EMBER_CHECK(batch.place() == place_, where(), ": the batch is on ", batch.place(),
              " but this rank works on ", place_);
  EMBER_CHECK(batch.dtype() == config_.key_dtype, where(), ": the batch has ",
              dtype_name(batch.dtype()), " keys but the layer expects ",
              dtype_name(config_.key_dtype), " (solver input_key_type)");
  const std::int64_t S = config_.slot_num, D = comm_.size();
  EMBER_CHECK(batch.rows() % S == 0, where(), ": the batch has ", batch.rows(),
              " CSR rows, not a multiple of slot_num ", S);
  const std::int64_t B = batch.rows() / S;
  EMBER_CHECK(B % D == 0, where(), ": the global batch of ", B,
              " samples does not split evenly over ", D, " ranks");
  EMBER_CHECK(local_size == B / D && local_offset == comm_.rank() * (B / D), where(),
              ": this rank's samples must be [", comm_.rank() * (B / D), ", ",
              (comm_.rank() + 1) * (B / D), ") of the global batch of ", B, ", got [", local_offset,
              ", ", local_offset + local_size, ")");
  if (config_.max_feature_num_per_sample > 0) {
    EMBER_CHECK(batch.nnz() <= B * config_.max_feature_num_per_sample, where(), ": the batch has ",
                batch.nnz(), " keys for ", B, " samples, more than max_feature_num_per_sample ",
                config_.max_feature_num_per_sample, " each");
  }
  *global_batch = B;
}

Tensor SparseEmbedding::forward(const CsrTensor& batch, std::int64_t local_offset,
                                std::int64_t local_size, bool training) {
  PlaceGuard guard(place_);
  check_deferred_errors();
  std::int64_t B = 0;
  check_batch(batch, local_offset, local_size, &B);  // before local_size sizes anything
  Tensor out = Tensor::empty({local_size, config_.slot_num, config_.vec_size}, DType::F32, place_);
  run_forward(take_batch(batch, local_offset, local_size, training), training, out);
  return out;
}

std::unique_ptr<SparseEmbedding::Batch> SparseEmbedding::take_batch(const CsrTensor& batch,
                                                                    std::int64_t local_offset,
                                                                    std::int64_t local_size,
                                                                    bool training) {
  std::unique_ptr<Batch> b = host_rows_
                                 ? take_cached_batch(batch, local_offset, local_size, training)
                                 : take_prepared(batch, local_offset, local_size, training);
  if (!b) {
    const std::string tag = training ? "train/" : "eval/";
    b = hybrid_
            ? prepare_hybrid(batch, local_offset, local_size, training, stream(), tag, forward_bad_)
            : prepare_batch(batch, local_offset, local_size, training, stream(), tag, true,
                            forward_bad_);
    if (training && inserts_ahead() && place_.is_cuda()) {
      if (!forward_inserted_) forward_inserted_ = Event::create(place_.device());
      forward_inserted_.record(stream());
    }
  }
  // Its data errors are read by the next call, when the device has found them.
  if (b->errors != nullptr && place_.is_cuda()) bad_pending_ = b->errors;
  return b;
}

void SparseEmbedding::forward_into(const CsrTensor& batch, std::int64_t local_offset,
                                   std::int64_t local_size, const Tensor& out, bool training) {
  PlaceGuard guard(place_);
  check_deferred_errors();
  check_output(out, local_size);
  run_forward(take_batch(batch, local_offset, local_size, training), training, out);
}

bool SparseEmbedding::gathers() const {
  return comm_.size() == 1 && !hybrid_ && !host_rows_ && values_.defined() &&
         capacity_ < INT32_MAX - 1;
}

const void* SparseEmbedding::table_data() const {
  return values_.defined() ? values_.data() : nullptr;
}

void SparseEmbedding::forward_gather(const CsrTensor& batch, std::int64_t local_offset,
                                     std::int64_t local_size, const Tensor& codes,
                                     const Tensor& out, bool training) {
  PlaceGuard guard(place_);
  EMBER_CHECK(gathers(), where(), ": its rows cannot be read in place (",
              comm_.size() > 1 ? cat(comm_.size(), " ranks")
              : hybrid_        ? std::string("the hybrid layer")
              : host_rows_     ? std::string("a table in host memory")
                               : cat(capacity_, " rows, 2^31 - 1 or more"),
              ")");
  check_deferred_errors();
  check_output(out, local_size);
  EMBER_CHECK(codes.defined() && codes.dtype() == DType::I32 && codes.is_contiguous() &&
                  codes.numel() == local_size * config_.slot_num,
              where(), ": the gather codes must be ", local_size * config_.slot_num,
              " contiguous i32 values, got ", codes);
  codes.check_place(place_, "embedding gather codes");
  finish_forward(take_batch(batch, local_offset, local_size, training), training, out, &codes);
}

void SparseEmbedding::run_forward(std::unique_ptr<Batch> b, bool training, const Tensor& out) {
  if (hybrid_) {
    finish_hybrid_forward(std::move(b), training, out);
  } else {
    finish_forward(std::move(b), training, out);
  }
}

void SparseEmbedding::check_output(const Tensor& out, std::int64_t local_size) const {
  EMBER_CHECK(out.defined(), where(), ": forward_into got no output tensor");
  EMBER_CHECK(is_vector_dtype(out.dtype()), where(), ": the forward output must be f32, f16 or ",
              "bf16, got ", dtype_name(out.dtype()));
  out.check_place(place_, "embedding forward output");
  out.check_shape(Shape{local_size, config_.slot_num, config_.vec_size},
                  "embedding forward output ([local_size, slot_num, vec_size])");
  EMBER_CHECK(out.is_contiguous(), where(), ": the forward output must be contiguous");
}

std::unique_ptr<SparseEmbedding::Batch> SparseEmbedding::prepare_batch(
    const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size, bool training,
    StreamHandle stream, const std::string& tag, bool start_rows, ErrorWords& errors) {
  std::int64_t B = 0;
  check_batch(batch, local_offset, local_size, &B);
  const std::int64_t S = config_.slot_num;
  const int D = comm_.size();
  auto b = std::make_unique<Batch>();
  b->global_batch = B;
  b->local_size = local_size;

  kernels::SelectArgs a;
  a.offsets = batch.row_offsets().data<std::int64_t>();
  a.batch = B;
  a.slot_num = S;
  a.ranks = D;
  a.rank = comm_.rank();
  a.sharding =
      is_localized(config_.type) ? kernels::Sharding::Localized : kernels::Sharding::Distributed;
  a.mean = config_.combiner == Combiner::Mean;
  a.owned_slots = ptr<std::int64_t>(owned_slots_dev_);
  a.owned_count = static_cast<std::int64_t>(owned_slots_.size());
  a.nnz = batch.nnz();
  b->bags = a.bags();
  EMBER_CHECK(b->bags < INT32_MAX, where(), ": ", b->bags,
              " (sample, slot) pairs in one batch on one rank exceed 2^31 - 1");
  const std::int64_t nnz = batch.nnz();
  b->local_offsets = scratch(tag + "local_offsets", b->bags + 1, DType::I64, stream);
  b->local_keys = scratch(tag + "local_keys", nnz, config_.key_dtype, stream);
  b->entry_bag = scratch(tag + "entry_bag", nnz, DType::I64, stream);
  b->scale = scratch(tag + "scale", b->bags, DType::F32, stream);
  const Tensor keys = batch.values();
  dispatch_key(config_.key_dtype, "embedding keys", [&](auto t) {
    using Key = typename decltype(t)::type;
    b->entries = kernels::on(place_).keys<Key>().select_local(
        a, keys.data<Key>(), b->local_offsets.data<std::int64_t>(), b->local_keys.data<Key>(),
        b->entry_bag.data<std::int64_t>(), b->scale.data<float>(), stream);
  });
  if (config_.combiner != Combiner::Mean) b->scale = Tensor();  // every factor is 1
  b->rows = scratch(tag + "rows", b->entries, DType::I64, stream);
  lookup(*b, training, stream, start_rows, errors);

  // A host table always needs the distinct rows (to make them resident).
  const bool lazy = optimizer_.update_type == optim::UpdateType::LazyGlobal;
  if (training || lazy || !start_rows) {
    b->sorted_bags = scratch(tag + "sorted_bags", b->entries, DType::I32, stream);
    b->unique_rows = scratch(tag + "unique_rows", b->entries, DType::I64, stream);
    b->segment_offsets = scratch(tag + "segment_offsets", b->entries + 1, DType::I64, stream);
    b->unique_count = scratch(tag + "unique_count", 1, DType::I64, stream);
    kernels::on(place_).segments(
        b->rows.data<std::int64_t>(), b->entry_bag.data<std::int64_t>(), b->entries, capacity_,
        b->sorted_bags.data<std::int32_t>(), b->unique_rows.data<std::int64_t>(),
        b->segment_offsets.data<std::int64_t>(), b->unique_count.data<std::int64_t>(), stream);
  }
  return b;
}

void SparseEmbedding::finish_forward(std::unique_ptr<Batch> b, bool training, const Tensor& out,
                                     const Tensor* codes) {
  const std::int64_t V = config_.vec_size;
  const int D = comm_.size();
  const std::string tag = training ? "train/" : "eval/";
  const bool lazy = optimizer_.update_type == optim::UpdateType::LazyGlobal;
  if (lazy && b->entries > 0) {
    const kernels::LazyParams lp = lazy_params(step_);
    kernels::on(place_).catch_up_rows(b->unique_rows.data<std::int64_t>(), b->entries,
                                      b->unique_count.data<std::int64_t>(), table_values(), V,
                                      row_states(), step_, lp, stream());
  }
  if (codes != nullptr) {
    // One rank: the reader reads the rows in place; only bags of several entries are pooled.
    kernels::on(place_).gather_codes(b->local_offsets.data<std::int64_t>(),
                                     ptr<std::int64_t>(b->rows), b->bag_scale(), b->bags,
                                     table_values(), V, codes->data<std::int32_t>(), out.data(),
                                     vector_type(out.dtype()), stream());
  } else if (D > 1 && is_localized(config_.type)) {
    // Pooled as it is sent: with two ranks the peer's block crosses while the own block is
    // pooled (sparse_embedding_exchange.cpp).
    pool_and_exchange(*b, tag, out);
  } else {
    // One rank pools straight into the output, in its dtype; DistributedSlot pools partial sums
    // for the reduce-scatter, in f32.
    const bool direct = D == 1;
    const Tensor pooled =
        direct ? out : scratch(tag + "pooled", b->bags * V, exchange_dtype(out.dtype(), true));
    if (b->bags > 0) {
      kernels::on(place_).pool(b->local_offsets.data<std::int64_t>(), ptr<std::int64_t>(b->rows),
                               b->bag_scale(), b->bags, b->entries, table_values(), V,
                               pooled.data(), vector_type(pooled.dtype()), stream());
    }
    if (!direct) exchange_forward(pooled, out);
  }
  if (training) batch_ = std::move(b);
}

void SparseEmbedding::lookup(Batch& b, bool training, StreamHandle stream, bool start_rows,
                             ErrorWords& errors) {
  const std::int64_t n = b.entries, V = config_.vec_size;
  if (n == 0) return;
  dispatch_key(config_.key_dtype, "embedding keys", [&](auto t) {
    using Key = typename decltype(t)::type;
    const Tensor keys = b.local_keys.slice(0, 0, n);
    if (is_onehot(config_.type)) {  // a hybrid layer here has no frequent rows
      kernels::OneHotArgs oh;
      oh.begin = onehot_begin_.data<std::int64_t>();
      oh.size = onehot_size_.data<std::int64_t>();
      oh.local_base = onehot_base_.data<std::int64_t>();
      oh.one_key_per_bag = config_.type == EmbeddingType::Hybrid;
      oh.owned_count = static_cast<std::int64_t>(owned_slots_.size());
      make_error_words(errors, stream);
      kernels::on(place_).keys<Key>().onehot_rows(
          oh, keys.data<Key>(), b.entry_bag.data<std::int64_t>(), n, b.rows.data<std::int64_t>(),
          errors.device.data<std::int64_t>(), stream);
      collect_errors(errors, stream);
      b.errors = &errors;
      return;
    }
    if (!training) {
      table_->find(keys, b.rows, stream);
      return;
    }
    // No wait: the new rows' range stays on the device, and a full table or a reserved key is
    // raised by the next check (on the host, at once).
    table_->insert_or_find_async(keys, b.rows, stream);
    if (row_slot_.defined()) {
      kernels::on(place_).record_row_slots(
          row_slot_.data<std::int64_t>(), b.rows.data<std::int64_t>(),
          b.entry_bag.data<std::int64_t>(), n, owned_slots_dev_.data<std::int64_t>(),
          static_cast<std::int64_t>(owned_slots_.size()), table_->new_rows(), stream);
    }
    if (!start_rows) return;
    kernels::RowInit init;
    init.seed = config_.seed;
    init.bound = config_.init_bound;
    init.state0 = optimizer_.initial_state(0);
    init.state1 = optimizer_.initial_state(1);
    init.step = step_;
    kernels::on(place_).keys<Key>().init_new_rows(kernels::NewRows{table_->new_rows(), n},
                                                  table_->reverse_map().data<Key>(), init,
                                                  table_values(), V, row_states(), stream);
  });
}

void SparseEmbedding::throw_onehot_error(std::int64_t key, std::int64_t bag) const {
  const auto owned = static_cast<std::int64_t>(owned_slots_.size());
  const std::int64_t j = bag % owned, s = owned_slots_[j];
  std::int64_t begin = 0;
  for (std::int64_t q = 0; q < s; ++q)
    begin += config_.slot_size_array[q];
  const std::int64_t end = begin + config_.slot_size_array[s];
  const char* late = place_.is_cuda() ? " (found on the GPU in an earlier batch: the step does "
                                        "not wait for the device)"
                                      : "";
  if (key >= begin && key < end) {
    // Inside its slot, so reported as a bag's second key (one_key_per_bag: the hybrid type).
    EMBER_THROW_AS(DataError, where(), ": slot ", s, " of sample ", bag / owned,
                   " has more than one key (the second ", key,
                   "); HybridSparseEmbedding takes one key per slot, as in HugeCTR", late);
  }
  EMBER_THROW_AS(DataError, where(), ": key ", key, " of sample ", bag / owned, " in slot ", s,
                 " is outside the slot's range [", begin, ", ", end,
                 ") (keys carry slot offsets and must lie within slot_size_array)", late);
}

void SparseEmbedding::check_deferred_errors() {
  if (table_) table_->check();
  if (bad_pending_ != nullptr) {
    const ErrorWords& w = *bad_pending_;
    bad_pending_ = nullptr;
    w.copied.synchronize();
    const auto* words = w.host.data<std::int64_t>();
    if (words[0] >= 0) throw_data_error(words);
  }
}

void SparseEmbedding::make_error_words(ErrorWords& w, StreamHandle user) {
  if (w.device.defined()) return;
  w.device = Tensor::empty({3}, DType::I64, place_);
  if (!place_.is_cuda()) return;
  w.host = Tensor::empty({3}, DType::I64, Place::pinned());
  w.copied = Event::create(place_.device());
  // From the current stream's pool, written on `user` (see scratch()).
  const StreamHandle own = current_stream(place_.device());
  if (user != nullptr && user != own) wait_for_stream(user, own, place_.device());
}

void SparseEmbedding::collect_errors(ErrorWords& w, StreamHandle s) {
  if (!place_.is_cuda()) {
    const auto* words = w.device.data<std::int64_t>();
    if (words[0] >= 0) throw_data_error(words);
    return;
  }
  // Read after the batch (check_deferred_errors), so the step does not wait here.
  copy_bytes(w.host.data(), Place::pinned(), w.device.data(), place_, 3 * sizeof(std::int64_t), s);
  w.copied.record(s);
}

void SparseEmbedding::throw_data_error(const std::int64_t* words) const {
  // hybrid_rows' words: the bag, its first key, its key count; onehot_rows': the entry, its key,
  // its bag.
  if (hybrid_) throw_hybrid_error(words[0], words[1], words[2]);
  throw_onehot_error(words[1], words[2]);
}

void SparseEmbedding::ensure_step_values(std::int64_t steps) {
  const bool per_step = optimizer_.type == optim::OptimizerType::Adam ||
                        optimizer_.type == optim::OptimizerType::Ftrl;
  if (!per_step || optimizer_.update_type != optim::UpdateType::LazyGlobal) return;
  const auto have = static_cast<std::int64_t>(step_values_host_.size());
  if (have >= steps && step_values_.defined()) return;
  for (std::int64_t t = have + 1; t <= steps; ++t) {
    const float lr = schedule_.at(t);
    step_values_host_.push_back(optimizer_.type == optim::OptimizerType::Adam
                                    ? optim::make_update_step(optimizer_, lr, t).adam_alpha
                                    : lr);
  }
  std::vector<float> padded = step_values_host_;
  padded.resize(std::max<std::size_t>(1, padded.size() * 2), 0.0f);  // room to grow
  if (!step_values_.defined() || step_values_.numel() < steps) {
    step_values_ = Tensor::from_vector(padded, place_);
  } else {
    step_values_.slice(0, have, steps)
        .copy_from(Tensor::from_vector(
            std::vector<float>(step_values_host_.begin() + have, step_values_host_.end())));
  }
}

kernels::LazyParams SparseEmbedding::lazy_params(std::int64_t steps) {
  kernels::LazyParams lp;
  lp.type = optimizer_.type;
  lp.momentum = optimizer_.momentum_factor;
  lp.beta1 = optimizer_.beta1;
  lp.beta2 = optimizer_.beta2;
  lp.epsilon = optimizer_.epsilon;
  lp.rmsprop_beta = optimizer_.rmsprop_beta;
  lp.ftrl_beta = optimizer_.ftrl_beta;
  lp.lambda1 = optimizer_.lambda1;
  lp.lambda2 = optimizer_.lambda2;
  ensure_step_values(steps);
  lp.step_values = ptr<float>(step_values_);
  return lp;
}

kernels::RowStates SparseEmbedding::row_states() const {
  return kernels::RowStates{ptr<float>(state0_), ptr<float>(state1_),
                            ptr<std::int64_t>(last_step_)};
}

kernels::Values SparseEmbedding::table_values() const {
  kernels::Values v;
  v.data = values_.defined() ? values_.data() : nullptr;
  v.type = config_.value_dtype == DType::F16    ? kernels::ValueType::F16
           : config_.value_dtype == DType::BF16 ? kernels::ValueType::BF16
                                                : kernels::ValueType::F32;
  v.rounding =
      config_.stochastic_rounding ? kernels::Rounding::Stochastic : kernels::Rounding::Nearest;
  v.seed = kernels::rounding_seed(config_.seed);
  return v;
}

void SparseEmbedding::backward(const Tensor& grad) {
  PlaceGuard guard(place_);
  EMBER_CHECK(batch_ != nullptr, where(), ": backward without a training forward before it");
  EMBER_CHECK(grad.defined() && is_vector_dtype(grad.dtype()), where(),
              ": embedding backward takes an f32, f16 or bf16 gradient, got ",
              grad.defined() ? dtype_name(grad.dtype()) : "none");
  grad.check_place(place_, "embedding backward");
  grad.check_shape(Shape{batch_->local_size, config_.slot_num, config_.vec_size},
                   "embedding backward (the forward output's shape)");
  // The update reads a 16-bit gradient as it is (no f32 copy); the exchanges move it as it is
  // where they only move it (exchange_dtype; the hybrid's exchange runs on one rank too).
  const bool read_as_is =
      (comm_.size() == 1 && !hybrid_) || exchange_dtype(grad.dtype(), false) == grad.dtype();
  const Tensor g =
      grad.dtype() == DType::F32 || read_as_is ? grad : ops::cast(grad, DType::F32, stream());
  batch_->grad = hybrid_ ? hybrid_exchange_backward(g) : exchange_backward(g);
}

void SparseEmbedding::update(float loss_scaler) {
  PlaceGuard guard(place_);
  EMBER_CHECK(batch_ != nullptr && batch_->grad.defined(), where(),
              ": update without forward and backward before it");
  const std::int64_t t = step_ + 1;
  const float lr = schedule_.next();
  const optim::UpdateStep u = optim::make_update_step(optimizer_, lr, t, loss_scaler);
  const kernels::RowStates st = row_states();
  const bool lazy = optimizer_.update_type == optim::UpdateType::LazyGlobal;
  const kernels::LazyParams lp = lazy ? lazy_params(t) : kernels::LazyParams{};
  const Batch& b = *batch_;
  if (b.entries > 0) {
    kernels::on(place_).update_rows(b.segments(), b.bag_scale(), b.grad.data(),
                                    vector_type(b.grad.dtype()), table_values(), config_.vec_size,
                                    st, t, u, lazy ? &lp : nullptr, stream());
  }
  if (optimizer_.update_type == optim::UpdateType::Global && host_rows_) {
    // Every cached row moves; rows on the host take their missed steps when they come back
    // (replayed with each step's own update, kept here).
    host_rows_->record_step(t, u, stream());
    kernels::on(place_).update_untouched(host_rows_->directory().high_water(), nullptr,
                                         table_values(), config_.vec_size, st, t, u, stream());
  } else if (optimizer_.update_type == optim::UpdateType::Global) {
    // Rows in use as the device knows them (the table's word; all rows for one-hot), so the
    // step does not wait to learn the count.
    kernels::on(place_).update_untouched(capacity_, table_ ? table_->new_rows() + 1 : nullptr,
                                         table_values(), config_.vec_size, st, t, u, stream());
  }
  if (hybrid_) update_frequent(t, u, lazy ? &lp : nullptr);
  step_ = t;
  batch_.reset();
}

void SparseEmbedding::drop_batch() {
  batch_.reset();
}

void SparseEmbedding::catch_up_all() {
  if (optimizer_.update_type != optim::UpdateType::LazyGlobal) return;
  if (hybrid_) catch_up_frequent();
  if (rows_in_use() == 0) return;
  const kernels::LazyParams lp = lazy_params(step_);
  kernels::on(place_).catch_up_rows(nullptr, rows_in_use(), nullptr, table_values(),
                                    config_.vec_size, row_states(), step_, lp, stream());
}

}  // namespace ember::embedding
