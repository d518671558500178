#include "train/step_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "ember/network/dense_network.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"
#include "ember/network/layers/interaction_layers.hpp"
#include "ember/network/layers/loss_layers.hpp"

namespace ember::bench {

namespace {

std::int64_t numel_of(const std::vector<network::BlobPtr>& blobs, bool only_with_grad = false) {
  std::int64_t n = 0;
  for (const auto& b : blobs) {
    if (!only_with_grad || b->requires_grad()) n += b->shape().numel();
  }
  return n;
}

// FLOPs of one sample's forward of `layer` (the layers that compute more than a pass over their
// data); the backward of each costs about twice its forward.
double forward_flops(const network::Layer& layer) {
  if (const auto* fc = dynamic_cast<const network::FullyConnectedLayer*>(&layer)) {
    return 2.0 * static_cast<double>(fc->in_features() * fc->out_features());
  }
  if (const auto* in = dynamic_cast<const network::InteractionLayer*>(&layer)) {
    const double f = static_cast<double>(in->num_embeddings() + 1);
    return 2.0 * static_cast<double>(in->width()) * f * (f - 1) / 2;  // the pairs' dot products
  }
  const double n = static_cast<double>(layer.bottoms().at(0)->shape().numel());
  if (layer.type() == "MultiCross") {
    // Per cross layer: x_l . w (2n), then x0 s + b + x_l (3n).
    return 5.0 * n * static_cast<double>(layer.parameters().size() / 2);
  }
  if (layer.type() == "FmOrder2") return 3.0 * n;  // sum, sum of squares, their combination
  return 0;
}

}  // namespace

SampleCost sample_cost(const train::ModelConfig& c, const CostOptions& o) {
  // The dense network at one row on the host: only the shapes are needed, nothing is allocated.
  auto store = std::make_shared<network::ParameterStore>(Place::host());
  network::BuildOptions bo;
  network::BuildContext ctx(bo, store);
  std::map<std::string, network::BlobPtr> inputs;
  inputs[c.data.label_top] = network::make_input_blob(c.data.label_top, {1, c.data.label_dim},
                                                      DType::F32, Place::host(), false);
  if (c.data.dense_dim > 0) {
    inputs[c.data.dense_top] = network::make_input_blob(c.data.dense_top, {1, c.data.dense_dim},
                                                        DType::F32, Place::host(), false);
  }
  for (const auto& e : c.embeddings) {
    inputs[e.top] = network::make_input_blob(e.top, {1, e.slot_num, e.vec_size}, DType::F32,
                                             Place::host(), true);
  }
  network::DenseNetwork net(c.dense_layers, inputs, ctx);

  SampleCost cost;
  const double ab = o.activation_bytes;
  for (const auto& layer : net.layers()) {
    const double flops = forward_flops(*layer);
    if (const auto* fc = dynamic_cast<const network::FullyConnectedLayer*>(layer.get())) {
      // Backward: the weight gradient, and the input gradient unless the input needs none.
      const bool dgrad = fc->bottoms().at(0)->requires_grad();
      cost.gemm_flops += flops * (dgrad ? 3 : 2);
    } else {
      cost.other_flops += flops * 3;
    }
    if (layer->type() == "Reshape") continue;  // a view: no data moves
    const double in = static_cast<double>(numel_of(layer->bottoms()));
    const double out = static_cast<double>(numel_of(layer->tops()));
    cost.activation_bytes += (in + out) * ab;
    if (layer->needs_backward()) {
      // The output gradient and the inputs read, the inputs' gradients written.
      const double in_grads = static_cast<double>(numel_of(layer->bottoms(), true));
      const bool loss = dynamic_cast<const network::LossLayer*>(layer.get()) != nullptr;
      cost.activation_bytes += ((loss ? 0 : out) + in + in_grads) * ab;
    }
  }

  // Dense weights, per batch: the forward's and the input gradient's reads of the compute copy,
  // the gradient written, the optimizer's read of weight and gradient and write of the weight
  // (and of the 16-bit copy), the optimizer states read and written.
  const int states = c.optimizer.state_count();
  const double compute = o.activation_bytes;
  const double per_weight = 2 * compute + 4 + 3 * 4 + (compute < 4 ? compute : 0) + states * 8;
  double weights = 0;
  for (const auto& p : store->parameters()) {
    if (p->trainable()) weights += static_cast<double>(p->numel());
  }
  cost.weight_bytes =
      weights * per_weight / static_cast<double>(std::max<std::int64_t>(1, o.batch));

  for (const auto& e : c.embeddings) {
    const double slots = static_cast<double>(e.slot_num), w = static_cast<double>(e.vec_size);
    const int row_states = (e.optimizer ? *e.optimizer : c.optimizer).state_count();
    const double keys = slots;  // one key per slot
    // Read in place: the interaction's read of the rows is its input read above; the forward
    // writes codes instead of vectors, and the interaction reads them twice.
    const double forward = o.gathered.count(e.name) > 0
                               ? keys * (8 + 4) + slots * 8
                               : keys * (w * o.table_bytes + 8) + slots * w * ab;
    const double backward = slots * w * ab + keys * 8;
    const double update = keys * w * (2.0 * o.table_bytes + row_states * 8.0);
    cost.embedding_bytes += forward + backward + update;
  }
  return cost;
}

namespace {
// Dense figures (half the datasheets' "with sparsity" tensor figures).
constexpr DevicePeaks kPeaks[] = {
    {"H200", 4800, 67, 494.5, 989.5},       // H200 SXM: HBM3e 4.8 TB/s
    {"H100 NVL", 3900, 60, 417.5, 835.5},   // H100 NVL: HBM3 3.9 TB/s
    {"H100 PCIe", 2000, 51.2, 378, 756.5},  // H100 PCIe: HBM2e 2.0 TB/s
    {"H100", 3350, 67, 494.5, 989.5},       // H100 SXM5 ("NVIDIA H100 80GB HBM3"): 3.35 TB/s
};
}  // namespace

const DevicePeaks* peaks_for(const std::string& device_name) {
  for (const DevicePeaks& p : kPeaks) {
    if (device_name.find(p.model) != std::string::npos) return &p;
  }
  return nullptr;
}

const char* peaks_source() {
  return "NVIDIA's H100 and H200 Tensor Core GPU datasheets; tensor figures dense (the sheets' "
         "'with sparsity' figures halved)";
}

void print_roofline(const std::string& run, const SampleCost& cost, double rate,
                    const DevicePeaks* peaks, Arithmetic arithmetic, bool summary) {
  const double flops = cost.flops(), bytes = cost.bytes();
  std::printf(
      "  %s: %.2f MFLOP per sample (GEMMs %.2f, interaction %.3f), %.1f KB per sample "
      "(activations %.1f, embeddings %.1f, dense weights %.2f): %.0f FLOP/B\n",
      run.c_str(), flops / 1e6, cost.gemm_flops / 1e6, cost.other_flops / 1e6, bytes / 1e3,
      cost.activation_bytes / 1e3, cost.embedding_bytes / 1e3, cost.weight_bytes / 1e3,
      flops / bytes);
  if (peaks == nullptr || rate <= 0) return;
  const double peak_tflops = arithmetic == Arithmetic::F32    ? peaks->f32_tflops
                             : arithmetic == Arithmetic::TF32 ? peaks->tf32_tflops
                                                              : peaks->half_tflops;
  const char* unit = arithmetic == Arithmetic::F32    ? "f32 (CUDA cores)"
                     : arithmetic == Arithmetic::TF32 ? "tf32 tensor"
                                                      : "f16/bf16 tensor";
  const double gbs = bytes * rate / 1e9, tflops = flops * rate / 1e12;
  const double ridge = peak_tflops * 1e12 / (peaks->hbm_gb_per_s * 1e9);
  const bool memory_bound = flops / bytes < ridge;
  const double limit = std::min(peaks->hbm_gb_per_s * 1e9 / bytes, peak_tflops * 1e12 / flops);
  std::printf(
      "    at %.3f M samples/s: %.0f GB/s effective = %.1f %% of HBM (%.0f GB/s), %.1f TFLOP/s = "
      "%.1f %% of the %s peak (%.0f TFLOP/s); bound: %s (ridge %.0f FLOP/B); roofline limit "
      "%.1f M samples/s, %.0f %% of it reached\n",
      rate / 1e6, gbs, 100 * gbs / peaks->hbm_gb_per_s, peaks->hbm_gb_per_s, tflops,
      100 * tflops / peak_tflops, unit, peak_tflops, memory_bound ? "memory" : "compute", ridge,
      limit / 1e6, 100 * rate / limit);
  if (summary) {
    std::printf("SUMMARY | train | %s: HBM bandwidth used (%.0f KB/sample) | %.1f %% | - | -\n",
                run.c_str(), bytes / 1e3, 100 * gbs / peaks->hbm_gb_per_s);
    std::printf("SUMMARY | train | %s: %s peak used (%.1f MFLOP/sample) | %.1f %% | - | -\n",
                run.c_str(), unit, flops / 1e6, 100 * tflops / peak_tflops);
  }
}

namespace {
std::string rate_text(double samples_per_s) {
  char buf[32];
  if (samples_per_s >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f M", samples_per_s / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f k", samples_per_s / 1e3);
  }
  return buf;
}
}  // namespace

