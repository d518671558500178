// Embedding benchmarks (docs/performance.md, "Sparse embeddings"):
//   (a) hash table find / insert-or-find throughput at 2^27 slots, load 0.5 and 0.75, u32 and
//       i64 keys, present and absent keys, against the bandwidth bound (key insertion only: no
//       embedding vector is touched); then, apart, starting 2^22 new dim-128 rows;
//   (b) a DLRM-shaped embedding step (26 Criteo-Kaggle tables, dim 128, batch 65536, power-law
//       keys, pooling 1 and 8): forward, backward + update (SGD, AdaGrad), the whole step, in
//       samples/s and effective GB/s against the device copy bandwidth measured in the same run,
//       and PyTorch's nn.EmbeddingBag (sparse gradients) on the same shapes (torch_embedding.py);
//   (c) the one-hot layer of configs/dlrm_criteo_kaggle.json (the same 26 tables as one-hot
//       slots, 23.8 M rows): its training forward written into an f32 or f16 network input and
//       its backward + update from that dtype's gradient, f32 and f16 tables, in ms and GB/s;
//   (d) one entry per bag (one-hot slots, the hybrid's pooling): the short-bag kernel with and
//       without offsets against pool8, same rows, a table in L2 and one far larger;
//   (e) the hybrid's frequent rows' gradient sums on one of 2 ranks (datagen's keys, the traffic
//       rule's frequent set): the update kernels that sum a rank's 1.7 M entries into the
//       frequent rows, from an f16 and an f32 gradient, in ms and GB/s;
//   (f) narrow rows: the Adam update of DeepFM's, Wide&Deep's and DCN's tables (widths 11, 16
//       and 1, 26 slots of 2000 ids, batch 65536, f16 gradient), in ms and GB/s.
//
// Usage: bench_embedding            (GPU: the full run, SUMMARY lines last)
//        bench_embedding --quick    (CPU: tiny sizes, checks the code paths in seconds)
//        bench_embedding --no-torch (GPU without the PyTorch peer)
//        bench_embedding --only c,d,e (GPU: those sections alone; --short-bags is --only d)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ember/core/caching_allocators.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/hash_table.hpp"
#include "ember/embedding/hash_table_slots.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/random.hpp"

namespace {

using namespace ember;
using namespace ember::embedding;

// The 26 categorical cardinalities of the Criteo Kaggle (Display Advertising Challenge) day set,
// as DLRM's preprocessing counts them (dataset.npz "counts"); taken from the public repository
// real-zhangzhe/wukong, exp/train_wukong_on_criteo_kaggle_dataset.py (NUM_SPARSE_EMBS), which
// lists the same figures as Facebook's DLRM for that data set.
const std::vector<std::int64_t> kCriteoKaggleSizes = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};

struct Summary {
  std::string area, metric, value, target, met;
};
std::vector<Summary> summaries;

