// Snapshots, saving and loading of a sparse embedding (layout: docs/embedding.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

namespace fs = std::filesystem;

namespace {

template <class T>
std::vector<T> host_vector(const Tensor& t) {
  if (t.numel() == 0) return {};
  return t.to(Place::host()).to_vector<T>();
}

std::vector<std::int64_t> keys_as_i64(const Tensor& keys) {
  if (keys.numel() == 0) return {};
  return host_vector<std::int64_t>(keys.to(Place::host()).to(DType::I64));
}

// Sends every rank's `mine` (rows_per_rank[r] x width elements) to rank 0, concatenated in rank
// order; other ranks get nothing back.
template <class T>
std::vector<T> gather_to_root(distributed::Communicator& comm, const std::vector<T>& mine,
                              const std::vector<std::int64_t>& rows_per_rank, std::int64_t width,
                              StreamHandle stream) {
  const int D = comm.size(), r = comm.rank();
  const Tensor send = Tensor::from_vector(mine.empty() ? std::vector<T>{T{}} : mine, comm.place());
  std::vector<std::int64_t> send_counts(D, 0), recv_counts(D, 0);
  send_counts[0] = static_cast<std::int64_t>(mine.size());
  std::int64_t total = 0;
  if (r == 0) {
    for (int p = 0; p < D; ++p)
      total += (recv_counts[p] = rows_per_rank[p] * width);
  }
  const Tensor recv =
      Tensor::empty({std::max<std::int64_t>(total, 1)}, dtype_of<T>(), comm.place());
  comm.all_to_all_v(send, send_counts, recv, recv_counts, stream);
  if (stream != nullptr) synchronize_stream(stream);
  if (r != 0 || total == 0) return {};
  return recv.slice(0, 0, total).to(Place::host()).to_vector<T>();
}

void write_file(const fs::path& path, const void* data, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) EMBER_THROW("cannot create ", path.string());
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.flush();
  if (!out) EMBER_THROW("writing ", bytes, " bytes to ", path.string(), " failed (disk full?)");
}

std::vector<char> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) EMBER_THROW_AS(DataError, "cannot open ", path.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes;
}

template <class T>
std::vector<T> read_array(const fs::path& path, std::int64_t expected_count,
                          const std::string& what) {
  const std::vector<char> bytes = read_file(path);
  if (expected_count >= 0 && bytes.size() != static_cast<std::size_t>(expected_count) * sizeof(T)) {
    EMBER_THROW_AS(DataError, path.string(), ": ", what, " file has ", bytes.size(), " bytes but ",
                   expected_count, " x ", sizeof(T), " = ",
                   expected_count * static_cast<std::int64_t>(sizeof(T)),
                   " were expected (keys and vectors must come from the same save)");
  }
  if (bytes.size() % sizeof(T) != 0) {
    EMBER_THROW_AS(DataError, path.string(), ": ", what, " file has ", bytes.size(),
                   " bytes, not a multiple of ", sizeof(T));
  }
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

EmbeddingSnapshot SparseEmbedding::snapshot() {
  PlaceGuard guard(place_);
  check_deferred_errors();
  catch_up_all();
  const std::int64_t n = rows_in_use(), V = config_.vec_size;
  const int D = comm_.size();
  const Tensor keys = table_ ? table_->keys_by_row() : onehot_keys_.slice(0, 0, n);
  const std::vector<std::int64_t> my_keys = keys_as_i64(keys);
  // 16-bit vectors widen exactly: a snapshot (and a save) is f32 whatever the table stores.
  const std::vector<float> my_vectors = host_vector<float>(
      values_.dtype() == DType::F32 ? values_.slice(0, 0, n)
                                    : ops::cast(values_.slice(0, 0, n), DType::F32, stream()));
  std::vector<std::int64_t> my_slots;
  if (row_slot_.defined()) my_slots = host_vector<std::int64_t>(row_slot_.slice(0, 0, n));
  std::vector<std::vector<float>> my_states;
  for (const Tensor* st : {&state0_, &state1_}) {
    if (st->defined()) my_states.push_back(host_vector<float>(st->slice(0, 0, n)));
  }

  const Tensor count = Tensor::from_vector(std::vector<std::int64_t>{n}, place_);
  const Tensor counts = Tensor::empty({D}, DType::I64, place_);
  comm_.all_gather(count, counts, stream());
  if (stream() != nullptr) synchronize_stream(stream());
  const std::vector<std::int64_t> rows_per_rank = host_vector<std::int64_t>(counts);

  const auto all_keys = gather_to_root(comm_, my_keys, rows_per_rank, 1, stream());
  const auto all_vectors = gather_to_root(comm_, my_vectors, rows_per_rank, V, stream());
  std::vector<std::int64_t> all_slots;
  if (row_slot_.defined()) all_slots = gather_to_root(comm_, my_slots, rows_per_rank, 1, stream());
  std::vector<std::vector<float>> all_states;
  for (const auto& st : my_states)
    all_states.push_back(gather_to_root(comm_, st, rows_per_rank, V, stream()));

  EmbeddingSnapshot snap;
  snap.step = step_;
  if (comm_.rank() != 0) return snap;
  const std::size_t total = all_keys.size();
  std::vector<std::size_t> order(total);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (all_keys[x] != all_keys[y]) return all_keys[x] < all_keys[y];
    return !all_slots.empty() && all_slots[x] < all_slots[y];
  });
  snap.keys.resize(total);
  snap.vectors.resize(total * V);
  if (!all_slots.empty()) snap.slots.resize(total);
  snap.states.assign(all_states.size(), std::vector<float>(total * V));
  for (std::size_t i = 0; i < total; ++i) {
    const std::size_t from = order[i];
    snap.keys[i] = all_keys[from];
    std::copy_n(all_vectors.begin() + from * V, V, snap.vectors.begin() + i * V);
    if (!all_slots.empty()) snap.slots[i] = all_slots[from];
    for (std::size_t k = 0; k < all_states.size(); ++k) {
      std::copy_n(all_states[k].begin() + from * V, V, snap.states[k].begin() + i * V);
    }
  }
  return snap;
}

