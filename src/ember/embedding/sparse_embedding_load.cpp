// Loading a saved sparse embedding (layout: docs/embedding.md, "Persistence"). Every file's size
// is checked first; then the files are read a chunk of rows at a time, every rank taking the rows
// it owns, into the device table or, for a host table, straight into host memory (the cache is
// emptied first). A model saved with any rank count and any storage location loads: a save of
// this job's own sharding is read shard by rank, any other every shard by every rank.
#include <algorithm>
#include <fstream>
#include <memory>

#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

namespace fs = std::filesystem;

namespace {

// Rows read per chunk.
constexpr std::int64_t kLoadChunk = 1 << 18;

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

// One saved file, read a chunk of rows at a time; its size is checked on opening.
class SavedFile {
 public:
  SavedFile(const fs::path& path, std::int64_t rows, std::int64_t row_bytes,
            const std::string& what)
      : path_(path), row_bytes_(row_bytes) {
    const auto size = static_cast<std::uint64_t>(fs::file_size(path));
    const auto want = static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(row_bytes);
    if (size != want) {
      EMBER_THROW_AS(DataError, path.string(), ": ", what, " file has ", size, " bytes but ", rows,
                     " x ", row_bytes, " = ", want,
                     " were expected (keys and vectors must come from the same save)");
    }
    in_.open(path, std::ios::binary);
    if (!in_) EMBER_THROW_AS(DataError, "cannot open ", path.string());
  }
  template <class T>
  void read(std::int64_t rows, std::vector<T>& out) {
    out.resize(static_cast<std::size_t>(rows * row_bytes_) / sizeof(T));
    in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(rows * row_bytes_));
    if (!in_) EMBER_THROW_AS(DataError, "reading ", path_.string(), " failed");
  }

 private:
  fs::path path_;
  std::int64_t row_bytes_;
  std::ifstream in_;
};

// One saved file set (a one-rank save's directory, or one shard rank_<r>/ of a save of several
// ranks): its files opened and their sizes checked, then read a chunk of rows at a time.
class SavedFileSet {
 public:
  SavedFileSet(const fs::path& dir, const EmbeddingConfig& c, const std::vector<std::string>& names,
               const std::vector<std::int64_t>& slot_begin)
      : dir_(dir), key_dtype_(c.key_dtype), slot_of_key_(slot_begin, dir / "keys") {
    if (!fs::exists(dir / "keys")) {
      EMBER_THROW_AS(DataError, "cannot open ", (dir / "keys").string());
    }
    const auto key_bytes = static_cast<std::int64_t>(dtype_size(c.key_dtype));
    const auto key_file_bytes = static_cast<std::int64_t>(fs::file_size(dir / "keys"));
    if (key_file_bytes % key_bytes != 0) {
      EMBER_THROW_AS(DataError, (dir / "keys").string(), ": keys file has ", key_file_bytes,
                     " bytes, not a multiple of ", key_bytes);
    }
    rows_ = key_file_bytes / key_bytes;
    keys_ = std::make_unique<SavedFile>(dir / "keys", rows_, key_bytes, "keys");
    vectors_ = std::make_unique<SavedFile>(dir / "vectors", rows_, c.vec_size * 4, "vectors");
    localized_hash_ = c.type == EmbeddingType::LocalizedSlotHash;
    if (localized_hash_) {
      if (fs::exists(dir / "slot_ids")) {
        slots_ = std::make_unique<SavedFile>(dir / "slot_ids", rows_, 8, "slot_ids");
      } else if (c.slot_size_array.empty()) {
        EMBER_THROW_AS(DataError, dir.string(),
                       ": a LocalizedSlot model needs its slot_ids file "
                       "(or a slot_size_array to place keys)");
      }
    }
    with_key_slots_ = !c.slot_size_array.empty() && c.type != EmbeddingType::DistributedSlotHash;
    have_states_.assign(names.size(), false);
    states_.resize(names.size());
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (!fs::exists(dir / names[k])) continue;
      states_[k] = std::make_unique<SavedFile>(dir / names[k], rows_, c.vec_size * 4, names[k]);
      have_states_[k] = true;
    }
    if (fs::exists(dir / "optimizer_step")) {
      SavedFile step_file(dir / "optimizer_step", 1, 8, "optimizer_step");
      std::vector<std::int64_t> step;
      step_file.read(1, step);
      step_ = step[0];
    }
  }
  const fs::path& dir() const { return dir_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t step() const { return step_; }  // -1: no optimizer_step file
  const std::vector<bool>& have_states() const { return have_states_; }

  // The next `m` rows: keys (i64), each row's slot (the saved slot id for LocalizedSlot hash,
  // the key's slot of slot_size_array for the other slot-owned types, else empty), vectors and
  // the states present.
  void read(std::int64_t m, std::vector<std::int64_t>& keys, std::vector<std::int64_t>& slots,
            std::vector<float>& vectors, std::vector<std::vector<float>>& states) {
    if (key_dtype_ == DType::U32) {
      keys_->read(m, narrow_);
      keys.assign(narrow_.begin(), narrow_.end());
    } else {
      keys_->read(m, keys);
    }
    if (slots_) {
      slots_->read(m, slots);
    } else if (localized_hash_ || with_key_slots_) {
      slots.clear();
      for (std::int64_t key : keys)
        slots.push_back(slot_of_key_(key));
    } else {
      slots.clear();
    }
    vectors_->read(m, vectors);
    states.resize(states_.size());
    for (std::size_t k = 0; k < states_.size(); ++k) {
      if (states_[k]) states_[k]->read(m, states[k]);
    }
  }

 private:
  fs::path dir_;
  DType key_dtype_;
  SlotOfKey slot_of_key_;
  std::int64_t rows_ = 0, step_ = -1;
  bool localized_hash_ = false, with_key_slots_ = false;
  std::unique_ptr<SavedFile> keys_, vectors_, slots_;
  std::vector<std::unique_ptr<SavedFile>> states_;
  std::vector<bool> have_states_;
  std::vector<std::uint32_t> narrow_;
};

