#include "embedding_reference_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <unordered_map>

#include "ember/core/copy.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding::testing {

namespace {

// Forwards every collective to another communicator and counts them: the driver checks which
// calls of the layer talk to other ranks.
class CountingCommunicator final : public distributed::Communicator {
 public:
  explicit CountingCommunicator(distributed::Communicator& inner) : inner_(inner) {}
  std::int64_t calls() const { return calls_; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Place place() const override { return inner_.place(); }
  const char* backend() const override { return inner_.backend(); }
  void all_reduce(const Tensor& inout, distributed::ReduceOp op, StreamHandle stream) override {
    ++calls_;
    inner_.all_reduce(inout, op, stream);
  }
  void reduce_scatter(const Tensor& in, const Tensor& out, distributed::ReduceOp op,
                      StreamHandle stream) override {
    ++calls_;
    inner_.reduce_scatter(in, out, op, stream);
  }
  void all_gather(const Tensor& in, const Tensor& out, StreamHandle stream) override {
    ++calls_;
    inner_.all_gather(in, out, stream);
  }
  void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                    const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                    StreamHandle stream) override {
    ++calls_;
    inner_.all_to_all_v(send, send_counts, recv, recv_counts, stream);
  }
  void broadcast(const Tensor& inout, int root, StreamHandle stream) override {
    ++calls_;
    inner_.broadcast(inout, root, stream);
  }
  void barrier() override {
    ++calls_;
    inner_.barrier();
  }
  void abort(const std::string& why) override { inner_.abort(why); }

 private:
  distributed::Communicator& inner_;
  std::int64_t calls_ = 0;
};

}  // namespace

void PrintTo(const Case& c, std::ostream* os) {
  *os << embedding_type_name(c.type) << " with " << c.ranks << " rank(s)";
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const char* t = info.param.type == EmbeddingType::DistributedSlotHash ? "Distributed"
                  : info.param.type == EmbeddingType::LocalizedSlotHash ? "LocalizedHash"
                  : info.param.type == EmbeddingType::Hybrid            ? "Hybrid"
                                                                        : "OneHot";
  return std::string(t) + "_D" + std::to_string(info.param.ranks);
}

HostBatch random_batch(std::int64_t batch, const std::vector<std::int64_t>& slot_sizes, int max_nnz,
                       std::mt19937_64& rng) {
  HostBatch h;
  h.batch = batch;
  h.offsets.push_back(0);
  std::vector<std::int64_t> begin(slot_sizes.size() + 1, 0);
  for (std::size_t s = 0; s < slot_sizes.size(); ++s)
    begin[s + 1] = begin[s] + slot_sizes[s];
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::size_t s = 0; s < slot_sizes.size(); ++s) {
      const int nnz = static_cast<int>(rng() % (max_nnz + 1));
      for (int k = 0; k < nnz; ++k) {
        h.keys.push_back(begin[s] + static_cast<std::int64_t>(rng() % slot_sizes[s]));
      }
      h.offsets.push_back(static_cast<std::int64_t>(h.keys.size()));
    }
  }
  return h;
}

std::vector<float> random_grad(std::int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& x : g)
    x = dist(rng);
  return g;
}

optim::OptimizerConfig test_optimizer(optim::OptimizerType type, optim::UpdateType update,
                                      int warmup_steps) {
  optim::OptimizerConfig o;
  o.type = type;
  o.update_type = update;
  o.schedule.base_lr = type == optim::OptimizerType::Adam ? 0.05f : 0.3f;
  o.schedule.warmup_steps = warmup_steps;
  o.momentum_factor = 0.8f;
  o.initial_accu_value = 0.1f;
  o.epsilon = 1e-6f;
  o.rmsprop_beta = 0.8f;
  o.ftrl_beta = 0.5f;
  o.lambda1 = 0.001f;
  o.lambda2 = 0.01f;
  return o;
}