void SparseEmbedding::save(const fs::path& dir, bool with_optimizer_states) {
  PlaceGuard guard(place_);
  const EmbeddingSnapshot snap = snapshot();
  std::string failure;
  if (comm_.rank() == 0) {
    try {
      const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
      const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
      fs::create_directories(parent);
      const fs::path tmp = parent / cat(dir.filename().string(), ".tmp-", ::getpid(), "-", stamp);
      fs::create_directories(tmp);
      const std::size_t n = snap.keys.size();
      if (config_.key_dtype == DType::U32) {
        std::vector<std::uint32_t> keys(snap.keys.begin(), snap.keys.end());
        write_file(tmp / "keys", keys.data(), n * sizeof(std::uint32_t));
      } else {
        write_file(tmp / "keys", snap.keys.data(), n * sizeof(std::int64_t));
      }
      write_file(tmp / "vectors", snap.vectors.data(), snap.vectors.size() * sizeof(float));
      if (!snap.slots.empty()) {
        write_file(tmp / "slot_ids", snap.slots.data(), n * sizeof(std::int64_t));
      }
      if (with_optimizer_states) {
        const auto names = state_names();
        for (std::size_t k = 0; k < names.size(); ++k) {
          write_file(tmp / names[k], snap.states[k].data(), snap.states[k].size() * sizeof(float));
        }
        write_file(tmp / "optimizer_step", &snap.step, sizeof snap.step);
      }
      // Swap directories: the previous model stays whole until the new one is complete.
      const fs::path previous = parent / (dir.filename().string() + ".previous");
      fs::remove_all(previous);
      if (fs::exists(dir)) fs::rename(dir, previous);
      fs::rename(tmp, dir);
      fs::remove_all(previous);
      EMBER_LOG_DEBUG("{}: saved {} rows to {}", where(), n, dir.string());
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Every rank learns whether rank 0 succeeded, so no rank hangs or returns early.
  const Tensor status =
      Tensor::from_vector(std::vector<std::int64_t>{failure.empty() ? 0 : 1}, place_);
  comm_.all_reduce(status, distributed::ReduceOp::Max, stream());
  if (stream() != nullptr) synchronize_stream(stream());
  if (host_vector<std::int64_t>(status)[0] != 0) {
    if (!failure.empty()) EMBER_THROW(where(), ": saving to ", dir.string(), " failed: ", failure);
    EMBER_THROW(where(), ": rank 0 failed to save the embedding to ", dir.string());
  }
}

namespace {

// The slot of a key with slot offsets (slot_size_array's ranges), for models saved without
// their slot ids.
class SlotOfKey {
 public:
  SlotOfKey(std::vector<std::int64_t> slot_begin, fs::path keys_file)
      : begin_(std::move(slot_begin)), keys_file_(std::move(keys_file)) {}
  std::int64_t operator()(std::int64_t key) const {
    const auto it = std::upper_bound(begin_.begin(), begin_.end(), key);
    const std::int64_t s = (it - begin_.begin()) - 1;
    if (key < 0 || s >= static_cast<std::int64_t>(begin_.size()) - 1) {
      EMBER_THROW_AS(DataError, keys_file_.string(), ": key ", key,
                     " lies in no slot of slot_size_array (keys [0, ", begin_.back(), "))");
    }
    return s;
  }

 private:
  std::vector<std::int64_t> begin_;  // [slot_num + 1]
  fs::path keys_file_;
};

// Everything saved in `dir` (layout: docs/embedding.md); have_states[k] tells whether state k
// was saved. step is -1 when no optimizer step was saved.
EmbeddingSnapshot read_saved(const fs::path& dir, const EmbeddingConfig& config,
                             const std::vector<std::string>& state_names,
                             const SlotOfKey& slot_of_key, std::vector<bool>& have_states) {
  const std::int64_t V = config.vec_size;
  EmbeddingSnapshot file;
  if (config.key_dtype == DType::U32) {
    const auto k = read_array<std::uint32_t>(dir / "keys", -1, "keys");
    file.keys.assign(k.begin(), k.end());
  } else {
    file.keys = read_array<std::int64_t>(dir / "keys", -1, "keys");
  }
  const auto n = static_cast<std::int64_t>(file.keys.size());
  file.vectors = read_array<float>(dir / "vectors", n * V, "vectors");
  if (config.type == EmbeddingType::LocalizedSlotHash) {
    if (fs::exists(dir / "slot_ids")) {
      file.slots = read_array<std::int64_t>(dir / "slot_ids", n, "slot_ids");
    } else if (!config.slot_size_array.empty()) {
      for (std::int64_t key : file.keys)
        file.slots.push_back(slot_of_key(key));
    } else {
      EMBER_THROW_AS(DataError, dir.string(),
                     ": a LocalizedSlot model needs its slot_ids file "
                     "(or a slot_size_array to place keys)");
    }
  }
  have_states.assign(state_names.size(), false);
  for (std::size_t k = 0; k < state_names.size(); ++k) {
    if (fs::exists(dir / state_names[k])) {
      file.states.push_back(read_array<float>(dir / state_names[k], n * V, state_names[k]));
      have_states[k] = true;
    } else {
      file.states.emplace_back();
    }
  }
  file.step = -1;
  if (fs::exists(dir / "optimizer_step")) {
    file.step = read_array<std::int64_t>(dir / "optimizer_step", 1, "optimizer_step")[0];
  }
  return file;
}

}  // namespace

void SparseEmbedding::load(const fs::path& dir) {
  PlaceGuard guard(place_);
  check_deferred_errors();
  EMBER_CHECK(fs::is_directory(dir), where(), ": no saved embedding at ", dir.string());
  const std::int64_t V = config_.vec_size;
  const int D = comm_.size(), r = comm_.rank();
  const auto names = state_names();
  const SlotOfKey slot_of_key(slot_begin(), dir / "keys");
  std::vector<bool> have_states;
  const EmbeddingSnapshot file = read_saved(dir, config_, names, slot_of_key, have_states);

  // Keep the rows this rank owns.
  std::vector<std::int64_t> picked;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(file.keys.size()); ++i) {
    const std::int64_t key = file.keys[i];
    bool owned = false;
    switch (config_.type) {
      case EmbeddingType::DistributedSlotHash:
        owned = static_cast<std::uint64_t>(key) % static_cast<std::uint64_t>(D) ==
                static_cast<std::uint64_t>(r);
        break;
      case EmbeddingType::LocalizedSlotHash:
        owned = file.slots[i] % D == r;
        break;
      case EmbeddingType::LocalizedSlotOneHot:
        owned = slot_of_key(key) % D == r;
        break;
    }
    if (owned) picked.push_back(i);
  }
  EmbeddingSnapshot mine;
  mine.states.resize(names.size());
  for (std::int64_t i : picked) {
    mine.keys.push_back(file.keys[i]);
    mine.vectors.insert(mine.vectors.end(), file.vectors.begin() + i * V,
                        file.vectors.begin() + (i + 1) * V);
    if (!file.slots.empty()) mine.slots.push_back(file.slots[i]);
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (!have_states[k]) continue;
      mine.states[k].insert(mine.states[k].end(), file.states[k].begin() + i * V,
                            file.states[k].begin() + (i + 1) * V);
    }
  }
  mine.step = file.step;
  insert_loaded(mine, have_states);
  comm_.barrier();
}