// The file sets of a saved embedding: `dir` itself (a save of one rank, HugeCTR's layout), or
// its shards rank_0/ ... rank_<n-1>/ (a save of n ranks).
std::vector<fs::path> saved_file_sets(const fs::path& dir) {
  if (fs::exists(dir / "keys")) return {dir};
  std::vector<std::int64_t> shards;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank_", 0) != 0 || name.size() == 5 || !entry.is_directory()) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    shards.push_back(std::stoll(name.substr(5)));
  }
  if (shards.empty()) EMBER_THROW_AS(DataError, "cannot open ", (dir / "keys").string());
  std::sort(shards.begin(), shards.end());
  std::vector<fs::path> sets;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i] != static_cast<std::int64_t>(i)) {
      EMBER_THROW_AS(DataError, dir.string(), ": shard rank_", i, " is missing (the save has ",
                     shards.size(), " shards, the last rank_", shards.back(), ")");
    }
    sets.push_back(dir / cat("rank_", i));
  }
  return sets;
}

}  // namespace

bool SparseEmbedding::owns(std::int64_t key, std::int64_t slot) const {
  const int D = comm_.size(), r = comm_.rank();
  if (config_.type == EmbeddingType::DistributedSlotHash) {
    return static_cast<std::uint64_t>(key) % static_cast<std::uint64_t>(D) ==
           static_cast<std::uint64_t>(r);
  }
  return slot % D == r;
}