std::string fmt_num(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void summary(const std::string& metric, double value, int digits, const std::string& target,
             const char* met) {
  if (!std::isfinite(value)) {
    // Never a silent "nan": a figure that could not be measured fails its line.
    summaries.push_back({"embedding", metric, "FAILED (not measured)", target, "no"});
    return;
  }
  summaries.push_back({"embedding", metric, fmt_num(value, digits), target, met});
}

// A line whose figure could not be measured, with the reason.
void summary_failed(const std::string& metric, const std::string& why, const std::string& target) {
  std::string text = why;
  std::replace(text.begin(), text.end(), '|', '/');  // the SUMMARY line's separator
  summaries.push_back({"embedding", metric, "FAILED (" + text + ")", target, "no"});
}

// Median time in ms of `fn` over `reps` runs after `warmup`, timed with events on the CUDA
// device (or the host clock on the CPU).
double time_ms(bool cuda, int device, int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i)
    fn();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    if (cuda) {
      const StreamHandle s = current_stream(device);
      Event start = Event::create(device, true), stop = Event::create(device, true);
      synchronize_stream(s);
      start.record(s);
      fn();
      stop.record(s);
      stop.synchronize();
      times.push_back(Event::elapsed_ms(start, stop));
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Device-to-device copy bandwidth, counting bytes read plus bytes written.
double copy_bandwidth_gbs(int device) {
  const std::size_t bytes = std::size_t{1} << 30;
  Tensor a = Tensor::empty({static_cast<std::int64_t>(bytes / 4)}, DType::F32, Place::cuda(device));
  Tensor b = Tensor::empty({static_cast<std::int64_t>(bytes / 4)}, DType::F32, Place::cuda(device));
  const double ms = time_ms(true, device, 2, 10, [&] {
    copy_bytes(b.data(), b.place(), a.data(), a.place(), bytes, current_stream(device));
  });
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

// ---- (a) hash table ----------------------------------------------------------------------------

template <class Key>
std::vector<Key> unique_keys(std::int64_t first, std::int64_t n) {
  // hash_key is a bijection on the key type's bits, so distinct counters give distinct keys.
  std::vector<Key> keys(n);
  for (std::int64_t i = 0; i < n; ++i) {
    Key k = static_cast<Key>(hash_key(static_cast<Key>(first + i)));
    if (k == empty_key<Key>()) k = static_cast<Key>(0);  // one key in 2^32 at most
    keys[i] = k;
  }
  return keys;
}

void bench_hash_table(bool cuda, int device, std::int64_t slot_count, double copy_gbs) {
  const Place place = cuda ? Place::cuda(device) : Place::host();
  std::printf("\n(a) hash table: %lld slots on %s\n", static_cast<long long>(slot_count),
              place.to_string().c_str());
  std::printf("%-5s %-5s %-14s %12s %10s %14s\n", "key", "load", "operation", "G keys/s", "ms",
              "of bound");
  for (DType dtype : {DType::U32, DType::I64}) {
    for (double load : {0.5, 0.75}) {
      const auto n = static_cast<std::int64_t>(load * slot_count);
      Tensor present, absent;
      if (dtype == DType::U32) {
        present = Tensor::from_vector(unique_keys<std::uint32_t>(0, n), place);
        absent = Tensor::from_vector(unique_keys<std::uint32_t>(n, n), place);
      } else {
        present = Tensor::from_vector(unique_keys<std::int64_t>(0, n), place);
        absent = Tensor::from_vector(unique_keys<std::int64_t>(n, n), place);
      }
      Tensor rows = Tensor::empty({n}, DType::I64, place);
      auto table = std::make_unique<HashTable>(dtype, n, place, slot_count, "bench");
      // Insert into an empty table each time (clear() is outside the timed region).
      std::vector<double> insert_times;
      for (int rep = 0; rep < 3; ++rep) {
        table->clear();
        insert_times.push_back(
            time_ms(cuda, device, 0, 1, [&] { table->insert_or_find(present, rows); }));
      }
      std::sort(insert_times.begin(), insert_times.end());
      const double insert_ms = insert_times[1];
      const double find_ms = time_ms(cuda, device, 1, 5, [&] { table->find(present, rows); });
      const double miss_ms = time_ms(cuda, device, 1, 5, [&] { table->find(absent, rows); });
      // Bandwidth bound of one key: read it, write its row (8 bytes), and one random 32-byte
      // sector of the slot array (a probe that stays within its sector).
      const double bytes_per_key = static_cast<double>(dtype_size(dtype)) + 8 + 32;
      const double bound = copy_gbs * 1e9 / bytes_per_key;
      for (auto [name, ms] : {std::pair<const char*, double>{"insert_or_find", insert_ms},
                              {"find present", find_ms},
                              {"find absent", miss_ms}}) {
        const double rate = n / (ms * 1e-3);
        std::printf("%-5s %-5.2f %-14s %12.2f %10.3f %13.0f%%\n", dtype_name(dtype).data(), load,
                    name, rate / 1e9, ms, cuda ? 100.0 * rate / bound : 0.0);
        if (cuda && load == 0.5) {
          const std::string metric = std::string("hash ") + name + " " +
                                     std::string(dtype_name(dtype)) + " load 0.5 (G keys/s)";
          const bool is_insert = std::string(name) == "insert_or_find";
          const bool is_present = std::string(name) == "find present";
          if (is_insert || is_present) {
            const double target = is_insert ? 4.0 : 10.0;
            summary(metric, rate / 1e9, 2, ">= " + fmt_num(target, 0),
                    rate / 1e9 >= target ? "yes" : "no");
          }
        }
      }
    }
  }
}

// Starting new rows (what a training forward does after inserting new keys), timed apart from
// the key insertion above: each row's 128 values come from a counter-based random stream (the
// row's stream mixed once, one 64-bit mix per value), its states are filled and its step set.
// Bound: the row's writes (512 bytes at dim 128) plus its key read, at copy bandwidth.
void bench_row_init(bool cuda, int device, double copy_gbs) {
  const Place place = cuda ? Place::cuda(device) : Place::host();
  const std::int64_t n = cuda ? std::int64_t{1} << 22 : std::int64_t{1} << 12, V = 128;
  const Tensor keys = Tensor::from_vector(unique_keys<std::uint32_t>(0, n), place);
  const Tensor range = Tensor::from_vector(std::vector<std::int64_t>{0, n}, place);
  Tensor values = Tensor::empty({n, V}, DType::F32, place);
  Tensor state = Tensor::empty({n, V}, DType::F32, place);
  kernels::RowInit init;
  init.seed = 7;
  init.bound = 0.05f;
  const StreamHandle s = cuda ? current_stream(device) : nullptr;
  for (bool with_state : {false, true}) {
    const kernels::RowStates st{with_state ? state.data<float>() : nullptr, nullptr, nullptr};
    const kernels::NewRows fresh{range.data<std::int64_t>(), n};
    const double ms = time_ms(cuda, device, 1, cuda ? 10 : 2, [&] {
      kernels::on(place).keys<std::uint32_t>().init_new_rows(
          fresh, keys.data<std::uint32_t>(), init, kernels::Values{values.data<float>()}, V, st, s);
    });
    const double bytes_per_row = 4.0 * V * (with_state ? 2 : 1) + 4;
    const double rate = n / (ms * 1e-3), bound = copy_gbs * 1e9 / bytes_per_row;
    const char* name = with_state ? "row init + state" : "row init";
    std::printf("%-5s %-5s %-14s %12.2f %10.3f %13.0f%%   (dim 128, G rows/s)\n", "u32", "-", name,
                rate / 1e9, ms, cuda ? 100.0 * rate / bound : 0.0);
    if (cuda && !with_state) {
      summary("new-row init, dim 128 (G rows/s)", rate / 1e9, 2, "-", "-");
      summary("new-row init, dim 128 (% of write bound)", 100.0 * rate / bound, 0, "-", "-");
    }
  }
}

// ---- (b) DLRM-shaped embedding step
// --------------------------------------------------------------

struct StepShape {
  std::vector<std::int64_t> sizes;
  std::int64_t batch = 0, dim = 0;
  int pooling = 1;
};

// Power-law keys: rank r of table t is drawn log-uniformly (P(r) ~ 1/r), then scattered over
// the table by a fixed permutation-like mix so that hot keys are not neighbours.
CsrTensor make_batch(const StepShape& s, std::uint64_t seed, Place place) {
  const std::int64_t S = static_cast<std::int64_t>(s.sizes.size());
  std::vector<std::int64_t> offsets(s.batch * S + 1), keys(s.batch * S * s.pooling);
  std::vector<std::int64_t> begin(S, 0);
  for (std::int64_t t = 1; t < S; ++t)
    begin[t] = begin[t - 1] + s.sizes[t - 1];
  std::int64_t k = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t t = 0; t < S; ++t) {
      offsets[b * S + t] = k;
      for (int j = 0; j < s.pooling; ++j, ++k) {
        const double u = random::uniform01(seed, static_cast<std::uint64_t>(k));
        const auto rank = static_cast<std::uint64_t>(
                              std::exp(u * std::log(static_cast<double>(s.sizes[t]) + 1.0))) -
                          1;
        keys[k] = begin[t] + static_cast<std::int64_t>(random::mix64(rank) % s.sizes[t]);
      }
    }
  }
  offsets[s.batch * S] = k;
  return CsrTensor(Tensor::from_vector(offsets, place), Tensor::from_vector(keys, place), k);
}

struct StepResult {
  double forward_ms = 0, pool_ms = 0, backward_update_ms = 0, update_kernel_ms = 0, step_ms = 0;
  double forward_bytes = 0, update_bytes = 0;
  std::int64_t largest_segment = 0;
};

StepResult bench_step(bool cuda, int device, const StepShape& shape, optim::OptimizerType opt,
                      distributed::Communicator& comm) {
  const Place place = comm.place();
  const std::int64_t S = static_cast<std::int64_t>(shape.sizes.size()), V = shape.dim;
  EmbeddingConfig c;
  c.name = "dlrm";
  c.type = EmbeddingType::DistributedSlotHash;
  c.vec_size = V;
  c.slot_num = S;
  c.key_dtype = DType::I64;
  c.seed = 1;
  std::int64_t total = 0;
  for (auto s : shape.sizes)
    total += s;
  c.max_vocabulary_size_per_gpu = total;
  optim::OptimizerConfig o;
  o.type = opt;
  o.schedule.base_lr = 0.01f;
  SparseEmbedding emb(c, o, comm);
  std::vector<CsrTensor> batches;
  for (int i = 0; i < 3; ++i)
    batches.push_back(make_batch(shape, 100 + i, place));
  const Tensor grad = Tensor::uniform({shape.batch, S, V}, -1, 1, 5, DType::F32, place);
  int next = 0;
  auto step = [&] {
    emb.forward(batches[next++ % 3], 0, shape.batch);
    emb.backward(grad);
    emb.update();
  };
  StepResult r;
  // Warm up: insert the keys of all batches.
  for (int i = 0; i < 3; ++i)
    step();
  const int reps = cuda ? 7 : 2;
  r.step_ms = time_ms(cuda, device, 1, reps, step);
  r.forward_ms =
      time_ms(cuda, device, 1, reps, [&] { emb.forward(batches[next++ % 3], 0, shape.batch); });
  // Backward + update of the last forward (re-run forward outside the timed region).
  std::vector<double> bu;
  for (int i = 0; i < reps; ++i) {
    emb.forward(batches[next++ % 3], 0, shape.batch);
    bu.push_back(time_ms(cuda, device, 0, 1, [&] {
      emb.backward(grad);
      emb.update();
    }));
  }
  std::sort(bu.begin(), bu.end());
  r.backward_update_ms = bu[bu.size() / 2];

  // The pooling kernel alone, on rows looked up once (the part of forward bounded by bandwidth).
  const CsrTensor& b0 = batches[0];
  const std::int64_t n = b0.nnz(), bags = shape.batch * S;
  Tensor rows = Tensor::empty({n}, DType::I64, place);
  // Rows of a fresh table in the same shape: row = key's position in a table filled with these
  // keys; the exact rows do not matter for the bandwidth, only that they are spread like a
  // hash table's.
  HashTable table(DType::I64, total, place, 0, "bench");
  table.insert_or_find(b0.values(), rows);
  Tensor values = Tensor::uniform({table.size(), V}, -1, 1, 3, DType::F32, place);
  Tensor scale = Tensor::ones({bags}, DType::F32, place);
  Tensor out = Tensor::empty({bags, V}, DType::F32, place);
  const StreamHandle s = cuda ? current_stream(device) : nullptr;
  const kernels::KernelTable& steps = kernels::on(place);
  auto pool = [&] {
    steps.pool(b0.row_offsets().data<std::int64_t>(), rows.data<std::int64_t>(),
               scale.data<float>(), bags, n, kernels::Values{values.data<float>()}, V,
               out.data<float>(), kernels::ValueType::F32, s);
  };
  r.pool_ms = time_ms(cuda, device, 2, cuda ? 20 : 2, pool);
  // The update kernels alone (plan + fused update) on this batch's segments.
  Tensor entry_bag = Tensor::empty({n}, DType::I64, place);
  std::vector<std::int64_t> eb(n);
  {
    const auto off = b0.row_offsets().to(Place::host()).to_vector<std::int64_t>();
    for (std::int64_t bag = 0; bag < bags; ++bag) {
      for (std::int64_t e = off[bag]; e < off[bag + 1]; ++e)
        eb[e] = bag;
    }
    entry_bag.copy_from(Tensor::from_vector(eb));
  }
  // Segment lengths, counted on the host: the longest one is what a warp-per-row update would
  // serialise on.
  {
    const auto host_rows = rows.to(Place::host()).to_vector<std::int64_t>();
    std::vector<std::int64_t> per_row(table.size(), 0);
    for (auto row : host_rows)
      ++per_row[row];
    std::sort(per_row.rbegin(), per_row.rend());
    std::int64_t hot_rows = 0, hot_entries = 0, hot_chunks = 0;
    for (auto len : per_row) {
      if (len <= kernels::kGradientChunk) break;
      ++hot_rows;
      hot_entries += len;
      hot_chunks += (len + kernels::kGradientChunk - 1) / kernels::kGradientChunk;
    }
    r.largest_segment = per_row.empty() ? 0 : per_row[0];
    std::printf(
        "    segments: largest %lld (then %lld, %lld); %lld rows of > %lld entries hold "
        "%.1f%% of the lookups in %lld chunks\n",
        static_cast<long long>(r.largest_segment),
        static_cast<long long>(per_row.size() > 1 ? per_row[1] : 0),
        static_cast<long long>(per_row.size() > 2 ? per_row[2] : 0),
        static_cast<long long>(hot_rows), static_cast<long long>(kernels::kGradientChunk),
        100.0 * static_cast<double>(hot_entries) /
            static_cast<double>(std::max<std::int64_t>(n, 1)),
        static_cast<long long>(hot_chunks));
  }
  Tensor sorted_bags = Tensor::empty({n}, DType::I32, place),
         unique = Tensor::empty({n}, DType::I64, place);
  Tensor seg_off = Tensor::empty({n + 1}, DType::I64, place);
  Tensor unique_count = Tensor::empty({1}, DType::I64, place);
  Tensor state = Tensor::zeros({table.size(), V}, DType::F32, place);
  steps.segments(rows.data<std::int64_t>(), entry_bag.data<std::int64_t>(), n, table.size(),
                 sorted_bags.data<std::int32_t>(), unique.data<std::int64_t>(),
                 seg_off.data<std::int64_t>(), unique_count.data<std::int64_t>(), s);
  const std::int64_t unique_count_value = unique_count.to(Place::host()).item<std::int64_t>();
  const kernels::Segments seg{sorted_bags.data<std::int32_t>(), unique.data<std::int64_t>(),
                              seg_off.data<std::int64_t>(), unique_count.data<std::int64_t>(), n};
  const kernels::RowStates st{opt == optim::OptimizerType::AdaGrad ? state.data<float>() : nullptr,
                              nullptr, nullptr};
  const optim::UpdateStep u = optim::make_update_step(o, 0.01f, 1);
  const Tensor grad2 = grad.reshape({bags, V});
  auto update = [&] {
    steps.update_rows(seg, scale.data<float>(), grad2.data<float>(), kernels::ValueType::F32,
                      kernels::Values{values.data<float>()}, V, st, 1, u, nullptr, s);
  };
  r.update_kernel_ms = time_ms(cuda, device, 2, cuda ? 20 : 2, update);
  // Bytes that must move: forward reads every looked-up row and writes every pooled bag;
  // the update reads each entry's bag gradient and reads + writes each touched row (and its
  // AdaGrad accumulator).
  const double row = 4.0 * V;
  r.forward_bytes = row * (n + bags);
  r.update_bytes =
      row * (n + 2.0 * unique_count_value * (opt == optim::OptimizerType::AdaGrad ? 2 : 1));
  std::printf("    %lld lookups, %lld distinct rows in the batch\n", static_cast<long long>(n),
              static_cast<long long>(unique_count_value));
  return r;
}

struct TorchResult {
  bool ok = false;
  double forward_ms = 0, backward_update_ms = 0, step_ms = 0;
  std::string error;  // why there is no result
};

// Gives the memory Ember's caches hold back to the device, so that the peer (another process)
// finds as much of the device free as Ember did: Ember's freed tables stay reserved in the
// caching allocator until then (42 GB of an 80 GB H100 in one run, and the peer ran out).
void release_cached_memory(int device) {
  synchronize_device(device);
  if (caching_allocators_enabled()) {
    caching_device_allocator(device).empty_cache();
    caching_pinned_allocator().empty_cache();
  }
  const DeviceMemoryInfo info = device_memory_info(device);
  const long long reserved =
      caching_allocators_enabled()
          ? static_cast<long long>(caching_device_allocator(device).stats().reserved_bytes.current)
          : 0;
  std::printf(
      "    before the PyTorch peer: %.2f GiB of %.2f GiB free on the device (Ember keeps "
      "%.2f GiB reserved)\n",
      static_cast<double>(info.free_bytes) / (1 << 30),
      static_cast<double>(info.total_bytes) / (1 << 30), static_cast<double>(reserved) / (1 << 30));
}

double json_number(const std::string& text, const std::string& key) {
  const auto at = text.find("\"" + key + "\"");
  if (at == std::string::npos) return NAN;
  const auto colon = text.find(':', at);
  return std::strtod(text.c_str() + colon + 1, nullptr);
}

// Runs the peer once for both optimizers; results by optimizer name ("sgd", "adagrad").
std::map<std::string, TorchResult> run_torch(const StepShape& s, const std::string& script) {
  std::map<std::string, TorchResult> results;
  auto fail_all = [&](const std::string& why) {
    for (const char* name : {"sgd", "adagrad"})
      results[name].error = why;
    return results;
  };
  if (std::system("python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' "
                  ">/dev/null 2>&1") != 0) {
    std::printf("    PyTorch peer: skipped (python3 with CUDA torch not found)\n");
    return fail_all("python3 with CUDA torch not found");
  }
  std::string sizes;
  for (auto v : s.sizes) {
    if (!sizes.empty()) sizes += ',';
    sizes += std::to_string(v);
  }
  const std::string cmd = "python3 " + script + " --json --batch " + std::to_string(s.batch) +
                          " --dim " + std::to_string(s.dim) + " --pooling " +
                          std::to_string(s.pooling) + " --optimizer sgd,adagrad --sizes " + sizes +
                          " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return fail_all("could not start python3");
  std::string all;
  char buf[8192];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    const std::string line = buf;
    all += line;
    for (const char* name : {"sgd", "adagrad"}) {
      if (line.find(std::string("\"optimizer\": \"") + name + "\"") == std::string::npos) continue;
      TorchResult r;
      r.forward_ms = json_number(line, "forward_ms");
      r.backward_update_ms = json_number(line, "backward_update_ms");
      r.step_ms = json_number(line, "step_ms");
      r.ok = std::isfinite(r.step_ms);
      results[name] = r;
    }
  }
  const int rc = pclose(pipe);
  if (rc != 0 || results.size() != 2) {
    std::printf("    PyTorch peer failed (rc %d): %s\n", rc, all.c_str());
    // The last line of its output says why (an out-of-memory error, usually).
    std::string last = all;
    while (!last.empty() && (last.back() == '\n' || last.back() == '\r'))
      last.pop_back();
    if (const auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    if (last.size() > 120) last = last.substr(0, 120) + "...";
    for (const char* name : {"sgd", "adagrad"}) {
      TorchResult& r = results[name];
      if (!r.ok) r.error = "peer exited with " + std::to_string(rc) + ": " + last;
    }
  }
  return results;
}

void bench_dlrm(bool cuda, int device, const StepShape& base, double copy_gbs, bool torch,
                const std::string& torch_script) {
  std::printf("\n(b) DLRM-shaped step: %zu tables, dim %lld, batch %lld, power-law keys\n",
              base.sizes.size(), static_cast<long long>(base.dim),
              static_cast<long long>(base.batch));
  std::vector<distributed::CommunicatorPtr> comms;
  if (cuda) {
    comms = distributed::make_nccl_communicators({device});
  } else {
    comms = distributed::make_in_process_communicators(1);
  }
  for (int pooling : {1, 8}) {
    StepShape shape = base;
    shape.pooling = pooling;
    // The peer runs first, for both optimizers, while Ember holds no tables and its caches are
    // empty: both get the same device.
    std::map<std::string, TorchResult> peer;
    if (cuda && torch) {
      std::printf("  pooling %d, PyTorch peer:\n", pooling);
      release_cached_memory(device);
      peer = run_torch(shape, torch_script);
    }
    for (optim::OptimizerType opt : {optim::OptimizerType::SGD, optim::OptimizerType::AdaGrad}) {
      std::printf("  pooling %d, %s:\n", pooling, optim::optimizer_name(opt));
      const StepResult r = bench_step(cuda, device, shape, opt, *comms[0]);
      const double fwd_gbs = r.forward_bytes / (r.pool_ms * 1e-3) / 1e9;
      const double upd_gbs = r.update_bytes / (r.update_kernel_ms * 1e-3) / 1e9;
      const double fwd_all_gbs = r.forward_bytes / (r.forward_ms * 1e-3) / 1e9;
      const double bu_all_gbs = r.update_bytes / (r.backward_update_ms * 1e-3) / 1e9;
      auto pct = [&](double gbs) { return cuda ? 100.0 * gbs / copy_gbs : 0.0; };
      std::printf("    %-34s %9.3f ms %9.1f GB/s %6.0f%% of copy\n", "forward, pool kernel",
                  r.pool_ms, fwd_gbs, pct(fwd_gbs));
      std::printf("    %-34s %9.3f ms %9.1f GB/s %6.0f%% of copy\n",
                  "forward, whole (select+hash+pool)", r.forward_ms, fwd_all_gbs, pct(fwd_all_gbs));
      std::printf("    %-34s %9.3f ms %9.1f GB/s %6.0f%% of copy\n",
                  "update kernels (plan + update)", r.update_kernel_ms, upd_gbs, pct(upd_gbs));
      std::printf("    %-34s %9.3f ms %9.1f GB/s %6.0f%% of copy\n",
                  "backward + update (whole calls)", r.backward_update_ms, bu_all_gbs,
                  pct(bu_all_gbs));
      const double sps = shape.batch / (r.step_ms * 1e-3);
      std::printf("    %-34s %9.3f ms %9.2f M samples/s\n", "whole step", r.step_ms, sps / 1e6);
      if (!cuda) continue;
      const std::string tag =
          "pooling " + std::to_string(pooling) + " " + optim::optimizer_name(opt);
      if (opt == optim::OptimizerType::SGD) {
        summary("forward pool kernel, " + tag + " (% of copy)", pct(fwd_gbs), 0, ">= 85",
                pct(fwd_gbs) >= 85 ? "yes" : "no");
      }
      summary("update kernels, " + tag + " (% of copy)", pct(upd_gbs), 0, ">= 60",
              pct(upd_gbs) >= 60 ? "yes" : "no");
      summary("backward + update, " + tag + " (% of copy)", pct(bu_all_gbs), 0, ">= 60",
              pct(bu_all_gbs) >= 60 ? "yes" : "no");
      summary("whole step, " + tag + " (M samples/s)", sps / 1e6, 2, "-", "-");
      if (torch) {
        const TorchResult t = peer[opt == optim::OptimizerType::SGD ? "sgd" : "adagrad"];
        if (t.ok) {
          std::printf("    %-34s %9.3f ms (forward %.3f, backward+update %.3f)\n",
                      "PyTorch EmbeddingBag step", t.step_ms, t.forward_ms, t.backward_update_ms);
          const double speedup = t.step_ms / r.step_ms;
          std::printf("    %-34s %9.2fx\n", "Ember / PyTorch speed", speedup);
          summary("step speed vs PyTorch, " + tag + " (x)", speedup, 2, ">= 2",
                  speedup >= 2 ? "yes" : "no");
        } else {
          summary_failed("step speed vs PyTorch, " + tag + " (x)",
                         "PyTorch peer: " + (t.error.empty() ? "no result" : t.error), ">= 2");
        }
      }
    }
  }
}

// ---- (c) one-hot forward into the network's input (DLRM Kaggle's layer) ----------------------

// LocalizedSlotSparseEmbeddingOneHot on one rank over the Criteo-Kaggle tables, as
// configs/dlrm_criteo_kaggle.json trains it: the training forward written into an f32 or f16
// input (forward_into, what the training loop calls), and backward + update from a gradient of
// that dtype (mixed precision's is f16), for f32 and f16 tables. Bytes that must move: every
// looked-up row read (the table's dtype) and every output value written (the input's).
void bench_onehot(bool cuda, int device, const StepShape& base, double copy_gbs,
                  distributed::Communicator& comm) {
  std::printf("\n(c) one-hot forward into the network's input: %zu tables, dim %lld, batch %lld\n",
              base.sizes.size(), static_cast<long long>(base.dim),
              static_cast<long long>(base.batch));
  const Place place = comm.place();
  const std::int64_t S = static_cast<std::int64_t>(base.sizes.size()), V = base.dim;
  StepShape shape = base;
  shape.pooling = 1;
  std::vector<CsrTensor> batches;
  for (int i = 0; i < 3; ++i)
    batches.push_back(make_batch(shape, 200 + i, place));
  const std::int64_t n = shape.batch * S;
  for (DType table : {DType::F32, DType::F16}) {
    EmbeddingConfig c;
    c.name = "dlrm_onehot";
    c.type = EmbeddingType::LocalizedSlotOneHot;
    c.vec_size = V;
    c.slot_num = S;
    c.slot_size_array = shape.sizes;
    c.key_dtype = DType::I64;
    c.seed = 1;
    c.value_dtype = table;
    optim::OptimizerConfig o;
    o.type = optim::OptimizerType::SGD;
    o.schedule.base_lr = 0.01f;
    SparseEmbedding emb(c, o, comm);
    for (DType input : {DType::F32, DType::F16}) {
      const Tensor out = Tensor::empty({shape.batch, S, V}, input, place);
      const Tensor grad =
          Tensor::uniform({shape.batch, S, V}, -1, 1, 5, DType::F32, place).to(input);
      int next = 0;
      auto forward = [&] { emb.forward_into(batches[next++ % 3], 0, shape.batch, out); };
      const double fwd_ms = time_ms(cuda, device, 2, cuda ? 20 : 2, forward);
      std::vector<double> bu;
      for (int i = 0; i < (cuda ? 7 : 2); ++i) {
        forward();
        bu.push_back(time_ms(cuda, device, 0, 1, [&] {
          emb.backward(grad);
          emb.update();
        }));
      }
      std::sort(bu.begin(), bu.end());
      const double bu_ms = bu[bu.size() / 2];
      const double bytes =
          static_cast<double>(n) * V * static_cast<double>(dtype_size(table) + dtype_size(input));
      const double gbs = bytes / (fwd_ms * 1e-3) / 1e9;
      const double pct = cuda ? 100.0 * gbs / copy_gbs : 0.0;
      const std::string tag =
          std::string(dtype_name(table)) + " table -> " + std::string(dtype_name(input)) + " input";
      std::printf("    %-34s %9.3f ms %9.1f GB/s %6.0f%% of copy (%.3f GB: rows + output)\n",
                  ("forward, " + tag).c_str(), fwd_ms, gbs, pct, bytes / 1e9);
      std::printf("    %-34s %9.3f ms (the gradient in %s, read as it is)\n",
                  "backward + update (SGD)", bu_ms, std::string(dtype_name(input)).c_str());
      if (!cuda) continue;
      summary("one-hot forward, " + tag + " (ms)", fwd_ms, 3, "-", "-");
      summary("one-hot forward, " + tag + " (% of copy)", pct, 0, ">= 60",
              pct >= 60 ? "yes" : "no");
      summary("one-hot backward + update, " + tag + " (ms)", bu_ms, 3, "-", "-");
    }
  }
}

// ---- (d) one entry per bag: the short-bag kernel against the multi-entry one ---------------

// One-hot slots (DLRM) and the hybrid's frequent rows and sent rows pool one entry per bag. The
// pool kernels pick by the bags' mean entries: one or fewer take the short-bag kernel (four bags'
// first rows a thread in flight), more take pool8 (rows of one bag in flight). All three ways
// run here on the same one-entry bags: pool8 (told two entries a bag, to force it), the
// short-bag kernel with offsets (DLRM's one-hot layer) and without (the hybrid). Rows are
// random over a table of 32,768 rows (about the hybrid's frequent table on DLRM-Kaggle: it fits
// in L2) and of 4,194,304 rows (it does not), into f32 and f16 outputs; the three must give the
// same bytes. Bytes: every row read (f32) and every output value written.
void bench_short_bags(bool cuda, int device, const StepShape& base, double copy_gbs) {
  const std::int64_t bags = base.batch * static_cast<std::int64_t>(base.sizes.size());
  const std::int64_t V = base.dim;
  std::printf("\n(d) one entry per bag: %lld bags, dim %lld, f32 table\n",
              static_cast<long long>(bags), static_cast<long long>(V));
  const Place place = cuda ? Place::cuda(device) : Place::host();
  const StreamHandle s = cuda ? current_stream(device) : nullptr;
  const kernels::KernelTable& steps = kernels::on(place);
  std::vector<std::int64_t> iota(bags + 1);
  for (std::int64_t i = 0; i <= bags; ++i)
    iota[i] = i;
  const Tensor offsets = Tensor::from_vector(iota).to(place);
  const Tensor ones = Tensor::ones({bags}, DType::F32, place);
  std::mt19937_64 rng(7);
  for (const std::int64_t table_rows : {std::int64_t{32768}, std::int64_t{4194304}}) {
    const std::int64_t R = cuda ? table_rows : std::min<std::int64_t>(table_rows, 1000);
    std::vector<std::int64_t> r(bags);
    std::uniform_int_distribution<std::int64_t> pick(0, R - 1);
    for (auto& x : r)
      x = pick(rng);
    const Tensor rows = Tensor::from_vector(r).to(place);
    const Tensor values = Tensor::uniform({R, V}, -1, 1, 11, DType::F32, place);
    for (const DType out_dtype : {DType::F32, DType::F16}) {
      const kernels::ValueType type =
          out_dtype == DType::F32 ? kernels::ValueType::F32 : kernels::ValueType::F16;
      struct Way {
        const char* name;
        bool offsets;
        std::int64_t entries;
      };
      const Way ways[] = {
          {"pool8", true, 2 * bags}, {"short, offsets", true, bags}, {"short, none", false, bags}};
      double ms[3];
      std::vector<std::uint8_t> first;
      for (int w = 0; w < 3; ++w) {
        const Tensor out = Tensor::empty({bags, V}, out_dtype, place);
        ms[w] = time_ms(cuda, device, 2, cuda ? 20 : 2, [&] {
          steps.pool(ways[w].offsets ? offsets.data<std::int64_t>() : nullptr,
                     rows.data<std::int64_t>(), ways[w].offsets ? ones.data<float>() : nullptr,
                     bags, ways[w].entries, kernels::Values{values.data<float>()}, V, out.data(),
                     type, s);
        });
        const Tensor h = out.to(Place::host());
        const auto* p = static_cast<const std::uint8_t*>(h.data());
        const std::vector<std::uint8_t> got(p, p + h.nbytes());
        if (w == 0) first = got;
        if (got != first) {
          throw Error(std::string("bench_short_bags: ") + ways[w].name +
                      "'s output differs from pool8's");
        }
      }
      const double bytes = static_cast<double>(bags) * V * (4.0 + dtype_size(out_dtype));
      auto pct = [&](double t) { return cuda ? 100.0 * bytes / (t * 1e-3) / 1e9 / copy_gbs : 0.0; };
      const std::string tag = std::to_string(R) + " rows -> " + std::string(dtype_name(out_dtype));
      std::printf("    %-22s", tag.c_str());
      for (int w = 0; w < 3; ++w)
        std::printf("  %s %6.3f ms (%4.0f%%)", ways[w].name, ms[w], pct(ms[w]));
      std::printf("\n");
      if (!cuda) continue;
      summary("one entry per bag, " + tag + ": short-bag kernel (ms)", ms[1], 3, "-", "-");
      summary("one entry per bag, " + tag + ": no offsets (ms)", ms[2], 3, "-", "-");
      summary("one entry per bag, " + tag + ": pool8 (ms)", ms[0], 3, "-", "-");
    }
  }
}

// ---- (e) the hybrid's frequent rows' gradient sums ---------------------------------------------

// `count` keys of bags over slots of `sizes` ids (bag i in slot i % slots), global row indices
// (slot t's ids start after the ids of slots 0 .. t - 1), as `ember datagen` draws them: rank r
// of a slot of V ids with density (r + 1)^-1.1, by inverting the continuous CDF over [1, V + 1),
// the law of data/power_law.hpp (this layer's benchmark does not link the data layer); ranks are
// scattered over the ids as make_batch does.
std::vector<std::int64_t> datagen_keys(const std::vector<std::int64_t>& sizes, std::int64_t count) {
  const double alpha = 1.1;
  const auto S = static_cast<std::int64_t>(sizes.size());
  auto draw = [&](std::int64_t t, double u) {
    const double top = std::pow(static_cast<double>(sizes[t]) + 1.0, 1.0 - alpha) - 1.0;
    const auto rank = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::pow(1.0 + u * top, 1.0 / (1.0 - alpha))) - 1, 0,
        sizes[t] - 1);
    return static_cast<std::int64_t>(random::mix64(static_cast<std::uint64_t>(rank)) %
                                     static_cast<std::uint64_t>(sizes[t]));
  };
  std::vector<std::int64_t> begin(S + 1, 0);
  for (std::int64_t t = 0; t < S; ++t)
    begin[t + 1] = begin[t] + sizes[t];
  std::vector<std::int64_t> keys(count);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t t = i % S;
    keys[i] = begin[t] + draw(t, random::uniform01(17, static_cast<std::uint64_t>(i)));
  }
  return keys;
}

