// The replayed traces of bench_memory ((b)-(e)) and their replay: the same traces in the quick
// CPU run as on the device, so the quick run's fragmentation figures are the device's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/memory_bench_common.hpp"
#include "core/memory_candidates.hpp"

namespace ember::bench {

// ---------------------------------------------------------------------------------------------
// Traces

struct Op {
  enum Kind : std::uint8_t { Alloc, Free, Record };
  Kind kind;
  std::uint8_t stream;  // Alloc/Free: the allocation's stream; Record: the other stream
  std::uint32_t slot;
  std::size_t bytes;
};

struct Trace {
  std::string name;
  std::vector<Op> ops;
  std::uint32_t slots = 0;
  std::int64_t peak_live = 0;  // the most requested bytes live at once
  bool cross_stream = false;
};

// Builds a trace while tracking which slots are live and the peak of live bytes.
class TraceBuilder {
 public:
  explicit TraceBuilder(std::string name) { t_.name = std::move(name); }
  std::uint32_t alloc(std::size_t bytes, int stream = 0) {
    std::uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = t_.slots++;
      sizes_.push_back(0);
      streams_.push_back(0);
    }
    sizes_[slot] = bytes;
    streams_[slot] = static_cast<std::uint8_t>(stream);
    live_ += static_cast<std::int64_t>(bytes);
    t_.peak_live = std::max(t_.peak_live, live_);
    t_.ops.push_back({Op::Alloc, static_cast<std::uint8_t>(stream), slot, bytes});
    return slot;
  }
  void free(std::uint32_t slot) {
    live_ -= static_cast<std::int64_t>(sizes_[slot]);
    t_.ops.push_back({Op::Free, streams_[slot], slot, sizes_[slot]});
    free_slots_.push_back(slot);
  }
  void record(std::uint32_t slot, int stream) {
    t_.ops.push_back({Op::Record, static_cast<std::uint8_t>(stream), slot, 0});
    t_.cross_stream = true;
  }
  Trace take() { return std::move(t_); }

 private:
  Trace t_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::size_t> sizes_;
  std::vector<std::uint8_t> streams_;
  std::int64_t live_ = 0;
};

inline std::size_t log_uniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  std::uniform_real_distribution<double> d(std::log(static_cast<double>(lo)),
                                           std::log(static_cast<double>(hi)));
  return static_cast<std::size_t>(std::exp(d(rng)));
}

