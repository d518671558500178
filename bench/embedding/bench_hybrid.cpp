// HybridSparseEmbedding against LocalizedSlotSparseEmbeddingOneHot on the same devices
// (docs/performance.md, "HybridSparseEmbedding"): a DLRM-shaped one-hot embedding step (26
// Criteo-Kaggle tables, dim 128, global batch 65536, power-law keys, one key per slot) on D ranks,
// forward + backward + update with SGD and AdaGrad, in samples/s; the hybrid's frequent
// categories chosen by HugeCTR's rule (NVLink_SingleNode, max_num_frequent_categories 2, as in
// HugeCTR's MLPerf DLRM) from 20 batches. Also prints what each step moves between ranks: the
// one-hot layer's all-to-all, and the hybrid's smaller all-to-all plus its all-reduce.
//
// Usage: bench_hybrid                 (GPU: every visible device as one rank each, NCCL; then
//                                      fewer ranks down to one; SUMMARY lines last)
//        bench_hybrid --gpus N        (at most N devices)
//        bench_hybrid --quick         (CPU: tiny tables, 1 to 3 in-process ranks, in seconds)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/embedding/hybrid_frequent.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "ember/tensor/random.hpp"

namespace {

using namespace ember;
using namespace ember::embedding;
using Clock = std::chrono::steady_clock;

// Criteo Kaggle's 26 cardinalities (as bench_embedding.cpp, which says where they come from).
const std::vector<std::int64_t> kCriteoKaggleSizes = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};

struct StepShape {
  std::vector<std::int64_t> sizes;
  std::int64_t batch = 0, dim = 0;
};

// One key per slot, power-law within each table (the same law as bench_embedding's).
std::vector<std::int64_t> batch_keys(const StepShape& s, std::uint64_t seed) {
  const auto S = static_cast<std::int64_t>(s.sizes.size());
  std::vector<std::int64_t> keys(s.batch * S), begin(S, 0);
  for (std::int64_t t = 1; t < S; ++t)
    begin[t] = begin[t - 1] + s.sizes[t - 1];
  for (std::int64_t i = 0; i < s.batch * S; ++i) {
    const std::int64_t t = i % S;
    const double u = random::uniform01(seed, static_cast<std::uint64_t>(i));
    const auto rank =
        static_cast<std::uint64_t>(std::exp(u * std::log(static_cast<double>(s.sizes[t]) + 1.0))) -
        1;
    keys[i] = begin[t] + static_cast<std::int64_t>(random::mix64(rank) % s.sizes[t]);
  }
  return keys;
}

CsrTensor to_csr(const std::vector<std::int64_t>& keys, Place place) {
  std::vector<std::int64_t> offsets(keys.size() + 1);
  for (std::size_t i = 0; i < offsets.size(); ++i)
    offsets[i] = static_cast<std::int64_t>(i);
  return CsrTensor(Tensor::from_vector(offsets, place), Tensor::from_vector(keys, place),
                   static_cast<std::int64_t>(keys.size()));
}

struct Result {
  double step_ms = 0;               // the slowest rank's median
  std::vector<float> first_output;  // rank 0's first (evaluation) forward
};