// The segments of an update (each row's entries, sorted), of bag i's row rows[i] (-1: none)
// among `row_count` rows, at a place: the same function of the same rows on host and device.
struct UpdatePlan {
  Tensor sorted_bags, unique_rows, offsets, count;
  kernels::Segments seg() const {
    return {sorted_bags.data<std::int32_t>(), unique_rows.data<std::int64_t>(),
            offsets.data<std::int64_t>(), count.data<std::int64_t>(), sorted_bags.numel()};
  }
  static UpdatePlan of(const std::vector<std::int64_t>& rows, std::int64_t row_count, Place at,
                       StreamHandle st) {
    const auto n = static_cast<std::int64_t>(rows.size());
    std::vector<std::int64_t> iota(n + 1);
    for (std::int64_t i = 0; i <= n; ++i)
      iota[i] = i;
    UpdatePlan p;
    const Tensor r = Tensor::from_vector(rows, at), bag = Tensor::from_vector(iota, at);
    p.sorted_bags = Tensor::empty({n}, DType::I32, at);
    p.unique_rows = Tensor::empty({n}, DType::I64, at);
    p.offsets = Tensor::empty({n + 1}, DType::I64, at);
    p.count = Tensor::empty({1}, DType::I64, at);
    kernels::on(at).segments(r.data<std::int64_t>(), bag.data<std::int64_t>(), n, row_count,
                             p.sorted_bags.data<std::int32_t>(), p.unique_rows.data<std::int64_t>(),
                             p.offsets.data<std::int64_t>(), p.count.data<std::int64_t>(), st);
    if (st != nullptr) synchronize_stream(st);  // before r and bag go
    return p;
  }
};

