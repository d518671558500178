// bench_network: the dense half of DLRM on the device, against PyTorch in the same run.
//
//   bench_network            (GPU) forward + backward of DLRM's MLPs at batch 65536 (bottom
//                            13-512-256-128, top 480-1024-1024-512-256-1) in fp32 (TF32 off), TF32
//                            and bf16, with the FC layers' algorithm search on (the default) and
//                            off; one FC 1024->1024 + ReLU and the top MLP, fused (chained where
//                            the search says so) against InnerProduct + ReLU layers and against a
//                            fully unfused plain GEMM + bias + ReLU kernels version; the dot
//                            interaction (26 x 128) forward + backward in fp32, TF32 (f32
//                            activations, the network's allow_tf32: TF32 tensor cores) and bf16.
//                            PyTorch's numbers come
//                            from torch_mlp.py when `python3 -c 'import torch'` works. Ends with
//                            "SUMMARY |" lines.
//   bench_network --interaction  (GPU) only the interaction at DLRM's shape (26 x 128, F1 = 27):
//                            forward and backward timed apart in fp32, tf32, f16 and bf16, each
//                            against the bytes it must move (GB/s and % of the device's HBM
//                            peak from its memory clock and bus width); also part of the full
//                            run. Then the f16 and bf16 backward timed alternately, in both
//                            allocation orders (is a gap between them the kernels'?).
//   bench_network --multicross  (GPU) only DCN's cross network (MultiCross, 3 layers over
//                            [batch, 429]): forward and backward timed apart in fp32, f16 and
//                            bf16, against the bytes they must move (forward: read x0, write the
//                            output; backward: read x0 and the output gradient, write the input
//                            gradient) as GB/s and % of HBM peak.
//   bench_network --quick    a short CPU run of the same MLPs and interaction at batch 1024.
//   Options: --batch N, --no-torch, --repeats N.
//
// Like with like: both sides compute every bias and ReLU and all three products of every layer
// except the input gradient of the bottom MLP's first layer (its input, the dense features,
// needs none: HugeCTR's skip_dgrad, PyTorch's requires_grad=False); the top MLP's input gets a
// gradient on both sides. Ember keeps f32 master weights and writes f32 weight gradients in
// bf16 mode (PyTorch's bf16 model writes bf16 ones); the optimizer is outside both timings.
//
// Timing: CUDA events around each forward + backward, 5 warm-up iterations, median of the
// repeats. Planning (the algorithm search, which times each distinct product once per process)
// happens when a network is built and is reported separately.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/build_context.hpp"
#include "ember/network/cublaslt_matmul.hpp"
#include "ember/network/fc_chain.hpp"
#include "ember/network/layer_registry.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"
#include "ember/tensor/tensor.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>

#include "ember/network/kernels/launchers.hpp"
#endif

#ifndef EMBER_SOURCE_DIR
#define EMBER_SOURCE_DIR "."
#endif

namespace ember::bench {

using namespace ember::network;

// A chain of layers built from JSON, with its own parameter store.
struct Net {
  std::shared_ptr<ParameterStore> store;
  std::unique_ptr<BuildContext> ctx;
  std::vector<LayerPtr> layers;
  std::map<std::string, BlobPtr> blobs;
  int chained = 0;

  double setup_ms = 0;        // chaining + planning (the algorithm search) at build
  std::int64_t searched = 0;  // products timed by that search (0: all from the cache)

