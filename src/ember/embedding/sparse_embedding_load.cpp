// Loading a saved sparse embedding (layout: docs/embedding.md, "Persistence"). Every file's size
// is checked first; then the files are read a chunk of rows at a time, every rank taking the rows
// it owns, into the device table or, for a host table, straight into host memory (the cache is
// emptied first). A model saved with any rank count and any storage location loads.
#include <algorithm>
#include <fstream>

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

}  // namespace

void SparseEmbedding::load(const fs::path& dir) {
  PlaceGuard guard(place_);
  check_deferred_errors();
  EMBER_CHECK(fs::is_directory(dir), where(), ": no saved embedding at ", dir.string());
  const std::int64_t V = config_.vec_size;
  const int D = comm_.size(), r = comm_.rank();
  const auto names = state_names();
  const SlotOfKey slot_of_key(slot_begin(), dir / "keys");

  // Every size first, so that a file of another model changes nothing.
  if (!fs::exists(dir / "keys")) EMBER_THROW_AS(DataError, "cannot open ", (dir / "keys").string());
  const auto key_bytes = static_cast<std::int64_t>(dtype_size(config_.key_dtype));
  const auto key_file_bytes = static_cast<std::int64_t>(fs::file_size(dir / "keys"));
  if (key_file_bytes % key_bytes != 0) {
    EMBER_THROW_AS(DataError, (dir / "keys").string(), ": keys file has ", key_file_bytes,
                   " bytes, not a multiple of ", key_bytes);
  }
  const std::int64_t n = key_file_bytes / key_bytes;
  SavedFile keys_file(dir / "keys", n, key_bytes, "keys");
  SavedFile vectors_file(dir / "vectors", n, V * 4, "vectors");
  std::unique_ptr<SavedFile> slots_file;
  if (config_.type == EmbeddingType::LocalizedSlotHash) {
    if (fs::exists(dir / "slot_ids")) {
      slots_file = std::make_unique<SavedFile>(dir / "slot_ids", n, 8, "slot_ids");
    } else if (config_.slot_size_array.empty()) {
      EMBER_THROW_AS(DataError, dir.string(),
                     ": a LocalizedSlot model needs its slot_ids file "
                     "(or a slot_size_array to place keys)");
    }
  }
  std::vector<bool> have_states(names.size(), false);
  std::vector<std::unique_ptr<SavedFile>> state_files(names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (!fs::exists(dir / names[k])) continue;
    state_files[k] = std::make_unique<SavedFile>(dir / names[k], n, V * 4, names[k]);
    have_states[k] = true;
  }
  std::int64_t file_step = -1;
  if (fs::exists(dir / "optimizer_step")) {
    SavedFile step_file(dir / "optimizer_step", 1, 8, "optimizer_step");
    std::vector<std::int64_t> step;
    step_file.read(1, step);
    file_step = step[0];
  }

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
  std::vector<std::uint32_t> narrow;
  std::vector<float> vectors;
  std::vector<std::vector<float>> states(names.size());
  for (std::int64_t first = 0; first < n; first += kLoadChunk) {
    const std::int64_t m = std::min(kLoadChunk, n - first);
    if (config_.key_dtype == DType::U32) {
      keys_file.read(m, narrow);
      keys.assign(narrow.begin(), narrow.end());
    } else {
      keys_file.read(m, keys);
    }
    if (slots_file) {
      slots_file->read(m, slots);
    } else if (config_.type == EmbeddingType::LocalizedSlotHash) {
      slots.clear();
      for (std::int64_t key : keys)
        slots.push_back(slot_of_key(key));
    }
    vectors_file.read(m, vectors);
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (state_files[k]) state_files[k]->read(m, states[k]);
    }
    // Keep the rows this rank owns.
    EmbeddingSnapshot mine;
    mine.states.resize(names.size());
    for (std::int64_t i = 0; i < m; ++i) {
      const std::int64_t key = keys[static_cast<std::size_t>(i)];
      bool owned = false;
      switch (config_.type) {
        case EmbeddingType::DistributedSlotHash:
          owned = static_cast<std::uint64_t>(key) % static_cast<std::uint64_t>(D) ==
                  static_cast<std::uint64_t>(r);
          break;
        case EmbeddingType::LocalizedSlotHash:
          owned = slots[static_cast<std::size_t>(i)] % D == r;
          break;
        case EmbeddingType::LocalizedSlotOneHot:
        case EmbeddingType::Hybrid:
          owned = slot_of_key(key) % D == r;
          break;
      }
      if (!owned) continue;
      mine.keys.push_back(key);
      mine.vectors.insert(mine.vectors.end(), vectors.begin() + i * V,
                          vectors.begin() + (i + 1) * V);
      if (!slots.empty()) mine.slots.push_back(slots[static_cast<std::size_t>(i)]);
      for (std::size_t k = 0; k < names.size(); ++k) {
        if (!have_states[k]) continue;
        mine.states[k].insert(mine.states[k].end(), states[k].begin() + i * V,
                              states[k].begin() + (i + 1) * V);
      }
    }
    insert_loaded(mine, have_states);
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