// HybridSparseEmbedding on 2 ranks sums each rank's gradients of the frequent rows before their
// all-reduce (sum_local_frequent_gradients): an update_rows call that stores each row's sum in
// the kGradientChunk order into a zeroed F x V table (SGD at rate -1). Keys as `ember datagen`
// draws them (power law, alpha 1.1, over the Kaggle slot sizes); the frequent rows are those
// looked up at least 6 times in the global batch (2 x batch samples), about the traffic rule's
// threshold on 2 GPUs in mixed precision (2 D x 1.46); the rank's own batch is the first half.
// Bytes: each frequent entry's gradient row read, each sum row read and written. The GPU's sums
// must equal the CPU's bit for bit.
void bench_frequent_sums(bool cuda, int device, const StepShape& base, double copy_gbs) {
  const std::int64_t S = static_cast<std::int64_t>(base.sizes.size()), V = base.dim;
  const std::int64_t B = base.batch, n = B * S;
  // Key (slot, id) of bag i of the global batch (2 B samples); the rank's bags are the first n.
  const std::vector<std::int64_t> keys = datagen_keys(base.sizes, 2 * n);
  std::vector<std::int64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  std::map<std::int64_t, std::int64_t> frequent;  // key -> frequent index
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i])
      ++j;
    if (j - i >= 6) frequent.emplace(sorted[i], static_cast<std::int64_t>(frequent.size()));
    i = j;
  }
  const auto F = static_cast<std::int64_t>(frequent.size());
  std::vector<std::int64_t> rows(n), per_row(F, 0);
  std::int64_t frequent_entries = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto it = frequent.find(keys[i]);
    rows[i] = it == frequent.end() ? -1 : it->second;
    if (rows[i] >= 0) {
      ++frequent_entries;
      ++per_row[rows[i]];
    }
  }
  std::int64_t hot_rows = 0, hot_entries = 0;
  for (const std::int64_t c : per_row) {
    if (c > kernels::kGradientChunk) {
      ++hot_rows;
      hot_entries += c;
    }
  }
  std::printf(
      "\n(e) the hybrid's frequent rows' gradient sums (rank 0 of 2): %lld bags, dim %lld, %lld "
      "frequent rows, %lld entries in them (%.1f %%), %lld rows of more than %lld entries hold "
      "%.1f %% of those\n",
      static_cast<long long>(n), static_cast<long long>(V), static_cast<long long>(F),
      static_cast<long long>(frequent_entries),
      100.0 * frequent_entries / std::max<std::int64_t>(n, 1), static_cast<long long>(hot_rows),
      static_cast<long long>(kernels::kGradientChunk),
      100.0 * hot_entries / std::max<std::int64_t>(frequent_entries, 1));
  const Place place = cuda ? Place::cuda(device) : Place::host();
  const StreamHandle s = cuda ? current_stream(device) : nullptr;
  auto plan_at = [&](Place at, StreamHandle st) { return UpdatePlan::of(rows, F, at, st); };
  const UpdatePlan plan = plan_at(place, s);
  const optim::UpdateStep store_sum = optim::store_sum_step();
  const Tensor grad32 = Tensor::uniform({n, V}, -1, 1, 23, DType::F32, place);
  for (const DType g : {DType::F16, DType::F32}) {
    const Tensor grad = grad32.to(g);
    const kernels::ValueType type =
        g == DType::F32 ? kernels::ValueType::F32 : kernels::ValueType::F16;
    const Tensor sums = Tensor::zeros({std::max<std::int64_t>(F, 1), V}, DType::F32, place);
    auto run = [&](const kernels::KernelTable& k, const kernels::Segments& seg, const Tensor& gr,
                   const Tensor& out, StreamHandle st) {
      k.update_rows(seg, nullptr, gr.data(), type, kernels::Values{out.data<float>()}, V,
                    kernels::RowStates{}, 1, store_sum, nullptr, st);
    };
    const double fill_ms =
        time_ms(cuda, device, 2, cuda ? 20 : 2, [&] { ops::fill(sums, 0.0, s); });
    // The sums of the last run stay in `sums` for the check below.
    const double ms = time_ms(cuda, device, 2, cuda ? 20 : 2, [&] {
      ops::fill(sums, 0.0, s);
      run(kernels::on(place), plan.seg(), grad, sums, s);
    });
    // The CPU's sums from the same inputs, bit for bit.
    if (cuda) {
      const UpdatePlan host_plan = plan_at(Place::host(), nullptr);
      const Tensor host_sums =
          Tensor::zeros({std::max<std::int64_t>(F, 1), V}, DType::F32, Place::host());
      run(kernels::on(Place::host()), host_plan.seg(), grad.to(Place::host()), host_sums, nullptr);
      const std::vector<float> got = sums.to_vector<float>(), want = host_sums.to_vector<float>();
      std::int64_t differ = 0, first = -1;
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0) {
          first = static_cast<std::int64_t>(i);
        }
      }
      if (differ > 0) {
        const std::int64_t r = first / V;
        throw Error("bench_frequent_sums: " + std::to_string(differ) + " of the GPU's " +
                    std::string(dtype_name(g)) + " sums differ from the CPU's; the first: row " +
                    std::to_string(r) + " (" + std::to_string(per_row[r]) + " entries), column " +
                    std::to_string(first % V) + ", " + std::to_string(got[first]) + " against " +
                    std::to_string(want[first]));
      }
    }
    const double bytes =
        static_cast<double>(frequent_entries) * V * static_cast<double>(dtype_size(g)) +
        2.0 * static_cast<double>(F) * V * 4.0;
    const double t = ms - fill_ms;
    const double gbs = bytes / (t * 1e-3) / 1e9;
    const double pct = cuda ? 100.0 * gbs / copy_gbs : 0.0;
    const std::string tag = std::string(dtype_name(g)) + " gradient";
    std::printf(
        "    %-14s %8.3f ms (plan + sums; the zero fill %.3f ms apart) %8.1f GB/s %5.0f%% of "
        "copy\n",
        tag.c_str(), t, fill_ms, gbs, pct);
    if (!cuda) continue;
    summary("frequent rows' gradient sums, " + tag + " (ms)", t, 3, "-", "-");
    summary("frequent rows' gradient sums, " + tag + " (% of copy)", pct, 0, "-", "-");
  }
}