  Net(Place place, DType dtype, bool tf32, bool search = true) {
    const bool half = dtype == DType::F16 || dtype == DType::BF16;
    store = std::make_shared<ParameterStore>(place, DType::F32, half ? dtype : DType::F32);
    BuildOptions o;
    o.place = place;
    o.activation_dtype = dtype;
    o.allow_tf32 = tf32;
    o.algorithm_search = search;
    ctx = std::make_unique<BuildContext>(o, store);
  }
  void input(const std::string& name, const Shape& shape, bool grad) {
    blobs[name] = make_input_blob(name, shape, ctx->options().activation_dtype, ctx->place(), grad);
  }
  void add(const nlohmann::json& j) {
    const auto h = read_layer_header(j);
    std::vector<BlobPtr> bottoms;
    for (const auto& b : h.bottoms)
      bottoms.push_back(blobs.at(b));
    layers.push_back(create_layer(j, bottoms, *ctx));
    for (const auto& t : layers.back()->tops())
      blobs[t->name()] = t;
  }
  void finalize(bool chain) {
    ctx->allocate();
    for (auto& l : layers)
      l->bind();
    store->initialize(1234);
    std::vector<Layer*> ptrs;
    for (auto& l : layers)
      ptrs.push_back(l.get());
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t before = network::cuda::searched_product_count();
    if (chain) {
      chained = chain_fully_connected_layers(ptrs);
    } else {
      for (Layer* l : ptrs) {
        if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l)) fc->plan();
      }
    }
    setup_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    searched = network::cuda::searched_product_count() - before;
  }
  void print_plans() const {
    std::printf("    setup %.0f ms (%lld products timed), chained FC pairs: %d\n", setup_ms,
                static_cast<long long>(searched), chained);
    for (const auto& l : layers) {
      if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l.get())) {
        std::printf("    %s: %s\n", fc->name().c_str(), fc->plan_summary().c_str());
      }
    }
  }
  // Milliseconds of the FC layers' cuBLASLt products alone, as the search timed them.
  double product_ms() const {
    double ms = 0;
    for (const auto& l : layers) {
      if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l.get())) ms += fc->product_ms();
    }
    return ms;
  }
  void fill_random(const std::string& name, std::uint64_t seed) {
    const BlobPtr& b = blobs.at(name);
    Tensor host = Tensor::uniform(b->shape(), -1.0, 1.0, seed, b->dtype(), Place::host());
    b->value().copy_from(host);
  }
  void set_output_grad(std::uint64_t seed) {
    const Blob& out = *layers.back()->tops()[0];
    Tensor host = Tensor::uniform(out.shape(), -0.5, 0.5, seed, out.dtype(), Place::host());
    out.grad().copy_from(host);
  }
  void step(StreamHandle s) {
    for (auto& l : layers)
      l->forward(true, s);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      if ((*it)->needs_backward()) (*it)->backward(s);
    }
  }
};

// How an MLP's FC + ReLU pairs are built:
//   Fused   FusedInnerProduct layers, chained where it pays (the way Ember runs them)
//   Layers  InnerProduct layers (bias in the product's epilogue where the search picks it) +
//           ReLU layers
//   Plain   InnerProduct layers with plain products (FcFusion::Plain: Ember's bias kernel,
//           column-sum kernel for the bias gradient) + ReLU layers: a fully unfused FC + ReLU
enum class FcBuild { Fused, Layers, Plain };

// An MLP; the last layer without ReLU unless `last_relu`.
std::unique_ptr<Net> build_mlp(Place place, DType dtype, bool tf32, std::int64_t batch,
                               const std::vector<std::int64_t>& dims, bool last_relu,
                               bool input_grad, FcBuild how = FcBuild::Fused, bool search = true) {
  const bool fused = how == FcBuild::Fused;
  auto net = std::make_unique<Net>(place, dtype, tf32, search);
  net->input("x0", {batch, dims[0]}, input_grad);
  std::string prev = "x0";
  for (std::size_t i = 1; i < dims.size(); ++i) {
    const bool relu = i + 1 < dims.size() || last_relu;
    const std::string out = cat("x", i);
    nlohmann::json j = {
        {"name", cat("fc", i)}, {"bottom", prev}, {"fc_param", {{"num_output", dims[i]}}}};
    if (fused && relu) {
      j["type"] = "FusedInnerProduct";
      j["top"] = out;
      net->add(j);
    } else {
      j["type"] = "InnerProduct";
      j["top"] = relu ? cat(out, "_lin") : out;
      net->add(j);
      if (relu) {
        net->add({{"name", cat("relu", i)},
                  {"type", "ReLU"},
                  {"bottom", cat(out, "_lin")},
                  {"top", out}});
      }
    }
    prev = out;
  }
  if (how == FcBuild::Plain && place.is_cuda()) {
    for (auto& l : net->layers) {
      if (auto* fc = dynamic_cast<FullyConnectedLayer*>(l.get())) fc->set_fusion(FcFusion::Plain);
    }
  }
  net->finalize(fused);
  net->fill_random("x0", 7);
  net->set_output_grad(8);
  return net;
}

