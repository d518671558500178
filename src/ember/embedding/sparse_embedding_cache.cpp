// A sparse embedding whose rows live in host memory with a device cache (the "host" storage
// location): the choice of location, batches prepared ahead and made resident, and bringing
// host rows to the current step. The design and the exactness argument: docs/embedding.md,
// "Tables larger than the GPU".
#include <algorithm>

#include "ember/core/copy.hpp"
#include "ember/core/dtype.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/embedding/sparse_embedding_batch.hpp"

namespace ember::embedding {

RowColumns SparseEmbedding::row_columns() const {
  RowColumns columns;
  columns.value_dtype = config_.value_dtype;
  columns.width = config_.vec_size;
  columns.states = optimizer_.state_count();
  columns.steps = optimizer_.update_type != optim::UpdateType::Local;
  return columns;
}

StorageDecision SparseEmbedding::decide_location() const {
  StorageNeeds needs;
  needs.rows = capacity_;
  needs.row_bytes = static_cast<std::uint64_t>(row_columns().row_bytes());
  const auto rows = static_cast<std::uint64_t>(capacity_);
  if (config_.type == EmbeddingType::Hybrid) {
    // The replicated frequent rows and their index are on the device too.
    const auto frequent = static_cast<std::int64_t>(config_.hybrid.frequent_keys.size());
    needs.rows += frequent;
    needs.index_bytes =
        (rows + static_cast<std::uint64_t>(frequent)) * dtype_size(config_.key_dtype) +
        HashTable::bytes_for(config_.key_dtype, std::max<std::int64_t>(frequent, 1));
  } else if (config_.type == EmbeddingType::LocalizedSlotOneHot) {
    needs.index_bytes = rows * dtype_size(config_.key_dtype);  // the key of each row
  } else {
    needs.index_bytes = HashTable::bytes_for(config_.key_dtype, capacity_);
  }
  if (config_.type == EmbeddingType::LocalizedSlotHash) needs.index_bytes += rows * 8;  // slots
  needs.slot_map_bytes = rows * 4;
  needs.host_sharers = comm_.size();
  MemoryAvailable available;
  available.device_is_host = !place_.is_cuda();
  if (place_.is_cuda()) {
    const DeviceMemoryInfo info = device_memory_info(place_.device());
    available.device_free = info.free_bytes;
    available.device_total = info.total_bytes;
  }
  available.host_available = host_available_bytes();
  return decide_storage(config_.storage, needs, available, where());
}

void SparseEmbedding::make_host_rows(const StorageDecision& d) {
  const StorageConfig& sc = config_.storage;
  const std::int64_t V = config_.vec_size;
  const RowColumns columns = row_columns();
  const bool steps = columns.steps;
  if (!d.log_line.empty() && comm_.rank() == 0) EMBER_LOG_INFO("{}", d.log_line);
  if (columns.value_dtype != DType::F32) {
    // The row moves would carry 16-bit rows, but the replay of missed steps, the new rows'
    // initial values and the streamed save and load of host rows are written for f32 rows.
    EMBER_THROW_AS(ConfigError, where(), ": a host-backed table (storage.location ",
                   storage_location_name(config_.storage.location), ", ", d.cache_rows, " of its ",
                   capacity_, " rows cached on ", place_,
                   ") holds f32 vectors; solver.embedding_dtype ", dtype_name(columns.value_dtype),
                   " needs the whole table on the device (storage.location \"device\")");
  }
  const bool onehot = config_.type == EmbeddingType::LocalizedSlotOneHot;
  host_rows_ = std::make_unique<HostBackedRows>(
      columns, capacity_, d.cache_rows, place_, sc.host_memory, sc.policy, onehot, where(),
      cat("raise \"storage.cache_ratio\" or \"storage.cache_rows\" (the cache holds ", d.cache_rows,
          " of the rank's ", capacity_, " rows)"));
  values_ = host_rows_->cache(0);
  if (columns.states > 0) state0_ = host_rows_->cache(1);
  if (columns.states > 1) state1_ = host_rows_->cache(2);
  if (steps) last_step_ = host_rows_->cache(columns.count() - 1);
  if (onehot && capacity_ > 0) {
    // Every row exists from the start: its initial values, states and step 0, on the host.
    dispatch_key(config_.key_dtype, "embedding keys", [&](auto tag) {
      using Key = typename decltype(tag)::type;
      const std::vector<Key> keys(onehot_host_keys_.begin(), onehot_host_keys_.end());
      kernels::on(Place::host())
          .keys<Key>()
          .init_rows(kernels::Values{host_rows_->host(0), kernels::ValueType::F32}, V, 0, capacity_,
                     keys.data(), config_.seed, config_.init_bound, nullptr);
    });
    for (int k = 0; k < columns.states; ++k) {
      auto* st = reinterpret_cast<float*>(host_rows_->host(1 + k));
      std::fill(st, st + capacity_ * V, optimizer_.initial_state(k));
    }
    if (steps) {
      auto* last = reinterpret_cast<std::int64_t*>(host_rows_->host(columns.count() - 1));
      std::fill(last, last + capacity_, std::int64_t{0});
    }
  }
  if (place_.is_cuda()) readback_ = Tensor::empty({1}, DType::I64, Place::pinned());
}

std::optional<CacheStats> SparseEmbedding::cache_stats() {
  if (!host_rows_) return std::nullopt;
  host_rows_->collect_timings();
  return host_rows_->stats();
}

std::int64_t SparseEmbedding::replay_target() const {
  return optimizer_.update_type == optim::UpdateType::Global ? step_ : -1;
}

std::vector<std::int64_t> SparseEmbedding::read_unique_rows(const Batch& b, StreamHandle s) {
  if (b.entries == 0) return {};
  if (!place_.is_cuda()) {
    const std::int64_t* rows = b.unique_rows.data<std::int64_t>();
    return {rows, rows + *b.unique_count.data<std::int64_t>()};
  }
  const auto start = Clock::now();
  copy_bytes(readback_.data(), Place::pinned(), b.unique_count.data(), place_, sizeof(std::int64_t),
             s);
  synchronize_stream(s);
  const std::int64_t count = *readback_.data<std::int64_t>();
  std::vector<std::int64_t> rows(static_cast<std::size_t>(count));
  if (count > 0) {
    if (readback_.numel() < count)
      readback_ = Tensor::empty({count + count / 4}, DType::I64, Place::pinned());
    copy_bytes(readback_.data(), Place::pinned(), b.unique_rows.data(), place_,
               static_cast<std::size_t>(count) * sizeof(std::int64_t), s);
    synchronize_stream(s);
    std::copy_n(readback_.data<std::int64_t>(), count, rows.begin());
  }
  host_rows_->stats().readback_ms += ms_since(start);
  return rows;
}

std::unique_ptr<SparseEmbedding::Prepared> SparseEmbedding::prepare_cached(
    const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size, bool training,
    const Event* ready) {
  const StreamHandle s = host_rows_->prepare_stream();
  std::unique_ptr<Prepared> p = Prepared::of(batch, local_offset, local_size, training);
  const int set = take_buffer_set();
  p->set = set;
  wait_for_set(set, ready, s);
  std::unique_ptr<Batch> b;
  try {
    b = prepare_batch(batch, local_offset, local_size, training, s, cat("cache", set, "/"), false,
                      buffer_sets_[static_cast<std::size_t>(set)].bad);
  } catch (...) {
    release_buffer_set(set);
    throw;
  }
  b->release = [this, set] { release_buffer_set(set); };
  const std::vector<std::int64_t> unique = read_unique_rows(*b, s);
  CacheDirectory& dir = host_rows_->directory();
  p->plan = dir.plan(unique, training);
  try {
    host_rows_->stage(p->plan);
  } catch (...) {
    dir.abandon(p->plan);
    throw;
  }
  CacheStats& st = host_rows_->stats();
  st.batches += 1;
  st.lookups += p->plan.lookups;
  st.hits += p->plan.hits;
  p->batch = std::move(b);
  return p;
}

std::unique_ptr<SparseEmbedding::Batch> SparseEmbedding::take_cached_batch(
    const CsrTensor& batch, std::int64_t local_offset, std::int64_t local_size, bool training) {
  std::unique_ptr<Prepared> p;
  if (prepared_ && prepared_->matches(batch, local_offset, local_size, training)) {
    p = std::move(prepared_);
  } else {
    // Another batch: a training batch replaces the one prepared ahead; an evaluation batch
    // runs between it and its forward (its row moves are queued first, its rows stay pinned).
    if (prepared_ && training) drop_prepared();
    if (prepared_) settle_prepared();
    const auto start = Clock::now();
    try {
      p = prepare_cached(batch, local_offset, local_size, training, nullptr);
    } catch (const Error&) {
      if (!prepared_) throw;
      // The rows held for the prepared batch left too little room: forget it and try again.
      drop_prepared();
      p = prepare_cached(batch, local_offset, local_size, training, nullptr);
    }
    if (!place_.is_cuda()) host_rows_->stats().exposed_ms += ms_since(start);
  }
  if (p->error) std::rethrow_exception(p->error);
  const StreamHandle s = stream();
  if (!p->installed) host_rows_->install(p->plan, s, replay_target());
  kernels::RowInit init;
  init.seed = config_.seed;
  init.bound = config_.init_bound;
  init.state0 = optimizer_.initial_state(0);
  init.state1 = optimizer_.initial_state(1);
  init.step = step_;
  host_rows_->start_new_rows(
      p->plan,
      [&](const std::int64_t* rows, const std::int64_t* slots, std::int64_t count) {
        dispatch_key(config_.key_dtype, "embedding keys", [&](auto tag) {
          using Key = typename decltype(tag)::type;
          kernels::on(place_).keys<Key>().init_rows_at(
              rows, slots, count, table_->reverse_map().data<Key>(), init, values_.data<float>(),
              config_.vec_size, row_states(), s);
        });
      },
      s);
  CacheDirectory& dir = host_rows_->directory();
  dir.started(p->plan);
  dir.release(p->plan);
  Batch& b = *p->batch;
  host_rows_->map_to_slots(b.rows.data<std::int64_t>(), b.entries, nullptr, s);
  if (b.unique_rows.defined()) {
    host_rows_->map_to_slots(b.unique_rows.data<std::int64_t>(), b.entries,
                             b.unique_count.data<std::int64_t>(), s);
  }
  return std::move(p->batch);
}

void SparseEmbedding::settle_prepared() {
  if (!host_rows_ || !prepared_ || prepared_->error || prepared_->installed) return;
  host_rows_->install(prepared_->plan, stream(), replay_target());
  prepared_->installed = true;
}

void SparseEmbedding::drop_prepared() {
  if (!prepared_) return;
  if (host_rows_ && !prepared_->error) {
    // Its moves go ahead (the directory already counts them); its new rows are forgotten.
    settle_prepared();
    host_rows_->abandon(prepared_->plan, stream());
    host_rows_->directory().abandon(prepared_->plan);
  }
  prepared_.reset();
}

void SparseEmbedding::bring_rows_current() {
  const optim::UpdateType type = optimizer_.update_type;
  if (type == optim::UpdateType::Local) return;
  if (!host_rows_) {
    catch_up_all();
    return;
  }
  const std::int64_t V = config_.vec_size, target = step_;
  const CacheDirectory& dir = host_rows_->directory();
  const RowColumns& columns = host_rows_->columns();
  const kernels::LazyParams lp =
      type == optim::UpdateType::LazyGlobal ? lazy_params(target) : kernels::LazyParams{};
  if (type == optim::UpdateType::LazyGlobal && dir.high_water() > 0) {
    // Global keeps the cached rows current every step; LazyGlobal catches them up here.
    kernels::on(place_).catch_up_rows(nullptr, dir.high_water(), nullptr, table_values(), V,
                                      row_states(), target, lp, stream());
  }
  host_rows_->settle(stream());
  const auto* last = reinterpret_cast<const std::int64_t*>(host_rows_->host(columns.count() - 1));
  std::vector<std::int64_t> behind;
  for (std::int64_t r = 0; r < dir.rows(); ++r) {
    if (dir.slot_of(r) == CacheDirectory::kOnHost && last[r] < target) behind.push_back(r);
  }
  const optim::UpdateStep* steps = host_rows_->steps_at_place();
  host_rows_->update_host_rows(
      behind,
      [&](std::byte* const* c, std::int64_t count, StreamHandle s) {
        kernels::RowStates st{columns.states > 0 ? reinterpret_cast<float*>(c[1]) : nullptr,
                              columns.states > 1 ? reinterpret_cast<float*>(c[2]) : nullptr,
                              reinterpret_cast<std::int64_t*>(c[columns.count() - 1])};
        auto* values = reinterpret_cast<float*>(c[0]);
        if (type == optim::UpdateType::LazyGlobal) {
          // Host-backed tables hold f32 vectors.
          const kernels::Values f32{values, kernels::ValueType::F32};
          kernels::on(place_).catch_up_rows(nullptr, count, nullptr, f32, V, st, target, lp, s);
        } else {
          kernels::on(place_).replay_steps(nullptr, count, values, V, st, target, steps, s);
        }
      },
      stream());
}

}  // namespace ember::embedding