// ---- (f) narrow rows: the update of DeepFM's, Wide&Deep's and DCN's tables --------------------

// configs/deepfm.json, wide_and_deep.json and dcn.json: 26 slots of 2000 ids in one table (one
// key a slot, datagen's power law, so a slot's hottest ids take thousands of a batch's 65536
// entries and are cut into hot chunks), widths 11 (DeepFM), 16 (DCN, Wide&Deep's deep part) and
// 1 (Wide&Deep's wide part, measured on the same keys), batch 65536, mixed precision's f16
// gradient into an f32 table, Adam (the configs' optimizer). Bytes: each entry's gradient row
// read, each distinct row's weight and two states read and written. Before timing, the GPU's
// gradient sums (a store-sum step into a zeroed table) must equal the CPU's bit for bit.
void bench_narrow_update(bool cuda, int device, std::int64_t batch, double copy_gbs) {
  const std::vector<std::int64_t> sizes(26, 2000);
  const std::int64_t S = static_cast<std::int64_t>(sizes.size()), n = batch * S;
  const std::int64_t rows_in_table = S * 2000;
  const std::vector<std::int64_t> rows = datagen_keys(sizes, n);
  const Place place = cuda ? Place::cuda(device) : Place::host();
  const StreamHandle s = cuda ? current_stream(device) : nullptr;
  const UpdatePlan plan = UpdatePlan::of(rows, rows_in_table, place, s);
  const std::int64_t distinct = plan.count.to_vector<std::int64_t>()[0];
  std::printf(
      "\n(f) narrow rows (DeepFM, Wide&Deep, DCN): %lld entries over %lld distinct rows of 26 "
      "slots x 2000 ids, f16 gradient, Adam, f32 table\n",
      static_cast<long long>(n), static_cast<long long>(distinct));
  optim::OptimizerConfig adam;
  adam.type = optim::OptimizerType::Adam;
  for (const std::int64_t V : {11, 16, 1}) {
    const Tensor grad = Tensor::uniform({n, V}, -1, 1, 29, DType::F32, place).to(DType::F16);
    auto sums_at = [&](const kernels::KernelTable& k, const UpdatePlan& p, const Tensor& g,
                       StreamHandle st) {
      const Tensor out = Tensor::zeros({rows_in_table, V}, DType::F32, g.place());
      k.update_rows(p.seg(), nullptr, g.data(), kernels::ValueType::F16,
                    kernels::Values{out.data<float>()}, V, kernels::RowStates{}, 1,
                    optim::store_sum_step(), nullptr, st);
      return out.to_vector<float>();
    };
    if (cuda) {
      const std::vector<float> got = sums_at(kernels::on(place), plan, grad, s);
      const std::vector<float> want = sums_at(
          kernels::on(Place::host()), UpdatePlan::of(rows, rows_in_table, Place::host(), nullptr),
          grad.to(Place::host()), nullptr);
      if (got.size() != want.size() ||
          std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) {
        throw Error("bench_narrow_update: the GPU's gradient sums of dim " + std::to_string(V) +
                    " differ from the CPU's");
      }
    }
    const Tensor w = Tensor::uniform({rows_in_table, V}, -0.05, 0.05, 31, DType::F32, place);
    const Tensor m = Tensor::zeros({rows_in_table, V}, DType::F32, place);
    const Tensor v = Tensor::zeros({rows_in_table, V}, DType::F32, place);
    const kernels::RowStates st{m.data<float>(), v.data<float>(), nullptr};
    std::int64_t step = 0;
    const double ms = time_ms(cuda, device, 3, cuda ? 30 : 2, [&] {
      ++step;
      kernels::on(place).update_rows(plan.seg(), nullptr, grad.data(), kernels::ValueType::F16,
                                     kernels::Values{w.data<float>()}, V, st, step,
                                     optim::make_update_step(adam, 1e-3f, step), nullptr, s);
    });
    const double bytes = static_cast<double>(n) * V * 2.0 + 6.0 * distinct * V * 4.0;
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    const double pct = cuda ? 100.0 * gbs / copy_gbs : 0.0;
    std::printf("    dim %-3lld %8.3f ms %8.1f GB/s %5.0f%% of copy\n", static_cast<long long>(V),
                ms, gbs, pct);
    if (!cuda) continue;
    const std::string tag = "narrow rows' Adam update, dim " + std::to_string(V);
    summary(tag + " (ms)", ms, 3, "-", "-");
    summary(tag + " (% of copy)", pct, 0, "-", "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, torch = true;
  std::string only;  // sections to run alone (letters), or all
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--no-torch") {
      torch = false;
    } else if (a == "--short-bags") {
      only += "d";
    } else if (a == "--only" && i + 1 < argc) {
      only += argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: bench_embedding [--quick] [--no-torch] [--only c,d,e] [--short-bags]\n");
      return 2;
    }
  }
  auto wanted = [&](char section) {
    return only.empty() || only.find(section) != std::string::npos;
  };
  // The peer script sits next to this source file in the checkout.
  const std::string script = std::string(EMBER_BENCH_SOURCE_DIR) + "/torch_embedding.py";
  try {
    const bool cuda = !quick && cuda_available();
    if (!quick && !cuda) {
      std::printf("no CUDA device: running the --quick CPU mode\n");
    }
    if (!cuda) {
      bench_hash_table(false, 0, 1 << 16, 0);
      bench_row_init(false, 0, 0);
      StepShape s;
      for (auto v : kCriteoKaggleSizes)
        s.sizes.push_back(std::max<std::int64_t>(1, v / 1000));
      s.batch = 256;
      s.dim = 16;
      bench_dlrm(false, 0, s, 0, false, script);
      bench_onehot(false, 0, s, 0, *distributed::make_solo_communicator(Place::host()));
      bench_short_bags(false, 0, s, 0);
      bench_frequent_sums(false, 0, s, 0);
      bench_narrow_update(false, 0, 256, 0);
      std::printf("\nquick CPU mode: no SUMMARY figures (they are measured on the GPU)\n");
      return 0;
    }
    const int device = 0;
    const double copy_gbs = copy_bandwidth_gbs(device);
    std::printf("device copy bandwidth (read + write): %.1f GB/s\n", copy_gbs);
    summary("device copy bandwidth (GB/s)", copy_gbs, 0, "-", "-");
    StepShape s;
    s.sizes = kCriteoKaggleSizes;
    s.batch = 65536;
    s.dim = 128;
    if (wanted('a')) {
      bench_hash_table(true, device, std::int64_t{1} << 27, copy_gbs);
      bench_row_init(true, device, copy_gbs);
    }
    if (wanted('b')) bench_dlrm(true, device, s, copy_gbs, torch, script);
    release_cached_memory(device);
    if (wanted('c')) {
      bench_onehot(true, device, s, copy_gbs,
                   *distributed::make_solo_communicator(Place::cuda(device)));
    }
    release_cached_memory(device);
    if (wanted('d')) bench_short_bags(true, device, s, copy_gbs);
    release_cached_memory(device);
    if (wanted('e')) bench_frequent_sums(true, device, s, copy_gbs);
    release_cached_memory(device);
    if (wanted('f')) bench_narrow_update(true, device, 65536, copy_gbs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_embedding failed: %s\n", e.what());
    return 1;
  }
  std::printf("\n");
  for (const auto& s : summaries) {
    std::printf("SUMMARY | %s | %s | %s | %s | %s\n", s.area.c_str(), s.metric.c_str(),
                s.value.c_str(), s.target.c_str(), s.met.c_str());
  }
  return 0;
}