std::unique_ptr<Net> build_interaction(Place place, DType dtype, bool tf32, std::int64_t batch) {
  auto net = std::make_unique<Net>(place, dtype, tf32);
  net->input("mlp", {batch, 128}, true);
  net->input("emb", {batch, 26, 128}, true);
  net->add({{"name", "interaction"},
            {"type", "Interaction"},
            {"bottom", {"mlp", "emb"}},
            {"top", "out"}});
  net->finalize(false);
  net->fill_random("mlp", 1);
  net->fill_random("emb", 2);
  net->set_output_grad(3);
  return net;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The median over `repeats` of one call of `work` on device `device`'s current stream, timed by
// CUDA events, after `warmup` calls.
template <class Work>
double time_gpu_ms(int device, int warmup, int repeats, Work&& work) {
  const StreamHandle s = current_stream(device);
  for (int i = 0; i < warmup; ++i)
    work(s);
  synchronize_stream(s);
  Event start = Event::create(device, true), end = Event::create(device, true);
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    start.record(s);
    work(s);
    end.record(s);
    end.synchronize();
    t.push_back(Event::elapsed_ms(start, end));
  }
  return median(t);
}

double time_gpu_ms(Net& net, int warmup, int repeats) {
  return time_gpu_ms(net.ctx->place().device(), warmup, repeats,
                     [&](StreamHandle s) { net.step(s); });
}

double time_cpu_ms(Net& net, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i)
    net.step(nullptr);
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto a = std::chrono::steady_clock::now();
    net.step(nullptr);
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  return median(t);
}

struct Summary {
  std::string metric, value, target, met;
};
std::vector<Summary> summaries;

std::string fmt(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// PyTorch's figures, or an empty object when it cannot run.
nlohmann::json run_torch(std::int64_t batch, int repeats) {
  if (std::system("python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    std::printf("PyTorch: python3 cannot import torch here; comparisons skipped\n");
    return {};
  }
  const std::string cmd =
      cat("python3 ", EMBER_SOURCE_DIR, "/bench/network/torch_mlp.py --json --batch ", batch,
          " --repeats ", repeats, " 2>&1");
  std::printf("PyTorch: %s\n", cmd.c_str());
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string text;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr)
    text += buf;
  const int rc = pclose(p);
  const auto brace = text.rfind("\n{");
  const std::string line = text.substr(brace == std::string::npos ? 0 : brace + 1);
  try {
    auto j = nlohmann::json::parse(line);
    if (rc != 0 || j.contains("error")) {
      std::printf("PyTorch peer failed (exit %d): %s\n", rc, text.c_str());
      return {};
    }
    std::printf("PyTorch %s on %s\n", j.value("torch", "?").c_str(),
                j.value("device", "?").c_str());
    return j;
  } catch (const std::exception&) {
    std::printf("PyTorch peer output not understood (exit %d):\n%s\n", rc, text.c_str());
    return {};
  }
}

void compare(const std::string& what, double ember_ms, const nlohmann::json& torch,
             const std::vector<std::string>& path) {
  const nlohmann::json* node = &torch;
  for (const auto& k : path) {
    if (!node->is_object() || !node->contains(k)) {
      node = nullptr;
      break;
    }
    node = &(*node)[k];
  }
  if (node == nullptr || !node->is_number()) {
    std::printf("  %-44s Ember %9.3f ms   PyTorch    -\n", what.c_str(), ember_ms);
    summaries.push_back({cat(what, " fwd+bwd, ms (Ember / PyTorch)"), cat(fmt(ember_ms), " / -"),
                         ">= 1.0x PyTorch", "-"});
    return;
  }
  const double t = node->get<double>();
  const double speedup = t / ember_ms;
  std::printf("  %-44s Ember %9.3f ms   PyTorch %9.3f ms   %.2fx\n", what.c_str(), ember_ms, t,
              speedup);
  summaries.push_back({cat(what, " fwd+bwd, ms (Ember / PyTorch)"),
                       cat(fmt(ember_ms), " / ", fmt(t), " (", fmt(speedup, 2), "x)"),
                       ">= 1.0x PyTorch", speedup >= 1.0 ? "yes" : "no"});
}

const std::vector<std::int64_t> kBottom{13, 512, 256, 128};
const std::vector<std::int64_t> kTop{480, 1024, 1024, 512, 256, 1};

struct Mode {
  const char* name;
  DType dtype;
  bool tf32;
};
const Mode kModes[] = {
    {"fp32", DType::F32, false}, {"tf32", DType::F32, true}, {"bf16", DType::BF16, false}};

// The device's HBM peak in GB/s: memory clock (kHz) x bus width (bits) x 2 (double data rate).
double hbm_peak_gbs() {
#if EMBER_WITH_CUDA
  int device = 0, khz = 0, bits = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device));
  return 2.0 * khz * 1e3 * bits / 8.0 / 1e9;