std::vector<std::int64_t> most_used_keys(const Problem& p, std::size_t count) {
  std::map<std::int64_t, std::int64_t> uses;
  for (const auto& b : p.batches) {
    for (std::int64_t k : b.keys)
      ++uses[k];
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  for (const auto& [k, n] : uses)
    order.emplace_back(-n, k);
  std::sort(order.begin(), order.end());
  std::vector<std::int64_t> keys;
  for (std::size_t i = 0; i < std::min(count, order.size()); ++i)
    keys.push_back(order[i].second);
  std::sort(keys.begin(), keys.end());
  return keys;
}

CsrTensor to_csr(const HostBatch& h, DType key_dtype, Place place) {
  Tensor keys =
      Tensor::from_vector(h.keys.empty() ? std::vector<std::int64_t>{0} : h.keys).to(key_dtype);
  return CsrTensor(Tensor::from_vector(h.offsets, place), keys.to(place),
                   static_cast<std::int64_t>(h.keys.size()));
}

namespace {

// Queues long writes on the compute stream to blocks that go back to its pool at once (the
// caching allocator hands them to the stream's next requests while the writes still run), and
// returns an event recorded before them: "the keys are ready" (Problem::busy_compute).
Event queue_busy_work(Place place) {
  PlaceGuard guard(place);
  const StreamHandle s = current_stream(place.device());
  Event ready = Event::create(place.device());
  ready.record(s);
  std::vector<Tensor> blocks;
  for (int i = 0; i < 16; ++i)  // 1 MiB: the small pool
    blocks.push_back(Tensor::empty({1 << 18}, DType::F32, place));
  for (int i = 0; i < 4; ++i)  // 16 MiB: the large pool
    blocks.push_back(Tensor::empty({1 << 22}, DType::F32, place));
  for (int pass = 0; pass < 100; ++pass) {
    for (const Tensor& b : blocks)
      ops::fill(b, 0.0, s);
  }
  return ready;
}

}  // namespace

// The vectors forward_gather's codes name ([bags, vec_size], f32): table rows as stored, zeros,
// or the rows of `out` it pooled (each its own bag's, checked).
std::vector<float> gathered_vectors(const SparseEmbedding& emb, const Tensor& codes,
                                    const Tensor& out) {
  const std::int64_t V = emb.config().vec_size;
  const std::vector<std::int32_t> code = codes.to(Place::host()).to_vector<std::int32_t>();
  const std::vector<float> pooled = out.to(Place::host()).to(DType::F32).to_vector<float>();
  const Tensor stored = Tensor::empty({emb.capacity(), V}, emb.config().value_dtype);
  copy_bytes(stored.data(), Place::host(), emb.table_data(), emb.place(),
             static_cast<std::size_t>(stored.numel()) * dtype_size(stored.dtype()));
  const std::vector<float> table = stored.to(DType::F32).to_vector<float>();
  std::vector<float> vectors(code.size() * static_cast<std::size_t>(V), 0.0f);
  for (std::size_t bag = 0; bag < code.size(); ++bag) {
    const float* from = nullptr;
    if (code[bag] >= 0) {
      from = &table[static_cast<std::size_t>(code[bag] * V)];
    } else if (code[bag] != kGatherZeroRow) {
      EXPECT_EQ(gather_dense_row(code[bag]), static_cast<std::int64_t>(bag));
      from = &pooled[bag * static_cast<std::size_t>(V)];
    }
    if (from != nullptr) std::copy(from, from + V, vectors.begin() + bag * V);
  }
  return vectors;
}

EmbeddingConfig small_config(EmbeddingType type, Combiner combiner, DType key_dtype,
                             std::int64_t vec_size, std::uint64_t seed,
                             const std::vector<std::int64_t>& slot_sizes, std::int64_t rows) {
  EmbeddingConfig c;
  c.name = "emb";
  c.type = type;
  c.vec_size = vec_size;
  c.combiner = combiner;
  c.slot_num = static_cast<std::int64_t>(slot_sizes.size());
  c.max_vocabulary_size_per_gpu = rows;
  if (type != EmbeddingType::DistributedSlotHash) c.slot_size_array = slot_sizes;
  c.key_dtype = key_dtype;
  c.seed = seed;
  return c;
}

RunResult run_ranks(const Problem& problem, int D, bool cuda) {
  const auto& c = problem.config;
  const std::int64_t S = c.slot_num, V = c.vec_size;
  std::vector<distributed::CommunicatorPtr> comms;
  if (cuda) {
    std::vector<int> devices(D);
    for (int d = 0; d < D; ++d)
      devices[d] = d;
    comms = distributed::make_nccl_communicators(devices);
  } else {
    comms = distributed::make_in_process_communicators(D, 60.0);
  }
  const std::size_t steps = problem.batches.size();
  RunResult result;
  result.outputs.resize(steps);
  result.rows_in_use_per_step.assign(steps, 0);
  for (std::size_t t = 0; t < steps; ++t) {
    result.outputs[t].assign(problem.batches[t].batch * S * V, 0.0f);
  }
  std::vector<std::exception_ptr> errors(D);
  std::vector<std::vector<std::int64_t>> rows(D, std::vector<std::int64_t>(steps));
  result.cache_stats.resize(D);
  result.forwards_prepared_ahead.resize(D);
  result.collectives_in_backward.assign(D, 0);
  result.collectives_in_update.assign(D, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < D; ++r) {
    threads.emplace_back([&, r] {
      try {
        CountingCommunicator comm(*comms[r]);
        SparseEmbedding emb(c, problem.optimizer, comm);
        // The same tensors for a batch's prefetch and its forward, as the pipeline hands out.
        std::vector<CsrTensor> csr;
        for (const HostBatch& h : problem.batches)
          csr.push_back(to_csr(h, c.key_dtype, comm.place()));
        if (!problem.load_before.empty()) emb.load(problem.load_before);
        for (std::size_t t = problem.first_step; t < steps; ++t) {
          const HostBatch& h = problem.batches[t];
          const std::int64_t Bl = h.batch / D, first = r * Bl;
          Tensor out;
          std::vector<float> o;
          if (problem.gather && problem.training[t]) {
            out = Tensor::empty({Bl, S, V}, problem.out_dtype, comm.place());
            const Tensor codes = Tensor::empty({Bl * S}, DType::I32, comm.place());
            emb.forward_gather(csr[t], first, Bl, codes, out, true);
            o = gathered_vectors(emb, codes, out);
          } else {
            if (problem.out_dtype == DType::F32) {
              out = emb.forward(csr[t], first, Bl, problem.training[t]);
            } else {
              out = Tensor::empty({Bl, S, V}, problem.out_dtype, comm.place());
              emb.forward_into(csr[t], first, Bl, out, problem.training[t]);
            }
            o = out.to(Place::host()).to(DType::F32).to_vector<float>();
          }
          std::copy(o.begin(), o.end(), result.outputs[t].begin() + first * S * V);
          if (problem.training[t]) {
            const std::vector<float> g(problem.grads[t].begin() + first * S * V,
                                       problem.grads[t].begin() + (first + Bl) * S * V);
            const std::int64_t before_backward = comm.calls();
            emb.backward(
                Tensor::from_vector(g, Shape{Bl, S, V}).to(problem.grad_dtype).to(comm.place()));
            const std::int64_t before_update = comm.calls();
            emb.update(problem.loss_scaler);
            result.collectives_in_backward[r] += before_update - before_backward;
            result.collectives_in_update[r] += comm.calls() - before_update;
            rows[r][t] = emb.rows_in_use();
            // The next training batch, prepared while the session would run its step (a hash
            // table, which inserts its keys ahead, only where no evaluation comes between).
            std::size_t next = t + 1;
            while (next < steps && !problem.training[next])
              ++next;
            if (problem.prefetch && next < steps && (next == t + 1 || !emb.inserts_ahead())) {
              const std::int64_t nb = problem.batches[next].batch / D;
              if (problem.busy_compute && cuda) {
                const Event ready = queue_busy_work(comm.place());
                emb.prefetch(csr[next], r * nb, nb, &ready);
              } else {
                emb.prefetch(csr[next], r * nb, nb);
              }
            }
          } else {
            rows[r][t] = emb.rows_in_use();
          }
        }
        if (!problem.save_after.empty()) emb.save(problem.save_after);
        if (auto stats = emb.cache_stats()) result.cache_stats[r] = *stats;
        result.forwards_prepared_ahead[r] = emb.forwards_prepared_ahead();
        EmbeddingSnapshot snap = emb.snapshot();
        if (r == 0) result.snapshot = std::move(snap);
      } catch (const std::exception& e) {
        errors[r] = std::current_exception();
        comms[r]->abort(e.what());  // the other ranks may wait for this one in a collective
      }
    });
  }
  for (auto& th : threads)
    th.join();
  // The first rank's own error, not another rank's report of the broken group it caused.
  std::exception_ptr first;
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      if (std::string(x.what()).find("communicator group is broken") == std::string::npos) throw;
      if (!first) first = e;
    }
  }
  if (first) std::rethrow_exception(first);
  for (int r = 0; r < D; ++r) {
    for (std::size_t t = 0; t < steps; ++t)
      result.rows_in_use_per_step[t] += rows[r][t];
  }
  return result;
}