void print_parts(const std::string& run, const std::vector<PartTimer::Part>& parts,
                 std::int64_t steps, std::int64_t batch, double unprofiled_rate, bool on_device,
                 bool summary) {
  if (steps <= 0) return;
  const double n = static_cast<double>(steps), samples = static_cast<double>(batch);
  double step_ms = 0;
  int w = 40;  // the name column: as wide as the longest name (one part per layer: long names)
  for (const auto& p : parts) {
    if (!p.host) step_ms += p.ms / n;
    w = std::max(w, static_cast<int>(p.name.size()));
  }
  std::printf("  %s, by part (%lld steps, %s):\n", run.c_str(), static_cast<long long>(steps),
              on_device ? "CUDA events on the compute stream" : "wall clock");
  std::printf("    %-*s %9s %10s %20s\n", w, "part", "ms/step", "% of step", "samples/s if alone");
  for (const auto& p : parts) {
    if (p.host) continue;
    const double ms = p.ms / n;
    std::printf("    %-*s %9.3f %8.1f %% %20s\n", w, p.name.c_str(), ms,
                step_ms > 0 ? 100 * ms / step_ms : 0.0,
                ms > 0 ? rate_text(samples / ms * 1e3).c_str() : "-");
    if (summary) {
      std::printf("SUMMARY | train | %s: %s, ms per step | %.3f | - | -\n", run.c_str(),
                  p.name.c_str(), ms);
    }
  }
  std::printf("    %-*s %9.3f %8.1f %% %20s   (unprofiled: %s samples/s, %.3f ms per step)\n", w,
              on_device ? "the step on the device (sum)" : "the step (sum)", step_ms, 100.0,
              step_ms > 0 ? rate_text(samples / step_ms * 1e3).c_str() : "-",
              rate_text(unprofiled_rate).c_str(),
              unprofiled_rate > 0 ? 1e3 * samples / unprofiled_rate : 0.0);
  if (on_device && unprofiled_rate > 0 && step_ms > 0) {
    // The profiled steps run on one stream; the unprofiled ones run the embeddings (and their
    // exchanges) beside the dense network (solver overlap_embedding).
    double collectives_ms = 0;
    for (const auto& p : parts) {
      if (!p.host && p.name.rfind("collective", 0) == 0) collectives_ms += p.ms / n;
    }
    const double hidden_ms = step_ms - 1e3 * samples / unprofiled_rate;
    std::printf(
        "    overlap: the unprofiled step takes %.3f ms less than this one-stream sum "
        "(the embeddings and their exchanges beside the dense network, less the timing "
        "events' cost); collectives %.3f ms per step\n",
        hidden_ms, collectives_ms);
    if (summary) {
      std::printf("SUMMARY | train | %s: ms per step hidden by overlap | %.3f | - | -\n",
                  run.c_str(), hidden_ms);
    }
  }
  for (const auto& p : parts) {
    if (!p.host) continue;
    std::printf("    %-*s %9.3f  (on the host%s)\n", w, p.name.c_str(), p.ms / n,
                on_device ? ", beside the device's work" : "");
  }
}

}  // namespace ember::bench