#else
  return 0.0;
#endif
}

// The interaction alone at DLRM's shape, forward and backward timed apart. The least each must
// move: forward reads X (27 x 128) and writes the output (480), backward reads X and the output
// gradient and writes X's gradient.
void interaction_microbench(std::int64_t batch, int repeats) {
  const double peak = hbm_peak_gbs();
  std::printf(
      "\nInteraction alone, batch %lld, 26 x 128 (F1 = 27) -> 480; HBM peak %.0f GB/s "
      "(memory clock x bus width):\n",
      static_cast<long long>(batch), peak);
  const Mode modes[] = {{"fp32", DType::F32, false},
                        {"tf32", DType::F32, true},
                        {"f16", DType::F16, false},
                        {"bf16", DType::BF16, false}};
  for (const auto& m : modes) {
    auto net = build_interaction(Place::cuda(0), m.dtype, m.tf32, batch);
    Layer& layer = *net->layers.at(0);
    const int device = net->ctx->place().device();
    const double fwd =
        time_gpu_ms(device, 5, repeats, [&](StreamHandle s) { layer.forward(true, s); });
    const double bwd = time_gpu_ms(device, 5, repeats, [&](StreamHandle s) { layer.backward(s); });
    const double elem = m.dtype == DType::F32 ? 4.0 : 2.0;
    const double x = 27.0 * 128, out = 480.0;
    const double fwd_gb = static_cast<double>(batch) * elem * (x + out) / 1e9;
    const double bwd_gb = static_cast<double>(batch) * elem * (2 * x + out) / 1e9;
    std::string kernels = "?";
#if EMBER_WITH_CUDA
    kernels = cat(network::cuda::interaction_kernel_name(
                      network::cuda::interaction_kernel(m.dtype, 26, 128, false, m.tf32)),
                  " / ",
                  network::cuda::interaction_kernel_name(
                      network::cuda::interaction_kernel(m.dtype, 26, 128, true, m.tf32)));
#endif
    for (const auto& [what, ms, gb] :
         {std::tuple{"forward", fwd, fwd_gb}, std::tuple{"backward", bwd, bwd_gb}}) {
      const double gbs = gb / (ms / 1e3);
      std::printf("  %-5s %-8s %8.3f ms  %6.0f GB/s  %5.1f %% of HBM peak  (%s)\n", m.name, what,
                  ms, gbs, peak > 0 ? 100.0 * gbs / peak : 0.0, kernels.c_str());
      summaries.push_back({cat("Interaction 26x128 ", what, " ", m.name, ", ms (GB/s)"),
                           cat(fmt(ms), " (", fmt(gbs, 0), ")"), "-", "-"});
    }
  }
}

// The f16 and bf16 backward side by side: both networks alive, timed alternately for 3 rounds,
// once with the f16 network allocated first and once with the bf16 one first. The two kernels
// differ only in their fragment loads and conversions (docs/performance.md, "The interaction
// alone"), so a gap that follows the dtype in every round is theirs (or the data's); one that
// follows the allocation order or the round is the buffers' placement or the device's.
void interaction_backward_f16_bf16(std::int64_t batch, int repeats) {
  std::printf("\nInteraction backward, f16 against bf16, timed alternately (ms per round):\n");
  for (const bool f16_first : {true, false}) {
    std::unique_ptr<Net> f16, bf16;
    if (f16_first) f16 = build_interaction(Place::cuda(0), DType::F16, false, batch);
    bf16 = build_interaction(Place::cuda(0), DType::BF16, false, batch);
    if (!f16_first) f16 = build_interaction(Place::cuda(0), DType::F16, false, batch);
    std::string rows[2];
    for (int round = 0; round < 3; ++round) {
      for (int k = 0; k < 2; ++k) {
        Net& net = k == 0 ? *f16 : *bf16;
        Layer& layer = *net.layers.at(0);
        const double ms = time_gpu_ms(net.ctx->place().device(), 5, repeats,
                                      [&](StreamHandle s) { layer.backward(s); });
        rows[k] += cat(round == 0 ? "" : " / ", fmt(ms));
      }
    }
    const char* order = f16_first ? "f16 allocated first" : "bf16 allocated first";
    std::printf("  %-21s f16 %s   bf16 %s\n", order, rows[0].c_str(), rows[1].c_str());
    summaries.push_back({cat("Interaction 26x128 backward f16 / bf16 alternately, ", order, ", ms"),
                         cat(rows[0], " | ", rows[1]), "-", "-"});
  }
}