RunResult run_reference(const Problem& problem) {
  const auto& c = problem.config;
  const auto& opt = c.optimizer.value_or(problem.optimizer);
  const std::int64_t S = c.slot_num, V = c.vec_size;
  struct Row {
    std::vector<float> w, s0, s1;
  };
  std::map<std::int64_t, Row> table;  // ordered: the snapshot is sorted by key
  // A 16-bit table: values start rounded to nearest, every update is rounded as the layer rounds.
  kernels::Values values;
  values.type = c.value_dtype == DType::F16    ? kernels::ValueType::F16
                : c.value_dtype == DType::BF16 ? kernels::ValueType::BF16
                                               : kernels::ValueType::F32;
  values.rounding =
      c.stochastic_rounding ? kernels::Rounding::Stochastic : kernels::Rounding::Nearest;
  values.seed = kernels::rounding_seed(c.seed);
  auto rounded = [&](float x, std::int64_t step, std::int64_t i, float before) {
    return kernels::with_value_type(values.type, [&](auto tag) {
      using V16 = decltype(tag);
      return static_cast<float>(kernels::UpdateRounding<V16>(values, step)(i, x, before));
    });
  };
  auto new_row = [&](std::int64_t key) {
    Row row;
    row.w.resize(V);
    for (std::int64_t i = 0; i < V; ++i) {
      const float x =
          kernels::initial_value(c.seed, static_cast<std::uint64_t>(key), i, c.init_bound);
      row.w[i] = kernels::with_value_type(
          values.type, [&](auto tag) { return static_cast<float>(decltype(tag)(x)); });
    }
    row.s0.assign(V, opt.initial_state(0));
    row.s1.assign(V, opt.initial_state(1));
    return row;
  };
  if (is_onehot(c.type)) {
    std::int64_t total = 0;
    for (auto s : c.slot_size_array)
      total += s;
    for (std::int64_t k = 0; k < total; ++k)
      table.emplace(k, new_row(k));
  }
  optim::LearningRateSchedule schedule(opt.schedule);
  std::int64_t step = 0;
  RunResult result;
  for (std::size_t t = 0; t < problem.batches.size(); ++t) {
    const HostBatch& h = problem.batches[t];
    const bool training = problem.training[t];
    std::vector<float> out(h.batch * S * V, 0.0f);
    std::map<std::int64_t, std::vector<float>> grad_by_key;
    for (std::int64_t row = 0; row < h.batch * S; ++row) {
      const std::int64_t begin = h.offsets[row], end = h.offsets[row + 1];
      const float scale = c.combiner == Combiner::Mean && end > begin
                              ? 1.0f / static_cast<float>(end - begin)
                              : 1.0f;
      float* o = out.data() + row * V;
      for (std::int64_t e = begin; e < end; ++e) {
        const std::int64_t key = h.keys[e];
        auto it = table.find(key);
        if (it == table.end()) {
          if (!training) continue;  // evaluation reads zeros and inserts nothing
          it = table.emplace(key, new_row(key)).first;
        }
        for (std::int64_t i = 0; i < V; ++i)
          o[i] += it->second.w[i];
      }
      for (std::int64_t i = 0; i < V; ++i)
        o[i] *= scale;
      if (training) {
        for (std::int64_t e = begin; e < end; ++e) {
          auto& g = grad_by_key[h.keys[e]];
          g.resize(V, 0.0f);
          for (std::int64_t i = 0; i < V; ++i)
            g[i] += problem.grads[t][row * V + i] * scale;
        }
      }
    }
    result.outputs.push_back(out);
    if (training) {
      ++step;
      const optim::UpdateStep u =
          optim::make_update_step(opt, schedule.next(), step, problem.loss_scaler);
      for (auto& [key, row] : table) {
        const auto g = grad_by_key.find(key);
        if (g == grad_by_key.end() && opt.update_type == optim::UpdateType::Local) continue;
        for (std::int64_t i = 0; i < V; ++i) {
          const float before = row.w[i];
          optim::apply_update(u, row.w[i], g == grad_by_key.end() ? 0.0f : g->second[i], row.s0[i],
                              row.s1[i]);
          row.w[i] = rounded(row.w[i], step, i, before);
        }
      }
    }
    result.rows_in_use_per_step.push_back(static_cast<std::int64_t>(table.size()));
  }
  auto& snap = result.snapshot;
  snap.step = step;
  snap.states.resize(opt.state_count());
  for (const auto& [key, row] : table) {
    snap.keys.push_back(key);
    snap.vectors.insert(snap.vectors.end(), row.w.begin(), row.w.end());
    if (opt.state_count() > 0)
      snap.states[0].insert(snap.states[0].end(), row.s0.begin(), row.s0.end());
    if (opt.state_count() > 1)
      snap.states[1].insert(snap.states[1].end(), row.s1.begin(), row.s1.end());
  }
  return result;
}