void SparseEmbedding::load(const fs::path& dir) {
  PlaceGuard guard(place_);
  refuse_while_inserted_ahead("a load");
  check_deferred_errors();
  EMBER_CHECK(fs::is_directory(dir), where(), ": no saved embedding at ", dir.string());
  const std::int64_t V = config_.vec_size;
  const int D = comm_.size(), r = comm_.rank();
  const auto names = state_names();
  const std::vector<std::int64_t> begin = slot_begin();

  // Every size first, so that a file of another model changes nothing.
  const std::vector<fs::path> sets = saved_file_sets(dir);
  std::int64_t file_step = -1;
  std::vector<bool> have_states;
  for (const fs::path& set : sets) {
    const SavedFileSet files(set, config_, names, begin);
    if (set == sets.front()) {
      file_step = files.step();
      have_states = files.have_states();
    } else if (files.step() != file_step || files.have_states() != have_states) {
      EMBER_THROW_AS(DataError, set.string(), " and ", sets.front().string(),
                     " are shards of different saves (their optimizer steps or state files "
                     "differ: ",
                     files.step(), " and ", file_step, " steps)");
    }
  }
  // A save of this job's own sharding (one shard per rank, every shard holding only its rank's
  // keys): each rank reads its own shard. Otherwise every rank reads every shard.
  bool own_shard = D > 1 && static_cast<int>(sets.size()) == D;
  if (own_shard) {
    try {
      SavedFileSet files(sets[static_cast<std::size_t>(r)], config_, names, begin);
      std::vector<std::int64_t> keys, slots;
      std::vector<float> vectors;
      std::vector<std::vector<float>> states;
      for (std::int64_t first = 0; own_shard && first < files.rows(); first += kLoadChunk) {
        files.read(std::min(kLoadChunk, files.rows() - first), keys, slots, vectors, states);
        for (std::size_t i = 0; own_shard && i < keys.size(); ++i)
          own_shard = owns(keys[i], slots.empty() ? -1 : slots[i]);
      }
    } catch (const std::exception&) {
      own_shard = false;  // every rank reads every shard, and meets the error there
    }
  }
  if (D > 1 && static_cast<int>(sets.size()) == D) own_shard = first_failed_rank(!own_shard) == D;

  // HybridSparseEmbedding loads the one-hot layout into the owners' rows, and its frequent rows
  // take them from there: rows the files do not name keep their values.
  if (hybrid_) frequent_rows_to_owners();
  // A host table takes the rows in host memory: the cache is emptied first.
  if (host_rows_) {
    drop_prepared();
    host_rows_->flush(stream());
  }
  drop_batch();
  if (file_step >= 0) {
    step_ = file_step;
    schedule_.set_step(step_);
  }
  std::vector<std::int64_t> keys, slots;
  std::vector<float> vectors;
  std::vector<std::vector<float>> states;
  for (std::size_t s = 0; s < sets.size(); ++s) {
    if (own_shard && s != static_cast<std::size_t>(r)) continue;
    SavedFileSet files(sets[s], config_, names, begin);
    for (std::int64_t first = 0; first < files.rows(); first += kLoadChunk) {
      const std::int64_t m = std::min(kLoadChunk, files.rows() - first);
      files.read(m, keys, slots, vectors, states);
      // Keep the rows this rank owns.
      EmbeddingSnapshot mine;
      mine.states.resize(names.size());
      const bool saved_slots = config_.type == EmbeddingType::LocalizedSlotHash;
      for (std::int64_t i = 0; i < m; ++i) {
        const auto at = static_cast<std::size_t>(i);
        if (!owns(keys[at], slots.empty() ? -1 : slots[at])) continue;
        mine.keys.push_back(keys[at]);
        mine.vectors.insert(mine.vectors.end(), vectors.begin() + i * V,
                            vectors.begin() + (i + 1) * V);
        if (saved_slots) mine.slots.push_back(slots[at]);
        for (std::size_t k = 0; k < names.size(); ++k) {
          if (!have_states[k]) continue;
          mine.states[k].insert(mine.states[k].end(), states[k].begin() + i * V,
                                states[k].begin() + (i + 1) * V);
        }
      }
      insert_loaded(mine, have_states);
    }
  }
  fill_loaded_steps();
  if (hybrid_) frequent_rows_from_owners();
  comm_.barrier();
}