std::unique_ptr<Net> build_multi_cross(Place place, DType dtype, std::int64_t batch,
                                       std::int64_t width, int layers) {
  auto net = std::make_unique<Net>(place, dtype, false);
  net->input("x", {batch, width}, true);
  net->add({{"name", "cross"},
            {"type", "MultiCross"},
            {"bottom", "x"},
            {"top", "out"},
            {"mc_param", {{"num_layers", layers}}}});
  net->finalize(false);
  net->fill_random("x", 1);
  net->set_output_grad(2);
  return net;
}

// DCN's cross network alone (26 x 16 embeddings + 13 dense = 429 columns, 3 layers), forward and
// backward timed apart. The least each must move: forward reads x0 and writes the output,
// backward reads x0 and the output gradient and writes x0's gradient (the per-row scalars s_l,
// 4 bytes per row and layer, and the weights are left out).
void multi_cross_microbench(std::int64_t batch, int repeats) {
  constexpr std::int64_t kWidth = 429;
  constexpr int kLayers = 3;
  const double peak = hbm_peak_gbs();
  std::printf("\nMultiCross alone, batch %lld, width %lld, %d layers; HBM peak %.0f GB/s:\n",
              static_cast<long long>(batch), static_cast<long long>(kWidth), kLayers, peak);
  const Mode modes[] = {
      {"fp32", DType::F32, false}, {"f16", DType::F16, false}, {"bf16", DType::BF16, false}};
  for (const auto& m : modes) {
    auto net = build_multi_cross(Place::cuda(0), m.dtype, batch, kWidth, kLayers);
    Layer& layer = *net->layers.at(0);
    const int device = net->ctx->place().device();
    const double fwd =
        time_gpu_ms(device, 5, repeats, [&](StreamHandle s) { layer.forward(true, s); });
    const double bwd = time_gpu_ms(device, 5, repeats, [&](StreamHandle s) { layer.backward(s); });
    const double row_gb =
        static_cast<double>(batch * kWidth) * (m.dtype == DType::F32 ? 4 : 2) / 1e9;
    std::string path = "?";
#if EMBER_WITH_CUDA
    path = network::cuda::cross_fused(kWidth, kLayers) ? "fused" : "per-layer";
#endif
    for (const auto& [what, ms, gb] :
         {std::tuple{"forward", fwd, 2 * row_gb}, std::tuple{"backward", bwd, 3 * row_gb}}) {
      const double gbs = gb / (ms / 1e3);
      std::printf("  %-5s %-8s %8.3f ms  %6.0f GB/s  %5.1f %% of HBM peak  (%s)\n", m.name, what,
                  ms, gbs, peak > 0 ? 100.0 * gbs / peak : 0.0, path.c_str());
      summaries.push_back({cat("MultiCross 429x3 ", what, " ", m.name, ", ms (GB/s)"),
                           cat(fmt(ms), " (", fmt(gbs, 0), ")"), "-", "-"});
    }
  }
}

int run_multi_cross(std::int64_t batch, int repeats) {
  std::printf("bench_network --multicross on CUDA device 0 (%s), median of %d after 5 warm-up\n",
              device_name(0).c_str(), repeats);
  multi_cross_microbench(batch, repeats);
  std::printf("\n");
  for (const auto& s : summaries) {
    std::printf("SUMMARY | network | %s | %s | %s | %s\n", s.metric.c_str(), s.value.c_str(),
                s.target.c_str(), s.met.c_str());
  }
  return 0;
}