double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::abs(b[i]));
    if (!(e <= worst)) worst = e;  // NaN propagates as a failure
  }
  return worst;
}

void expect_identical_runs(const RunResult& got, const RunResult& want, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (std::size_t t = 0; t < got.outputs.size(); ++t) {
    ASSERT_EQ(got.outputs[t].size(), want.outputs[t].size()) << what << ", step " << t;
    EXPECT_EQ(0, std::memcmp(got.outputs[t].data(), want.outputs[t].data(),
                             got.outputs[t].size() * sizeof(float)))
        << what << ": forward output of step " << t << " differs (max relative error "
        << max_relative_error(got.outputs[t], want.outputs[t]) << ")";
  }
  EXPECT_EQ(got.rows_in_use_per_step, want.rows_in_use_per_step) << what;
  EXPECT_EQ(got.snapshot.keys, want.snapshot.keys) << what << ": keys of the final model";
  EXPECT_EQ(got.snapshot.slots, want.snapshot.slots) << what << ": slots of the final model";
  ASSERT_EQ(got.snapshot.vectors.size(), want.snapshot.vectors.size()) << what;
  EXPECT_EQ(0, std::memcmp(got.snapshot.vectors.data(), want.snapshot.vectors.data(),
                           got.snapshot.vectors.size() * sizeof(float)))
      << what << ": final vectors differ (max relative error "
      << max_relative_error(got.snapshot.vectors, want.snapshot.vectors) << ")";
  ASSERT_EQ(got.snapshot.states.size(), want.snapshot.states.size()) << what;
  for (std::size_t k = 0; k < got.snapshot.states.size(); ++k) {
    ASSERT_EQ(got.snapshot.states[k].size(), want.snapshot.states[k].size()) << what;
    EXPECT_EQ(0, std::memcmp(got.snapshot.states[k].data(), want.snapshot.states[k].data(),
                             got.snapshot.states[k].size() * sizeof(float)))
        << what << ": optimizer state " << k << " differs";
  }
  EXPECT_EQ(got.snapshot.step, want.snapshot.step) << what;
}