// (b) small sizes, a live set wandering between 64 and 2048 blocks.
inline Trace churn_trace(std::size_t ops, bool lifo) {
  TraceBuilder b(lifo ? "(b) small churn, LIFO" : "(b) small churn, random");
  std::mt19937_64 rng(lifo ? 11 : 12);
  std::vector<std::uint32_t> live;
  for (std::size_t i = 0; i < ops; ++i) {
    if (live.size() < 64 || (live.size() < 2048 && rng() % 2 == 0)) {
      live.push_back(b.alloc(log_uniform(rng, 512, 1 * MiB)));
    } else {
      const std::size_t k = lifo ? live.size() - 1 : rng() % live.size();
      b.free(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (auto s : live)
    b.free(s);
  return b.take();
}

// (c) and (d): a model's training iterations. Deep networks repeat their layers, so the model
// is a few kinds of block (each with its own tensor shapes), each repeated several times, as in
// a CTR model's MLP towers or a transformer's layers. Parameters live throughout; the forward
// pass keeps each layer's activation plus short-lived workspaces and temporaries; the backward
// pass allocates gradients, frees the activations in reverse order, and the optimizer step
// frees the weight gradients. With `drift`, the batch size (and so every activation) changes by
// up to +-drift samples per iteration.
inline Trace training_trace(int iterations, int drift) {
  TraceBuilder b(drift == 0 ? "(c) training iterations" : "(d) variable batch");
  std::mt19937_64 rng(21);
  struct Layer {
    std::size_t param, act, workspace;  // act: bytes per sample
  };
  std::vector<Layer> kinds;
  for (int k = 0; k < 8; ++k) {
    Layer layer;
    layer.param = log_uniform(rng, 16 * KiB, 32 * MiB) / 4 * 4;
    layer.act = log_uniform(rng, 1 * KiB, 64 * KiB) / 4 * 4;
    layer.workspace = log_uniform(rng, 4 * KiB, 4 * MiB) / 256 * 256;
    kinds.push_back(layer);
  }
  std::vector<Layer> layers;
  for (const Layer& kind : kinds) {
    const int repeats = 2 + static_cast<int>(rng() % 8);
    for (int r = 0; r < repeats; ++r)
      layers.push_back(kind);
  }
  const int n = static_cast<int>(layers.size());
  std::vector<std::uint32_t> params;
  for (const Layer& l : layers) {
    params.push_back(b.alloc(l.param));
    params.push_back(b.alloc(l.param / 64 + 4));  // bias / norm parameters
  }
  int batch = 512;
  std::uniform_int_distribution<int> step(-drift, drift);
  for (int it = 0; it < iterations; ++it) {
    if (drift > 0) batch = std::clamp(batch + step(rng), 256, 768);
    const auto input = b.alloc(std::size_t{64} * batch);
    std::vector<std::uint32_t> acts;
    for (const Layer& l : layers) {
      const auto ws = b.alloc(l.workspace);
      const auto tmp = b.alloc(l.act * batch / 4 + 256);
      acts.push_back(b.alloc(l.act * batch));
      b.free(tmp);
      b.free(ws);
    }
    const auto loss = b.alloc(4 * batch);
    std::uint32_t grad_in = b.alloc(layers.back().act * batch);
    b.free(loss);
    std::vector<std::uint32_t> weight_grads;
    for (int l = n - 1; l >= 0; --l) {
      const auto ws = b.alloc(layers[l].workspace);
      weight_grads.push_back(b.alloc(layers[l].param));
      weight_grads.push_back(b.alloc(layers[l].param / 64 + 4));
      const auto grad_out = b.alloc(layers[l].act * batch);
      b.free(ws);
      b.free(acts[l]);
      b.free(grad_in);
      grad_in = grad_out;
    }
    b.free(grad_in);
    b.free(input);
    for (auto g : weight_grads)
      b.free(g);  // the optimizer step is done
  }
  for (auto p : params)
    b.free(p);
  return b.take();
}

// (e) producer/consumer: blocks allocated on stream 0, used on stream 1, freed on stream 0.
inline Trace cross_stream_trace(std::size_t ops) {
  TraceBuilder b("(e) cross-stream, record_stream");
  std::mt19937_64 rng(31);
  std::vector<std::uint32_t> live;
  for (std::size_t i = 0; i < ops; ++i) {
    if (live.size() < 16 || (live.size() < 256 && rng() % 2 == 0)) {
      const auto s = b.alloc(log_uniform(rng, 4 * KiB, 4 * MiB));
      b.record(s, 1);
      live.push_back(s);
    } else {
      const std::size_t k = rng() % live.size();
      b.free(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (auto s : live)
    b.free(s);
  return b.take();
}

// The traces (b)-(e), the same in the quick run as on the device: the caching policy depends only
// on the sizes and streams, so the quick run's fragmentation figures are the device's.
inline std::vector<Trace> benchmark_traces() {
  std::vector<Trace> traces;
  traces.push_back(churn_trace(1000000, true));
  traces.push_back(churn_trace(1000000, false));
  traces.push_back(training_trace(200, 0));
  traces.push_back(training_trace(300, 8));
  traces.push_back(cross_stream_trace(200000));
  return traces;
}

struct ReplayResult {
  double ns_per_op = 0;
  std::int64_t peak_reserved = -1;
  std::int64_t device_allocs = -1;
};

inline ReplayResult replay(Candidate& c, const Trace& t, const std::vector<StreamHandle>& streams) {
  c.reset();
  std::vector<void*> slots(t.slots, nullptr);
#if EMBER_WITH_CUDA
  auto* torch = dynamic_cast<TorchCandidate*>(&c);
#endif
  const auto t0 = Clock::now();
  for (const Op& op : t.ops) {
    switch (op.kind) {
      case Op::Alloc:
#if EMBER_WITH_CUDA
        if (torch != nullptr && t.cross_stream) {
          slots[op.slot] = torch->alloc_for_streams(op.bytes, streams[op.stream]);
          break;
        }
#endif
        slots[op.slot] = c.alloc(op.bytes, streams[op.stream]);
        break;
      case Op::Free:
        c.free(slots[op.slot], op.bytes, streams[op.stream]);
        break;
      case Op::Record:
        c.record_stream(slots[op.slot], streams[op.stream]);
        break;
    }
  }
  const double s = seconds_since(t0);
  c.settle();
  ReplayResult r;
  r.ns_per_op = s * 1e9 / static_cast<double>(t.ops.size());
  r.peak_reserved = c.peak_reserved();
  r.device_allocs = c.device_allocs();
  return r;
}

// The time of one replay is a few milliseconds, as long as scheduling noise: bench_memory replays
// each trace several times, the candidates interleaved (so a slow stretch of the machine hits them
// alike), and keeps the median time with the first replay's fragmentation figures (the same in
// every replay for Ember's allocators, which start empty each time).
inline ReplayResult median_replay(const std::vector<ReplayResult>& runs) {
  std::vector<double> ns;
  for (const auto& r : runs)
    ns.push_back(r.ns_per_op);
  std::sort(ns.begin(), ns.end());
  ReplayResult out = runs.front();
  out.ns_per_op = ns[ns.size() / 2];
  return out;
}

}  // namespace ember::bench