int run_interaction(std::int64_t batch, int repeats) {
  std::printf("bench_network --interaction on CUDA device 0 (%s), median of %d after 5 warm-up\n",
              device_name(0).c_str(), repeats);
  interaction_microbench(batch, repeats);
  interaction_backward_f16_bf16(batch, repeats);
  std::printf("\n");
  for (const auto& s : summaries) {
    std::printf("SUMMARY | network | %s | %s | %s | %s\n", s.metric.c_str(), s.value.c_str(),
                s.target.c_str(), s.met.c_str());
  }
  return 0;
}

int run_gpu(std::int64_t batch, int repeats, bool with_torch) {
  const Place gpu = Place::cuda(0);
  std::printf("bench_network on CUDA device 0, batch %lld, median of %d after 5 warm-up\n\n",
              static_cast<long long>(batch), repeats);
  nlohmann::json torch = with_torch ? run_torch(batch, repeats) : nlohmann::json();

  std::printf("\nDLRM MLPs, forward + backward:\n");
  for (const Mode& m : kModes) {
    for (bool top : {false, true}) {
      const auto& dims = top ? kTop : kBottom;
      const std::string name =
          cat(top ? "top MLP 480-1024-1024-512-256-1 " : "bottom MLP 13-512-256-128 ", m.name);
      auto net = build_mlp(gpu, m.dtype, m.tf32, batch, dims, !top, top);
      compare(name, time_gpu_ms(*net, 5, repeats), torch, {"mlp", top ? "top" : "bottom", m.name});
      net->print_plans();
      // The same network with the search off (cuBLASLt's first choice, epilogues everywhere):
      // what the search gains.
      auto plain_choice =
          build_mlp(gpu, m.dtype, m.tf32, batch, dims, !top, top, FcBuild::Fused, false);
      const double off = time_gpu_ms(*plain_choice, 5, repeats);
      std::printf("    algorithm search off: %.3f ms, %d chained pair(s)\n", off,
                  plain_choice->chained);
    }
  }

  std::printf("\nFused FC + ReLU against unfused versions (same products):\n");
  for (const Mode& m : kModes) {
    auto fused = build_mlp(gpu, m.dtype, m.tf32, batch, {1024, 1024}, true, true, FcBuild::Fused);
    auto layers = build_mlp(gpu, m.dtype, m.tf32, batch, {1024, 1024}, true, true, FcBuild::Layers);
    auto plain = build_mlp(gpu, m.dtype, m.tf32, batch, {1024, 1024}, true, true, FcBuild::Plain);
    const double f = time_gpu_ms(*fused, 5, repeats), l = time_gpu_ms(*layers, 5, repeats),
                 p = time_gpu_ms(*plain, 5, repeats);
    std::printf(
        "  FC 1024->1024 + ReLU %s: fused %.3f ms; InnerProduct + ReLU layers %.3f ms "
        "(%.2fx); GEMM + bias + ReLU kernels %.3f ms (%.2fx)\n",
        m.name, f, l, l / f, p, p / f);
    fused->print_plans();
    // The ceiling of any fusion: the plain network's three products alone, as timed by the
    // search. When they are most of the unfused time (fp32 without TF32), no fusion of the
    // element-wise work can reach the 1.2x target.
    const double products = plain->product_ms();
    if (std::isfinite(products) && products > 0) {
      std::printf(
          "    the three products alone: %.3f ms of the unfused %.3f ms (%.0f%%): even "
          "free element-wise work caps fusion at %.2fx\n",
          products, p, 100.0 * products / p, p / products);
    }
    compare(cat("FC 1024x1024+ReLU ", m.name), f, torch, {"fc_relu", m.name});
    summaries.push_back({cat("fused FC+ReLU vs GEMM + bias + ReLU kernels, 1024x1024 ", m.name),
                         cat(fmt(p / f, 2), "x"), ">= 1.2x", p / f >= 1.2 ? "yes" : "no"});
    summaries.push_back({cat("fused FC+ReLU vs InnerProduct + ReLU layers, 1024x1024 ", m.name),
                         cat(fmt(l / f, 2), "x"), "-", "-"});
    auto top_fused = build_mlp(gpu, m.dtype, m.tf32, batch, kTop, false, true, FcBuild::Fused);
    auto top_plain = build_mlp(gpu, m.dtype, m.tf32, batch, kTop, false, true, FcBuild::Plain);
    auto top_layers = build_mlp(gpu, m.dtype, m.tf32, batch, kTop, false, true, FcBuild::Layers);
    const double tf = time_gpu_ms(*top_fused, 5, repeats), tp = time_gpu_ms(*top_plain, 5, repeats),
                 tl = time_gpu_ms(*top_layers, 5, repeats);
    std::printf(
        "  top MLP %s: FusedInnerProduct %.3f ms; InnerProduct + ReLU layers %.3f ms "
        "(%.2fx); GEMM + bias + ReLU kernels %.3f ms (%.2fx)\n",
        m.name, tf, tl, tl / tf, tp, tp / tf);
    summaries.push_back({cat("FusedInnerProduct top MLP vs GEMM + bias + ReLU kernels ", m.name),
                         cat(fmt(tp / tf, 2), "x"), ">= 1.2x", tp / tf >= 1.2 ? "yes" : "no"});
  }

  std::printf("\nInteraction (26 x 128 -> 480), forward + backward:\n");
  for (const Mode& m : kModes) {
    auto net = build_interaction(gpu, m.dtype, m.tf32, batch);
    const double ms = time_gpu_ms(*net, 5, repeats);
    // The floor: read the inputs and the output gradient once, write output and input grads.
    const double elem = m.dtype == DType::F32 ? 4.0 : 2.0;
    const double bytes = static_cast<double>(batch) * elem * (2 * 27 * 128 + 2 * 480 + 27 * 128);
    std::printf("  %s: %.3f ms (%.0f GB/s over the minimum traffic)\n", m.name, ms,
                bytes / ms / 1e6);
    compare(cat("Interaction ", m.name), ms, torch, {"interaction", m.name});
  }

  interaction_microbench(batch, repeats);

  std::printf("\n");
  for (const auto& s : summaries) {
    std::printf("SUMMARY | network | %s | %s | %s | %s\n", s.metric.c_str(), s.value.c_str(),
                s.target.c_str(), s.met.c_str());
  }
  return 0;
}