void SparseEmbedding::insert_loaded(const EmbeddingSnapshot& mine,
                                    const std::vector<bool>& have_states) {
  const std::int64_t m = static_cast<std::int64_t>(mine.keys.size()), V = config_.vec_size;
  drop_batch();
  if (mine.step >= 0) {
    step_ = mine.step;
    schedule_.set_step(step_);
  }
  if (m > 0) {
    std::vector<std::int64_t> rows(m);
    if (table_) {
      const Tensor keys = Tensor::from_vector(mine.keys).to(config_.key_dtype).to(place_);
      const Tensor found = Tensor::empty({m}, DType::I64, place_);
      const InsertResult fresh = table_->insert_or_find(keys, found, stream());
      for (Tensor* st : {&state0_, &state1_}) {
        if (st->defined() && fresh.count() > 0) {
          ops::fill(st->slice(0, fresh.first, fresh.end),
                    optimizer_.initial_state(st == &state0_ ? 0 : 1), stream());
        }
      }
      rows = host_vector<std::int64_t>(found);
    } else {
      std::vector<std::int64_t> slot_begin(config_.slot_num + 1, 0),
          local_base(config_.slot_num, -1);
      for (std::int64_t s = 0; s < config_.slot_num; ++s) {
        slot_begin[s + 1] = slot_begin[s] + config_.slot_size_array[s];
      }
      std::int64_t next = 0;
      for (std::int64_t s : owned_slots_) {
        local_base[s] = next;
        next += config_.slot_size_array[s];
      }
      for (std::int64_t i = 0; i < m; ++i) {
        const auto it = std::upper_bound(slot_begin.begin(), slot_begin.end(), mine.keys[i]);
        const std::int64_t s = (it - slot_begin.begin()) - 1;
        rows[i] = local_base[s] + (mine.keys[i] - slot_begin[s]);
      }
    }
    // Uploads stay alive until the stream is synchronised below.
    std::vector<Tensor> uploads;
    const Tensor row_index = Tensor::from_vector(rows, place_);
    uploads.push_back(Tensor::from_vector(mine.vectors, place_));
    // f32 files into a 16-bit table round to nearest.
    kernels::on(place_).scatter_values(table_values(), uploads.back().data<float>(),
                                       row_index.data<std::int64_t>(), m, V, stream());
    for (std::size_t k = 0; k < have_states.size(); ++k) {
      if (!have_states[k]) continue;
      Tensor& st = k == 0 ? state0_ : state1_;
      uploads.push_back(Tensor::from_vector(mine.states[k], place_));
      kernels::on(place_).scatter_rows(st.data<float>(), uploads.back().data<float>(),
                                       row_index.data<std::int64_t>(), m, V, stream());
    }
    if (stream() != nullptr) synchronize_stream(stream());
    if (row_slot_.defined()) {
      std::vector<std::int64_t> slots = host_vector<std::int64_t>(row_slot_);
      for (std::int64_t i = 0; i < m; ++i)
        slots[rows[i]] = mine.slots[i];
      row_slot_.copy_from(Tensor::from_vector(slots, place_));
    }
  }
  if (last_step_.defined() && rows_in_use() > 0) {
    kernels::on(place_).fill_steps(last_step_.data<std::int64_t>(), 0, rows_in_use(), step_,
                                   stream());
  }
  if (stream() != nullptr) synchronize_stream(stream());
}

}  // namespace ember::embedding
