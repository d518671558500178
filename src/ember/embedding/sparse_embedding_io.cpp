// Snapshots and saving of a sparse embedding (layout: docs/embedding.md, "Persistence").
// save(): every rank writes its own rows, in key order, a chunk at a time: with one rank the
// files themselves, with several its shard rank_<r>/, all ranks in parallel (no row passes
// through another rank). snapshot(): every rank lists its rows in key order, and rank 0 merges
// the ranks' lists a chunk at a time (asking each rank for its next chunk when it has used up
// the last), keeping the rows in global key order. No rank ever holds more than a few chunks, on
// the device or the host, whatever the table's size or where its rows live.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <numeric>

#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/sparse_embedding.hpp"

namespace ember::embedding {

namespace fs = std::filesystem;

namespace {

// Rows per chunk of the merge: each rank sends at most this many rows per round.
constexpr std::int64_t kMergeChunk = 65536;

template <class T>
std::vector<T> host_vector(const Tensor& t) {
  if (t.numel() == 0) return {};
  return t.to(Place::host()).to_vector<T>();
}

template <class T>
Tensor at_place(const std::vector<T>& v, Place place) {
  return Tensor::from_vector(v.empty() ? std::vector<T>{T{}} : v, place);
}

void write_bytes(std::ofstream& out, const fs::path& path, const void* data, std::size_t bytes) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) EMBER_THROW("writing ", bytes, " bytes to ", path.string(), " failed (disk full?)");
}

}  // namespace

void SparseEmbedding::read_rows(const std::vector<std::int64_t>& rows, std::vector<float>& vectors,
                                std::vector<std::vector<float>>& states) {
  const std::int64_t m = static_cast<std::int64_t>(rows.size()), V = config_.vec_size;
  vectors.resize(static_cast<std::size_t>(m * V));
  states.assign(static_cast<std::size_t>(optimizer_.state_count()),
                std::vector<float>(static_cast<std::size_t>(m * V)));
  if (m == 0) return;
  if (host_rows_) {
    std::vector<std::int64_t> steps(static_cast<std::size_t>(m));
    std::vector<std::byte*> out{reinterpret_cast<std::byte*>(vectors.data())};
    for (auto& st : states)
      out.push_back(reinterpret_cast<std::byte*>(st.data()));
    if (host_rows_->columns().steps) out.push_back(reinterpret_cast<std::byte*>(steps.data()));
    host_rows_->read_rows(rows, out, stream());
    return;
  }
  const Tensor index = Tensor::from_vector(rows, place_);
  Tensor gathered = scratch("save/gathered", m * V, DType::F32);
  auto take = [&](std::vector<float>& out) {
    copy_bytes(out.data(), Place::host(), gathered.data(), place_,
               static_cast<std::size_t>(m * V) * sizeof(float), stream());
  };
  // 16-bit vectors widen exactly: what is saved is f32 whatever the table stores.
  kernels::on(place_).gather_values(gathered.data<float>(), table_values(),
                                    index.data<std::int64_t>(), m, V, stream());
  take(vectors);
  for (std::size_t k = 0; k < states.size(); ++k) {
    kernels::on(place_).gather_rows(gathered.data<float>(),
                                    (k == 0 ? state0_ : state1_).data<float>(),
                                    index.data<std::int64_t>(), m, V, stream());
    take(states[k]);
  }
  if (stream() != nullptr) synchronize_stream(stream());
}

void SparseEmbedding::local_rows_in_key_order(std::vector<std::int64_t>& rows,
                                              std::vector<std::int64_t>& keys,
                                              std::vector<std::int64_t>& slots) {
  const bool with_slots = row_slot_.defined();
  rows.clear();
  keys.clear();
  slots.clear();
  std::int64_t n = 0;
  std::vector<std::int64_t> all_keys, all_slots;
  if (table_) {
    n = table_->size();
    all_keys = host_vector<std::int64_t>(table_->reverse_map().slice(0, 0, n).to(DType::I64));
  } else {
    n = capacity_;
    all_keys = onehot_host_keys_;
  }
  if (with_slots && n > 0) all_slots = host_vector<std::int64_t>(row_slot_.slice(0, 0, n));
  for (std::int64_t r = 0; r < n; ++r) {
    if (host_rows_) {
      const std::int32_t s = host_rows_->directory().slot_of(r);
      const bool made =
          s == CacheDirectory::kOnHost || (s >= 0 && !host_rows_->directory().waiting(s));
      if (!made) continue;
    }
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(), [&](std::int64_t x, std::int64_t y) {
    if (all_keys[x] != all_keys[y]) return all_keys[x] < all_keys[y];
    return with_slots && all_slots[x] < all_slots[y];
  });
  for (std::int64_t r : rows) {
    keys.push_back(all_keys[r]);
    if (with_slots) slots.push_back(all_slots[r]);
  }
}

