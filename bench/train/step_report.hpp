// bench_train's reports on one training step: its time by part (a profiling pass with a
// PartTimer) and its roofline (the FLOPs and bytes a sample costs, from the model, against the
// device's peak bandwidth and throughput).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ember/core/part_timer.hpp"
#include "ember/train/model_config.hpp"

namespace ember::bench {

// What one training sample costs, counted from the model (the dense network built at one row,
// the embeddings' shapes, the optimizer), for an ideal implementation: every layer reads its
// inputs and writes its outputs once in the forward, reads the output gradient and its inputs
// and writes the input gradients once in the backward, at the activation dtype.
struct SampleCost {
  double gemm_flops = 0;   // fully connected products: forward, weight and input gradients
  double other_flops = 0;  // Interaction, MultiCross, FmOrder2 (forward and backward)
  double activation_bytes = 0;
  // Rows read in the forward, written outputs, the gradient read back, rows and optimizer states
  // read and written by the update, the keys (one key per slot, as the benchmark's data).
  double embedding_bytes = 0;
  // Dense weights, their gradients and optimizer states, once per batch, divided by the batch.
  double weight_bytes = 0;
  double flops() const { return gemm_flops + other_flops; }
  double bytes() const { return activation_bytes + embedding_bytes + weight_bytes; }
};

struct CostOptions {
  int activation_bytes = 4;  // 2 in mixed precision
  int table_bytes = 4;       // 2 with 16-bit embedding tables
  std::int64_t batch = 1;
  // The embeddings whose rows the interaction reads in place (Session::gathered_embeddings):
  // their forward writes a 4-byte code per slot, which the interaction reads forward and
  // backward, instead of reading the rows and writing the pooled vectors.
  std::set<std::string> gathered;
};

SampleCost sample_cost(const train::ModelConfig& config, const CostOptions& options);

// Peak figures of a device (dense: without structured sparsity), from NVIDIA's datasheets.
struct DevicePeaks {
  const char* model;
  double hbm_gb_per_s;
  double f32_tflops;   // CUDA cores, no tensor cores
  double tf32_tflops;  // tensor cores
  double half_tflops;  // f16 / bf16 tensor cores, f32 accumulation
};
// The peaks of the device called `device_name` (cudaGetDeviceProperties' name), or nullptr for
// a device the table does not know.
const DevicePeaks* peaks_for(const std::string& device_name);
// Where the table's figures come from (one line).
const char* peaks_source();

enum class Arithmetic { F32, TF32, Half };

// Prints the cost per sample and, with `peaks`, what `samples_per_s` makes of it: bandwidth and
// FLOP rate against the peaks, the bound and the roofline's limit. `run` names the run ("DLRM
// mixed f16"); `summary` adds SUMMARY lines.
void print_roofline(const std::string& run, const SampleCost& cost, double samples_per_s,
                    const DevicePeaks* peaks, Arithmetic arithmetic, bool summary);

// Prints the parts of a profiling pass as a table: ms per step, % of the device's step (the sum of
// the device parts), samples/s if the part alone ran; host parts after it. `unprofiled_rate` (the
// run's samples/s without the timer) shows what the timing cost and, on a device, what the
// unprofiled step's overlap hides: a profiled step runs on one stream, so the sum of its parts
// less the unprofiled step's time is what ran beside other work (the embeddings beside the dense
// network, their exchanges beside the bottom MLP), less the timing events' own cost. `summary`
// adds SUMMARY lines.
void print_parts(const std::string& run, const std::vector<PartTimer::Part>& parts,
                 std::int64_t steps, std::int64_t batch, double unprofiled_rate, bool on_device,
                 bool summary);

}  // namespace ember::bench