void SparseEmbedding::insert_loaded(const EmbeddingSnapshot& mine,
                                    const std::vector<bool>& have_states) {
  const std::int64_t m = static_cast<std::int64_t>(mine.keys.size()), V = config_.vec_size;
  if (m == 0) return;
  std::vector<std::int64_t> rows(static_cast<std::size_t>(m));
  InsertResult fresh;
  if (table_) {
    const Tensor keys = Tensor::from_vector(mine.keys).to(config_.key_dtype).to(place_);
    const Tensor found = Tensor::empty({m}, DType::I64, place_);
    fresh = table_->insert_or_find(keys, found, stream());
    rows = found.to(Place::host()).to_vector<std::int64_t>();
  } else {
    std::vector<std::int64_t> begin = slot_begin(), local_base(config_.slot_num, -1);
    std::int64_t next = 0;
    for (std::int64_t s : owned_slots_) {
      local_base[s] = next;
      next += config_.slot_size_array[s];
    }
    for (std::int64_t i = 0; i < m; ++i) {
      const auto it = std::upper_bound(begin.begin(), begin.end(), mine.keys[i]);
      const std::int64_t s = (it - begin.begin()) - 1;
      rows[i] = local_base[s] + (mine.keys[i] - begin[s]);
    }
  }
  const Tensor row_index = Tensor::from_vector(rows, place_);
  if (row_slot_.defined()) {
    const Tensor slots = Tensor::from_vector(mine.slots, place_);
    kernels::on(place_).move_rows(row_slot_.data(), row_index.data<std::int64_t>(), slots.data(),
                                  nullptr, m, sizeof(std::int64_t), stream());
  }
  const int K = optimizer_.state_count();
  if (host_rows_) {
    // Straight into the host table (the cache is empty): values, and each state from the file,
    // or its initial value for a row the file brings new.
    auto put = [&](int column, const float* data) {
      kernels::on(Place::host())
          .move_rows(host_rows_->host(column), rows.data(), data, nullptr, m, V * 4, nullptr);
    };
    put(0, mine.vectors.data());
    for (int k = 0; k < K; ++k) {
      if (have_states[k]) {
        put(1 + k, mine.states[k].data());
        continue;
      }
      auto* st = reinterpret_cast<float*>(host_rows_->host(1 + k));
      for (std::int64_t i = 0; i < m; ++i) {
        // New to the table, or a row a batch prepared ahead created but never started.
        if (host_rows_->directory().slot_of(rows[i]) == CacheDirectory::kAbsent) {
          std::fill(st + rows[i] * V, st + (rows[i] + 1) * V, optimizer_.initial_state(k));
        }
      }
    }
    host_rows_->directory().loaded(rows);
    if (stream() != nullptr) synchronize_stream(stream());
    return;
  }
  for (Tensor* st : {&state0_, &state1_}) {
    if (st->defined() && fresh.count() > 0) {
      ops::fill(st->slice(0, fresh.first, fresh.end),
                optimizer_.initial_state(st == &state0_ ? 0 : 1), stream());
    }
  }
  // Uploads stay alive until the stream is synchronised below.
  std::vector<Tensor> uploads;
  uploads.push_back(Tensor::from_vector(mine.vectors, place_));
  // f32 files into a 16-bit table round to nearest.
  kernels::on(place_).scatter_values(table_values(), uploads.back().data<float>(),
                                     row_index.data<std::int64_t>(), m, V, stream());
  for (int k = 0; k < K; ++k) {
    if (!have_states[k]) continue;
    Tensor& st = k == 0 ? state0_ : state1_;
    uploads.push_back(Tensor::from_vector(mine.states[k], place_));
    kernels::on(place_).scatter_rows(st.data<float>(), uploads.back().data<float>(),
                                     row_index.data<std::int64_t>(), m, V, stream());
  }
  if (stream() != nullptr) synchronize_stream(stream());
}

void SparseEmbedding::fill_loaded_steps() {
  if (!last_step_.defined()) return;
  if (host_rows_) {
    // Every made row is on the host (the cache was emptied before loading).
    const CacheDirectory& dir = host_rows_->directory();
    auto* last =
        reinterpret_cast<std::int64_t*>(host_rows_->host(host_rows_->columns().count() - 1));
    for (std::int64_t row = 0; row < dir.rows(); ++row) {
      if (dir.slot_of(row) == CacheDirectory::kOnHost) last[row] = step_;
    }
    return;
  }
  if (rows_in_use() > 0) {
    kernels::on(place_).fill_steps(last_step_.data<std::int64_t>(), 0, rows_in_use(), step_,
                                   stream());
  }
  if (stream() != nullptr) synchronize_stream(stream());
}

}  // namespace ember::embedding