void SparseEmbedding::stream_model(const RowSink& sink) {
  const int D = comm_.size(), me = comm_.rank();
  const std::int64_t V = config_.vec_size;
  const int K = optimizer_.state_count();
  const bool with_slots = row_slot_.defined();
  // This rank's rows, their keys and slots, in key order (then slot).
  std::vector<std::int64_t> rows, keys, slots;
  local_rows_in_key_order(rows, keys, slots);
  const Tensor count = Tensor::from_vector(
      std::vector<std::int64_t>{static_cast<std::int64_t>(rows.size())}, place_);
  const Tensor counts = Tensor::empty({D}, DType::I64, place_);
  comm_.all_gather(count, counts, stream());
  if (stream() != nullptr) synchronize_stream(stream());
  const std::vector<std::int64_t> totals = host_vector<std::int64_t>(counts);

  // Rank 0: each rank's rows received and not yet merged.
  struct Pending {
    std::vector<std::int64_t> keys, slots;
    std::vector<float> vectors;
    std::vector<std::vector<float>> states;
    std::size_t next = 0;       // first row not merged
    std::int64_t received = 0;  // rows received so far
    bool empty() const { return next == keys.size(); }
  };
  std::vector<Pending> pending(static_cast<std::size_t>(me == 0 ? D : 0));
  for (Pending& q : pending)
    q.states.assign(static_cast<std::size_t>(K), {});
  std::int64_t sent = 0;
  std::vector<float> my_vectors;
  std::vector<std::vector<float>> my_states;
  for (;;) {
    // Rank 0 asks every rank whose rows it has merged for its next chunk.
    std::vector<std::int64_t> want(static_cast<std::size_t>(D), 0);
    if (me == 0) {
      for (int p = 0; p < D; ++p) {
        const Pending& q = pending[static_cast<std::size_t>(p)];
        if (q.empty()) want[p] = std::min(kMergeChunk, totals[p] - q.received);
      }
    }
    const Tensor asked = at_place(want, place_);
    comm_.broadcast(asked, 0, stream());
    want = host_vector<std::int64_t>(asked);
    if (std::all_of(want.begin(), want.end(), [](std::int64_t w) { return w == 0; })) break;
    const std::int64_t mine = want[static_cast<std::size_t>(me)];
    const std::vector<std::int64_t> chunk(rows.begin() + sent, rows.begin() + sent + mine);
    read_rows(chunk, my_vectors, my_states);
    auto exchange = [&](const auto& local, auto&& received_by_rank, std::int64_t width) {
      using T = typename std::decay_t<decltype(local)>::value_type;
      std::vector<std::int64_t> send_counts(static_cast<std::size_t>(D), 0),
          recv_counts = send_counts;
      send_counts[0] = mine * width;
      std::int64_t total = 0;
      if (me == 0) {
        for (int p = 0; p < D; ++p)
          total += (recv_counts[static_cast<std::size_t>(p)] =
                        want[static_cast<std::size_t>(p)] * width);
      }
      const Tensor send = at_place(local, place_);
      const Tensor recv = Tensor::empty({std::max<std::int64_t>(total, 1)}, dtype_of<T>(), place_);
      comm_.all_to_all_v(send, send_counts, recv, recv_counts, stream());
      if (stream() != nullptr) synchronize_stream(stream());
      if (me != 0 || total == 0) return;
      const std::vector<T> all = host_vector<T>(recv.slice(0, 0, total));
      std::int64_t offset = 0;
      for (int p = 0; p < D; ++p) {
        const std::int64_t n = want[static_cast<std::size_t>(p)] * width;
        auto& to = received_by_rank(p);
        to.insert(to.end(), all.begin() + offset, all.begin() + offset + n);
        offset += n;
      }
    };
    // Every rank whose buffer rank 0 emptied starts a new one.
    if (me == 0) {
      for (int p = 0; p < D; ++p) {
        Pending& q = pending[static_cast<std::size_t>(p)];
        if (want[static_cast<std::size_t>(p)] == 0) continue;
        q.keys.clear();
        q.slots.clear();
        q.vectors.clear();
        q.states.assign(static_cast<std::size_t>(K), {});
        q.next = 0;
        q.received += want[static_cast<std::size_t>(p)];
      }
    }
    const std::vector<std::int64_t> my_keys(keys.begin() + sent, keys.begin() + sent + mine);
    exchange(
        my_keys, [&](int p) -> auto& { return pending[static_cast<std::size_t>(p)].keys; }, 1);
    if (with_slots) {
      const std::vector<std::int64_t> my_slots(slots.begin() + sent, slots.begin() + sent + mine);
      exchange(
          my_slots, [&](int p) -> auto& { return pending[static_cast<std::size_t>(p)].slots; }, 1);
    }
    exchange(
        my_vectors, [&](int p) -> auto& { return pending[static_cast<std::size_t>(p)].vectors; },
        V);
    for (int k = 0; k < K; ++k) {
      exchange(
          my_states[static_cast<std::size_t>(k)],
          [&](int p) -> auto& {
            return pending[static_cast<std::size_t>(p)].states[static_cast<std::size_t>(k)];
          },
          V);
    }
    sent += mine;
    if (me != 0) continue;
    // Merge while every rank that still has rows has some here.
    std::vector<std::int64_t> out_keys, out_slots;
    std::vector<float> out_vectors;
    std::vector<std::vector<float>> out_states(static_cast<std::size_t>(K));
    for (;;) {
      int best = -1;
      bool starved = false;
      for (int p = 0; p < D; ++p) {
        const Pending& q = pending[static_cast<std::size_t>(p)];
        if (q.empty()) {
          starved = starved || q.received < totals[static_cast<std::size_t>(p)];
          continue;
        }
        if (best < 0) {
          best = p;
          continue;
        }
        const Pending& b = pending[static_cast<std::size_t>(best)];
        const std::int64_t kq = q.keys[q.next], kb = b.keys[b.next];
        if (kq < kb || (kq == kb && with_slots && q.slots[q.next] < b.slots[b.next])) best = p;
      }
      if (starved || best < 0) break;
      Pending& q = pending[static_cast<std::size_t>(best)];
      const std::size_t i = q.next++;
      out_keys.push_back(q.keys[i]);
      if (with_slots) out_slots.push_back(q.slots[i]);
      out_vectors.insert(out_vectors.end(), q.vectors.begin() + i * V,
                         q.vectors.begin() + (i + 1) * V);
      for (int k = 0; k < K; ++k) {
        auto& from = q.states[static_cast<std::size_t>(k)];
        out_states[static_cast<std::size_t>(k)].insert(
            out_states[static_cast<std::size_t>(k)].end(), from.begin() + i * V,
            from.begin() + (i + 1) * V);
      }
    }
    if (sink && !out_keys.empty()) {
      std::vector<const float*> state_ptrs;
      for (const auto& st : out_states)
        state_ptrs.push_back(st.data());
      sink(static_cast<std::int64_t>(out_keys.size()), out_keys.data(),
           with_slots ? out_slots.data() : nullptr, out_vectors.data(), state_ptrs);
    }
  }
}