// D ranks (threads), each timing `reps` whole steps after warming up.
Result run(const EmbeddingConfig& config, const optim::OptimizerConfig& opt,
           const std::vector<std::vector<std::int64_t>>& batches, int D, bool cuda) {
  std::vector<distributed::CommunicatorPtr> comms;
  if (cuda) {
    std::vector<int> devices(D);
    for (int d = 0; d < D; ++d)
      devices[d] = d;
    comms = distributed::make_nccl_communicators(devices);
  } else {
    comms = distributed::make_in_process_communicators(D);
  }
  const std::int64_t B =
      config.slot_num > 0 ? static_cast<std::int64_t>(batches[0].size()) / config.slot_num : 0;
  const std::int64_t Bl = B / D, S = config.slot_num, V = config.vec_size;
  const int reps = cuda ? 10 : 3;
  std::vector<double> ms(D, 0);
  std::vector<std::exception_ptr> errors(D);
  Result result;
  std::vector<std::thread> threads;
  for (int r = 0; r < D; ++r) {
    threads.emplace_back([&, r] {
      try {
        distributed::Communicator& comm = *comms[r];
        const Place place = comm.place();
        SparseEmbedding emb(config, opt, comm);
        std::vector<CsrTensor> csr;
        for (const auto& keys : batches)
          csr.push_back(to_csr(keys, place));
        const Tensor grad = Tensor::uniform({Bl, S, V}, -1, 1, 7 + static_cast<std::uint64_t>(r),
                                            DType::F32, place);
        auto sync = [&] {
          if (cuda) synchronize_stream(current_stream(place.device()));
        };
        std::size_t next = 0;
        auto step = [&] {
          emb.forward(csr[next++ % csr.size()], r * Bl, Bl);
          emb.backward(grad);
          emb.update();
        };
        const Tensor first = emb.forward(csr[0], r * Bl, Bl, false);
        if (r == 0) result.first_output = first.to(Place::host()).to_vector<float>();
        for (int i = 0; i < 3; ++i)
          step();
        std::vector<double> times;
        for (int i = 0; i < reps; ++i) {
          sync();
          comm.barrier();
          const auto t0 = Clock::now();
          step();
          sync();
          times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        std::sort(times.begin(), times.end());
        ms[r] = times[times.size() / 2];
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  result.step_ms = *std::max_element(ms.begin(), ms.end());
  return result;
}

struct Traffic {
  double onehot_mb = 0, hybrid_a2a_mb = 0, hybrid_allreduce_mb = 0;
};

// Bytes one step moves between ranks (forward and backward, every rank's sends summed; a ring
// all-reduce sends 2 (D - 1) / D of its buffer per rank).
Traffic traffic(const std::vector<std::int64_t>& keys, const std::vector<std::int64_t>& frequent,
                std::int64_t S, std::int64_t V, int D) {
  Traffic t;
  const auto B = static_cast<std::int64_t>(keys.size()) / S;
  const std::int64_t Bl = B / D;
  double all = 0, infrequent = 0;
  for (std::int64_t i = 0; i < B * S; ++i) {
    const std::int64_t b = i / S, s = i % S;
    if (static_cast<int>(s % D) == static_cast<int>(b / Bl)) continue;  // stays on its rank
    all += 1;
    if (!std::binary_search(frequent.begin(), frequent.end(), keys[i])) infrequent += 1;
  }
  const double row = 4.0 * V, mb = 1e6;
  t.onehot_mb = 2 * all * row / mb;
  t.hybrid_a2a_mb = 2 * infrequent * row / mb;
  t.hybrid_allreduce_mb =
      D > 1 ? D * 2.0 * (D - 1) / D * static_cast<double>(frequent.size()) * row / mb : 0;
  return t;
}

struct Summary {
  std::string metric, value, target, met;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int max_gpus = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--gpus" && i + 1 < argc) {
      max_gpus = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_hybrid [--quick] [--gpus N]\n");
      return 2;
    }
  }
  std::vector<Summary> summaries;
  try {
    const bool cuda = !quick && cuda_available();
    if (!quick && !cuda) std::printf("no CUDA device: running the --quick CPU mode\n");
    StepShape shape;
    std::vector<int> rank_counts;
    if (cuda) {
      shape.sizes = kCriteoKaggleSizes;
      shape.batch = 65536;
      shape.dim = 128;
      const int devices = std::min(cuda_device_count(), max_gpus);
      for (int d = devices; d >= 1; d /= 2)
        rank_counts.push_back(d);
    } else {
      for (auto v : kCriteoKaggleSizes)
        shape.sizes.push_back(std::max<std::int64_t>(1, v / 1000));
      shape.batch = 240;
      shape.dim = 16;
      rank_counts = {1, 2, 3};
    }
    const auto S = static_cast<std::int64_t>(shape.sizes.size());
    std::vector<std::vector<std::int64_t>> batches;
    for (int i = 0; i < 4; ++i)
      batches.push_back(batch_keys(shape, 100 + i));
    // HugeCTR's statistics pass: 20 batches of keys (sorted by each choice, so copied).
    std::vector<std::int64_t> statistics;
    for (int i = 0; i < 20; ++i) {
      const auto keys = batch_keys(shape, 1000 + i);
      statistics.insert(statistics.end(), keys.begin(), keys.end());
    }
    std::printf(
        "one-hot embedding step: %lld tables, dim %lld, global batch %lld, power-law keys\n",
        static_cast<long long>(S), static_cast<long long>(shape.dim),
        static_cast<long long>(shape.batch));
    for (int D : rank_counts) {
      EmbeddingConfig onehot;
      onehot.name = "bench";
      onehot.type = EmbeddingType::LocalizedSlotOneHot;
      onehot.vec_size = shape.dim;
      onehot.slot_num = S;
      onehot.slot_size_array = shape.sizes;
      onehot.key_dtype = DType::I64;
      onehot.seed = 1;
      onehot.storage.location = StorageLocation::Device;
      EmbeddingConfig hybrid = onehot;
      hybrid.type = EmbeddingType::Hybrid;
      hybrid.hybrid.communication = HybridCommunication::NVLink_SingleNode;
      hybrid.hybrid.max_num_frequent_categories = 2;
      std::vector<std::int64_t> counted = statistics;
      FrequentChoiceInputs in;
      in.batch_size = in.batch_size_eval = shape.batch;
      in.batches = 20;
      in.ranks = D;
      const FrequentChoice choice = choose_frequent_categories(counted, hybrid.hybrid, in);
      hybrid.hybrid.frequent_keys = choice.keys;
      const Traffic t = traffic(batches[0], choice.keys, S, shape.dim, D);
      std::printf("\n%d rank(s) (%s): hybrid: %s\n", D, cuda ? "GPUs, NCCL" : "CPU threads",
                  choice.describe(hybrid.hybrid).c_str());
      std::printf(
          "  between ranks per step: one-hot all-to-all %.1f MB; hybrid all-to-all %.1f MB "
          "+ all-reduce %.1f MB\n",
          t.onehot_mb, t.hybrid_a2a_mb, t.hybrid_allreduce_mb);
      for (optim::OptimizerType ot : {optim::OptimizerType::SGD, optim::OptimizerType::AdaGrad}) {
        optim::OptimizerConfig opt;
        opt.type = ot;
        opt.schedule.base_lr = 0.01f;
        const Result a = run(onehot, opt, batches, D, cuda);
        const Result b = run(hybrid, opt, batches, D, cuda);
        const bool same = a.first_output.size() == b.first_output.size() &&
                          std::memcmp(a.first_output.data(), b.first_output.data(),
                                      a.first_output.size() * sizeof(float)) == 0;
        const double speed_a = shape.batch / (a.step_ms * 1e-3) / 1e6;
        const double speed_b = shape.batch / (b.step_ms * 1e-3) / 1e6;
        std::printf(
            "  %-8s one-hot %8.3f ms (%6.2f M samples/s)   hybrid %8.3f ms (%6.2f M "
            "samples/s)   hybrid / one-hot speed %.2fx   first outputs equal: %s\n",
            optim::optimizer_name(ot), a.step_ms, speed_a, b.step_ms, speed_b, speed_b / speed_a,
            same ? "yes" : "NO");
        if (!same) {
          std::fprintf(stderr,
                       "bench_hybrid: the hybrid's first forward differs from the "
                       "one-hot layer's\n");
          return 1;
        }
        if (!cuda) continue;
        const std::string tag = std::to_string(D) + " GPU(s), " + optim::optimizer_name(ot);
        summaries.push_back({"one-hot step, " + tag + " (M samples/s)",
                             std::to_string(speed_a).substr(0, 6), "-", "-"});
        summaries.push_back({"hybrid step, " + tag + " (M samples/s)",
                             std::to_string(speed_b).substr(0, 6), "-", "-"});
        const bool several = D > 1;
        summaries.push_back({"hybrid / one-hot step speed, " + tag + " (x)",
                             std::to_string(speed_b / speed_a).substr(0, 5), several ? ">= 1" : "-",
                             several ? (speed_b >= speed_a ? "yes" : "no") : "-"});
      }
    }
    if (!cuda) {
      std::printf("\nquick CPU mode: no SUMMARY figures (they are measured on GPUs)\n");
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hybrid failed: %s\n", e.what());
    return 1;
  }
  std::printf("\n");
  for (const auto& s : summaries) {
    std::printf("SUMMARY | embedding | %s | %s | %s | %s\n", s.metric.c_str(), s.value.c_str(),
                s.target.c_str(), s.met.c_str());
  }
  return 0;
}