void expect_same_run(const RunResult& got, const RunResult& want, double tolerance,
                     const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (std::size_t t = 0; t < got.outputs.size(); ++t) {
    EXPECT_LE(max_relative_error(got.outputs[t], want.outputs[t]), tolerance)
        << what << ": forward output of step " << t;
  }
  EXPECT_EQ(got.snapshot.keys, want.snapshot.keys) << what << ": keys of the final model";
  EXPECT_LE(max_relative_error(got.snapshot.vectors, want.snapshot.vectors), tolerance)
      << what << ": final vectors";
  ASSERT_EQ(got.snapshot.states.size(), want.snapshot.states.size()) << what;
  for (std::size_t k = 0; k < got.snapshot.states.size(); ++k) {
    EXPECT_LE(max_relative_error(got.snapshot.states[k], want.snapshot.states[k]), tolerance)
        << what << ": optimizer state " << k;
  }
  EXPECT_EQ(got.snapshot.step, want.snapshot.step) << what;
}

UpdateBatch random_update_batch(const std::vector<std::int64_t>& lengths, std::int64_t absent,
                                std::int64_t bags, std::int64_t vec_size, std::mt19937_64& rng) {
  UpdateBatch b;
  b.rows_in_table = static_cast<std::int64_t>(lengths.size());
  b.bags = bags;
  b.vec_size = vec_size;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    b.rows.insert(b.rows.end(), lengths[r], static_cast<std::int64_t>(r));
  b.rows.insert(b.rows.end(), absent, -1);
  std::shuffle(b.rows.begin(), b.rows.end(), rng);
  b.entry_bag.resize(b.rows.size());
  for (auto& bag : b.entry_bag)
    bag = static_cast<std::int64_t>(rng() % bags);
  b.scale.resize(bags);
  for (auto& s : b.scale)
    s = rng() % 3 == 0 ? 1.0f : 1.0f / static_cast<float>(1 + rng() % 9);
  b.grad = random_grad(bags * vec_size, rng);
  return b;
}