namespace {

// Keeps the rows in memory (snapshot()).
struct MemorySink {
  EmbeddingSnapshot& snap;
  std::int64_t V;
  MemorySink(EmbeddingSnapshot& s, std::int64_t vec_size, int states) : snap(s), V(vec_size) {
    snap.states.assign(static_cast<std::size_t>(states), {});
  }
  void take(std::int64_t n, const std::int64_t* keys, const std::int64_t* slots,
            const float* vectors, const std::vector<const float*>& states) {
    snap.keys.insert(snap.keys.end(), keys, keys + n);
    if (slots != nullptr) snap.slots.insert(snap.slots.end(), slots, slots + n);
    snap.vectors.insert(snap.vectors.end(), vectors, vectors + n * V);
    for (std::size_t k = 0; k < states.size(); ++k)
      snap.states[k].insert(snap.states[k].end(), states[k], states[k] + n * V);
  }
};

// Writes the files of a saved embedding as the rows come (save()); after an error it keeps the
// message and takes the remaining rows without writing them, so that the ranks finish together.
struct FileSink {
  fs::path dir;
  DType key_dtype;
  std::int64_t V;
  std::vector<std::string> state_names;
  std::ofstream keys, vectors, slot_ids;
  std::vector<std::ofstream> states;
  std::int64_t rows = 0;
  std::string failure;