int run_quick(std::int64_t batch) {
  std::printf("bench_network --quick: CPU, batch %lld, fp32, median of 5\n",
              static_cast<long long>(batch));
  const Place cpu = Place::host();
  auto bottom = build_mlp(cpu, DType::F32, false, batch, kBottom, true, false);
  std::printf("  bottom MLP 13-512-256-128 fwd+bwd: %.3f ms\n", time_cpu_ms(*bottom, 1, 5));
  auto top = build_mlp(cpu, DType::F32, false, batch, kTop, false, true);
  std::printf("  top MLP 480-1024-1024-512-256-1 fwd+bwd: %.3f ms\n", time_cpu_ms(*top, 1, 5));
  auto unfused = build_mlp(cpu, DType::F32, false, batch, kTop, false, true, FcBuild::Layers);
  std::printf("  top MLP, InnerProduct + ReLU layers: %.3f ms\n", time_cpu_ms(*unfused, 1, 5));
  auto inter = build_interaction(cpu, DType::F32, false, batch);
  std::printf("  Interaction 26 x 128 fwd+bwd: %.3f ms\n", time_cpu_ms(*inter, 1, 5));
  std::printf("quick run done (no SUMMARY lines: those come from the full run on a GPU)\n");
  return 0;
}

}  // namespace ember::bench

int main(int argc, char** argv) {
  bool quick = false, with_torch = true, interaction_only = false, multi_cross_only = false;
  std::int64_t batch = 65536;
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--interaction") {
      interaction_only = true;
    } else if (a == "--multicross") {
      multi_cross_only = true;
    } else if (a == "--no-torch") {
      with_torch = false;
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::printf(
          "usage: bench_network [--quick | --interaction | --multicross] [--no-torch] [--batch N] "
          "[--repeats N]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  try {
    if (quick) return ember::bench::run_quick(batch == 65536 ? 1024 : batch);
    if (!ember::cuda_available()) {
      std::printf("bench_network: no CUDA device here, so only the quick CPU run is possible\n\n");
      return ember::bench::run_quick(1024);
    }
    if (interaction_only) return ember::bench::run_interaction(batch, repeats);
    if (multi_cross_only) return ember::bench::run_multi_cross(batch, repeats);
    return ember::bench::run_gpu(batch, repeats, with_torch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_network: %s\n", e.what());
    return 1;
  }
}