SegmentedBatch segment_batch(const UpdateBatch& b, Place place, StreamHandle stream) {
  const auto n = static_cast<std::int64_t>(b.rows.size());
  const Tensor rows = Tensor::from_vector(b.rows, place);
  const Tensor entry_bag = Tensor::from_vector(b.entry_bag, place);
  SegmentedBatch s;
  s.entries = n;
  s.sorted_bags = Tensor::empty({std::max<std::int64_t>(n, 1)}, DType::I32, place);
  s.unique_rows = Tensor::empty({std::max<std::int64_t>(n, 1)}, DType::I64, place);
  s.offsets = Tensor::empty({n + 1}, DType::I64, place);
  s.count = Tensor::empty({1}, DType::I64, place);
  kernels::on(place).segments(rows.data<std::int64_t>(), entry_bag.data<std::int64_t>(), n,
                              b.rows_in_table, s.sorted_bags.data<std::int32_t>(),
                              s.unique_rows.data<std::int64_t>(), s.offsets.data<std::int64_t>(),
                              s.count.data<std::int64_t>(), stream);
  // rows and entry_bag go with this scope: the segments must be done with them.
  if (stream != nullptr) synchronize_stream(stream);
  return s;
}

std::vector<float> chunked_gradient_sums(const UpdateBatch& b) {
  const std::int64_t V = b.vec_size;
  std::vector<float> g(b.rows_in_table * V, 0.0f), chunk(V);
  std::vector<std::vector<std::int64_t>> entries(b.rows_in_table);
  for (std::size_t e = 0; e < b.rows.size(); ++e) {
    if (b.rows[e] >= 0) entries[b.rows[e]].push_back(static_cast<std::int64_t>(e));
  }
  for (std::int64_t r = 0; r < b.rows_in_table; ++r) {
    const auto& list = entries[r];
    for (std::size_t first = 0; first < list.size(); first += kernels::kGradientChunk) {
      std::fill(chunk.begin(), chunk.end(), 0.0f);
      const std::size_t last =
          std::min(list.size(), first + static_cast<std::size_t>(kernels::kGradientChunk));
      for (std::size_t i = first; i < last; ++i) {
        const std::int64_t bag = b.entry_bag[list[i]];
        for (std::int64_t c = 0; c < V; ++c)
          chunk[c] += b.grad[bag * V + c] * b.scale[bag];
      }
      for (std::int64_t c = 0; c < V; ++c)
        g[r * V + c] += chunk[c];
    }
  }
  return g;
}

void exact_gradient_sums(const UpdateBatch& b, std::vector<double>& sum,
                         std::vector<double>& magnitude) {
  const std::int64_t V = b.vec_size;
  sum.assign(b.rows_in_table * V, 0.0);
  magnitude.assign(b.rows_in_table * V, 0.0);
  for (std::size_t e = 0; e < b.rows.size(); ++e) {
    if (b.rows[e] < 0) continue;
    const std::int64_t bag = b.entry_bag[e];
    for (std::int64_t c = 0; c < V; ++c) {
      const double x = static_cast<double>(b.grad[bag * V + c]) * b.scale[bag];
      sum[b.rows[e] * V + c] += x;
      magnitude[b.rows[e] * V + c] += std::abs(x);
    }
  }
}

namespace {
template <class Key>
void expect_key_steps_set(const kernels::KeyKernels<Key>& k, const char* key) {
  EXPECT_NE(k.select_local, nullptr) << key;
  EXPECT_NE(k.onehot_rows, nullptr) << key;
  EXPECT_NE(k.init_rows, nullptr) << key;
  EXPECT_NE(k.init_new_rows, nullptr) << key;
  EXPECT_NE(k.init_rows_at, nullptr) << key;
}
}  // namespace

void expect_every_step_set(const kernels::KernelTable& table) {
  expect_key_steps_set(table.keys<std::uint32_t>(), "u32 keys");
  expect_key_steps_set(table.keys<std::int64_t>(), "i64 keys");
  EXPECT_NE(table.pool, nullptr);
  EXPECT_NE(table.segments, nullptr);
  EXPECT_NE(table.catch_up_rows, nullptr);
  EXPECT_NE(table.update_rows, nullptr);
  EXPECT_NE(table.update_untouched, nullptr);
  EXPECT_NE(table.gather_rows, nullptr);
  EXPECT_NE(table.scatter_rows, nullptr);
  EXPECT_NE(table.scatter_values, nullptr);
  EXPECT_NE(table.fill_steps, nullptr);
  EXPECT_NE(table.record_row_slots, nullptr);
  EXPECT_NE(table.move_rows, nullptr);
  EXPECT_NE(table.map_rows, nullptr);
  EXPECT_NE(table.replay_steps, nullptr);
}

}  // namespace ember::embedding::testing