  FileSink(fs::path d, DType key_type, std::int64_t vec_size, std::vector<std::string> names,
           bool with_states, bool with_slots)
      : dir(std::move(d)), key_dtype(key_type), V(vec_size) {
    try {
      fs::create_directories(dir);
      open(keys, "keys");
      open(vectors, "vectors");
      if (with_slots) open(slot_ids, "slot_ids");
      if (with_states) {
        state_names = std::move(names);
        states.resize(state_names.size());
        for (std::size_t k = 0; k < state_names.size(); ++k)
          open(states[k], state_names[k]);
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  void open(std::ofstream& out, const std::string& name) {
    out.open(dir / name, std::ios::binary | std::ios::trunc);
    if (!out) EMBER_THROW("cannot create ", (dir / name).string());
  }
  void take(std::int64_t n, const std::int64_t* k, const std::int64_t* slots, const float* v,
            const std::vector<const float*>& st) {
    if (!failure.empty()) return;
    try {
      const auto count = static_cast<std::size_t>(n);
      if (key_dtype == DType::U32) {
        const std::vector<std::uint32_t> narrow(k, k + n);
        write_bytes(keys, dir / "keys", narrow.data(), count * sizeof(std::uint32_t));
      } else {
        write_bytes(keys, dir / "keys", k, count * sizeof(std::int64_t));
      }
      write_bytes(vectors, dir / "vectors", v, count * static_cast<std::size_t>(V) * sizeof(float));
      if (slots != nullptr && slot_ids.is_open()) {
        write_bytes(slot_ids, dir / "slot_ids", slots, count * sizeof(std::int64_t));
      }
      for (std::size_t i = 0; i < states.size(); ++i) {
        write_bytes(states[i], dir / state_names[i], st[i],
                    count * static_cast<std::size_t>(V) * sizeof(float));
      }
      rows += n;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  void close(bool with_slots, std::int64_t step, bool with_states) {
    if (!failure.empty()) return;
    try {
      // An empty LocalizedSlot model still has its (empty) slot_ids file.
      (void)with_slots;
      if (with_states) {
        std::ofstream out(dir / "optimizer_step", std::ios::binary | std::ios::trunc);
        if (!out) EMBER_THROW("cannot create ", (dir / "optimizer_step").string());
        write_bytes(out, dir / "optimizer_step", &step, sizeof step);
        out.flush();
        if (!out) EMBER_THROW("writing ", (dir / "optimizer_step").string(), " failed");
      }
      for (std::ofstream* out : {&keys, &vectors, &slot_ids}) {
        if (!out->is_open()) continue;
        out->flush();
        if (!*out) EMBER_THROW("writing the files of ", dir.string(), " failed (disk full?)");
        out->close();
      }
      for (auto& out : states) {
        out.flush();
        if (!out) EMBER_THROW("writing the files of ", dir.string(), " failed (disk full?)");
        out.close();
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
};

}  // namespace

EmbeddingSnapshot SparseEmbedding::snapshot() {
  PlaceGuard guard(place_);
  refuse_while_inserted_ahead("a snapshot of the table");
  check_deferred_errors();
  settle_prepared();
  bring_rows_current();
  // HybridSparseEmbedding writes the one-hot layout: its frequent rows go to their owners first.
  if (hybrid_) frequent_rows_to_owners();
  EmbeddingSnapshot snap;
  MemorySink sink(snap, config_.vec_size, optimizer_.state_count());
  RowSink take;
  if (comm_.rank() == 0) take = [&](auto... args) { sink.take(args...); };
  stream_model(take);
  snap.step = step_;
  return snap;
}

std::string SparseEmbedding::write_shard(const fs::path& dir, bool with_optimizer_states,
                                         std::int64_t& rows_written) {
  const bool with_slots = row_slot_.defined();
  FileSink sink(dir, config_.key_dtype, config_.vec_size, state_names(), with_optimizer_states,
                with_slots);
  if (!sink.failure.empty()) return sink.failure;
  try {
    std::vector<std::int64_t> rows, keys, slots;
    local_rows_in_key_order(rows, keys, slots);
    std::vector<float> vectors;
    std::vector<std::vector<float>> states;
    const auto n = static_cast<std::int64_t>(rows.size());
    for (std::int64_t first = 0; first < n; first += kMergeChunk) {
      const std::int64_t m = std::min(kMergeChunk, n - first);
      read_rows(std::vector<std::int64_t>(rows.begin() + first, rows.begin() + first + m), vectors,
                states);
      std::vector<const float*> state_ptrs;
      for (const auto& st : states)
        state_ptrs.push_back(st.data());
      sink.take(m, keys.data() + first, with_slots ? slots.data() + first : nullptr, vectors.data(),
                state_ptrs);
      if (!sink.failure.empty()) return sink.failure;
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  sink.close(with_slots, step_, with_optimizer_states);
  rows_written = sink.rows;
  return sink.failure;
}

int SparseEmbedding::first_failed_rank(bool failed) {
  const int D = comm_.size();
  const Tensor status = Tensor::from_vector(
      std::vector<std::int64_t>{failed ? std::int64_t{comm_.rank()} : std::int64_t{D}}, place_);
  comm_.all_reduce(status, distributed::ReduceOp::Min, stream());
  if (stream() != nullptr) synchronize_stream(stream());
  return static_cast<int>(host_vector<std::int64_t>(status)[0]);
}

std::int64_t SparseEmbedding::save(const fs::path& dir, bool with_optimizer_states) {
  PlaceGuard guard(place_);
  refuse_while_inserted_ahead("a save");
  check_deferred_errors();
  settle_prepared();
  bring_rows_current();
  // HybridSparseEmbedding writes the one-hot layout: its frequent rows go to their owners first,
  // so that every row is written once, by its owner.
  if (hybrid_) frequent_rows_to_owners();
  const int D = comm_.size(), me = comm_.rank();
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  // Rank 0 names and creates the temporary directory; every rank learns its name.
  std::string failure;
  std::vector<std::int64_t> name{0, 0};
  if (me == 0) {
    name = {static_cast<std::int64_t>(::getpid()),
            static_cast<std::int64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  }
  if (D > 1) {
    const Tensor named = Tensor::from_vector(name, place_);
    comm_.broadcast(named, 0, stream());
    if (stream() != nullptr) synchronize_stream(stream());
    name = host_vector<std::int64_t>(named);
  }
  const fs::path tmp = parent / cat(dir.filename().string(), ".tmp-", name[0], "-", name[1]);
  if (me == 0) {
    try {
      fs::remove_all(tmp);
      fs::create_directories(tmp);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  int failed = first_failed_rank(!failure.empty());
  // One rank: the files themselves. Several: each rank writes its own rows into rank_<r>/, in
  // parallel; no row passes through another rank.
  std::int64_t rows_written = 0;
  if (failed == D) {
    failure =
        write_shard(D == 1 ? tmp : tmp / cat("rank_", me), with_optimizer_states, rows_written);
    failed = first_failed_rank(!failure.empty());
  }
  if (me == 0) {
    if (failed == D) {
      try {
        // Swap directories: the previous model stays whole until the new one is complete.
        const fs::path previous = parent / (dir.filename().string() + ".previous");
        fs::remove_all(previous);
        if (fs::exists(dir)) fs::rename(dir, previous);
        fs::rename(tmp, dir);
        fs::remove_all(previous);
        EMBER_LOG_DEBUG("{}: saved to {}", where(), dir.string());
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    if (failed != D || !failure.empty()) {
      std::error_code ignored;
      fs::remove_all(tmp, ignored);
    }
  }
  // Every rank learns whether the rename succeeded, so no rank hangs or returns early.
  if (failed == D) failed = first_failed_rank(!failure.empty());
  if (failed != D) {
    if (!failure.empty()) EMBER_THROW(where(), ": saving to ", dir.string(), " failed: ", failure);
    EMBER_THROW(where(), ": saving to ", dir.string(), " failed on rank ", failed,
                " (that rank reports why)");
  }
  return rows_written;
}

}  // namespace ember::embedding
