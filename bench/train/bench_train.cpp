// End-to-end training throughput: `ember train`'s session on DLRM with Criteo-Kaggle-sized tables
// (configs/dlrm_criteo_kaggle.json: 26 one-hot tables, 23.8 M rows of width 128, bottom MLP
// 512-256-128, top MLP 1024-1024-512-256-1, batch 65536, SGD), reading synthetic data already on
// disk through the input pipeline, in every precision mode: fp32, tf32, mixed f16, mixed bf16,
// mixed f16 with f16 embedding tables, and that with cuda_graph; each mode's roofline (FLOPs and
// bytes per sample from the model against the device's peaks). In the same run the same model in
// plain PyTorch (bench/train/torch_ctr_train.py: nn.EmbeddingBag with sparse gradients, SGD;
// fp32, tf32, autocast f16 and bf16, eager, and f16 and bf16 under torch.compile), fed batches it
// has already staged on the GPU (no input pipeline: the most favourable case for PyTorch). Then
// DCN, DeepFM and Wide&Deep (configs/) at batch 65536 in fp32 and mixed precision, against the
// same models in PyTorch (fp32, autocast f16 and bf16 eager, f16 and bf16 under torch.compile).
//
//   build/bench/bench_train            GPU run
//   build/bench/bench_train --quick    CPU run of configs/dlrm.json on this machine
// Options: --iters N (measured iterations), --other-warmup N (steps before them for DCN, DeepFM
// and Wide&Deep, 200 by default: see run_other_model), --models LIST (dlrm, dcn, deepfm,
// wide_and_deep; default all; --dlrm-only is --models dlrm), --parts (after each Ember run, a
// profiling pass of
// --parts-steps N steps, 20 by default, timed by part: data, embedding forward, each part of the
// dense network forward and backward, optimizer, embedding backward and update), --layers (the
// same pass with one part per dense layer, named after it), --no-torch,
// --no-compile (PyTorch eager only), --no-auc / --auc-only (the AUC of f32 against f16 and bf16
// embedding tables on a learnable generated dataset, each rounding), --dir DIR (dataset
// location), --costs (only the FLOPs and bytes a sample costs each model in each precision, and
// the H100's roofline limits: nothing trained, no device needed), --gpus N (instead of all that:
// weak scaling of DLRM-Kaggle, localized one-hot and hybrid embedding, on 1, 2, 4, ... N GPUs of
// one process; with --parts, the collectives' time per step), --set KEY=VALUE (a solver key, its
// value in JSON, for every Ember run; the modes' own keys win). Ends with "SUMMARY |" lines.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/openmp_policy.hpp"
#include "ember/core/part_timer.hpp"
#include "ember/data/datagen.hpp"
#include "ember/train/session.hpp"
#include "train/step_report.hpp"

namespace fs = std::filesystem;
using namespace ember;

namespace {

const char* const kOtherModels[] = {"dcn", "deepfm", "wide_and_deep"};

struct Args {
  bool quick = false;
  bool torch = true;
  std::int64_t iters = 40;
  std::int64_t warmup = 10;
  std::int64_t other_warmup = 200;  // DCN, DeepFM, Wide&Deep (run_other_model)
  bool compile = true;              // PyTorch also under torch.compile
  std::set<std::string> models = {"dlrm", "dcn", "deepfm", "wide_and_deep"};
  std::int64_t other_batch = 65536;
  bool costs = false;     // only the models' costs per sample (no training)
  bool parts = false;     // a profiling pass by part after each Ember run
  bool by_layer = false;  // --layers: that pass with one part per dense layer
  std::int64_t parts_steps = 20;
  bool auc = true;  // the AUC of f32 against 16-bit tables
  bool auc_only = false;
  std::int64_t auc_iters = 150;  // CPU (--quick) steps of the AUC comparison
  int gpus = 0;                  // --gpus N: weak scaling on 1, 2, 4, ... N GPUs instead
  // --variants / --modes: the scaling runs to make (all when empty).
  std::set<std::string> variants, modes;
  std::string dir;
  nlohmann::json solver = nlohmann::json::object();  // --set KEY=VALUE: for every Ember run
};

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// The dataset of `o`, generated into o.out_dir, or the one a run before generated there with
// the same options (--dir kept between runs): runs compared then read the same files, from the
// page cache, without a fresh write-back of gigabytes under way beside the measured steps.
data::DatasetDescription generated_dataset(const data::DatagenOptions& o) {
  const nlohmann::json stamp = {
      {"samples", o.samples},
      {"eval_samples", o.eval_samples},
      {"files", o.files},
      {"eval_files", o.eval_files},
      {"slots", o.slots_per_input},
      {"dense_dim", o.dense_dim},
      {"label_dim", o.label_dim},
      {"format", static_cast<int>(o.format)},
      {"check", static_cast<int>(o.check)},
      {"key_type", static_cast<int>(o.key_type)},
      {"vocabulary", o.vocabulary},
      {"alpha", o.alpha},
      {"nnz", {o.nnz_min, o.nnz_max}},
      {"seed", o.seed},
      {"parquet", {static_cast<int>(o.compression), static_cast<int>(o.parquet_keys)}},
      {"teacher",
       {o.teacher.embedding_dim, o.teacher.key_weight_std, o.teacher.interaction_std,
        o.teacher.dense_std, o.teacher.mean_logit, o.teacher.tail_decay}}};
  const fs::path stamp_path = fs::path(o.out_dir) / "bench_options.json";
  const fs::path description = fs::path(o.out_dir) / "dataset.json";
  if (fs::exists(stamp_path) && fs::exists(description) && read_json(stamp_path) == stamp) {
    return data::DatasetDescription::read(description.string());
  }
  fs::remove(stamp_path);
  data::DatasetDescription d = data::generate_dataset(o);
  std::ofstream(stamp_path) << stamp.dump();
  return d;
}

fs::path config_path(const std::string& name) {
  return fs::path(EMBER_SOURCE_DIR) / "configs" / (name + ".json");
}

// Steady-state samples/s: the mean of the last `windows` display windows' rates, or of every
// window after the first (warm-up) one when `windows` is 0 or not fewer than the windows.
double steady_rate(const train::TrainResult& r, std::size_t windows = 0) {
  if (r.rates.size() < 2) return r.samples_per_second;
  const std::size_t first =
      windows > 0 && windows < r.rates.size() ? r.rates.size() - windows : std::size_t{1};
  double sum = 0;
  for (std::size_t i = first; i < r.rates.size(); ++i)
    sum += r.rates[i];
  return sum / static_cast<double>(r.rates.size() - first);
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p) != nullptr)
      out += buf;
    ::pclose(p);
  }
  return out;
}

std::string join(const std::vector<std::int64_t>& values) {
  std::string s;
  for (std::int64_t v : values)
    s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

// Ember's precision modes, as solver settings over the configuration's own.
struct Mode {
  const char* name;
  nlohmann::json solver;
};

std::vector<Mode> ember_modes() {
  return {
      {"fp32", {}},
      {"tf32", {{"enable_tf32_compute", true}}},
      {"mixed f16", {{"mixed_precision", 1024}}},
      {"mixed bf16", {{"mixed_precision", 1024}, {"mixed_precision_dtype", "bf16"}}},
      {"mixed f16 + f16 tables", {{"mixed_precision", 1024}, {"embedding_dtype", "f16"}}},
      {"mixed f16 + f16 tables + cuda_graph",
       {{"mixed_precision", 1024}, {"embedding_dtype", "f16"}, {"cuda_graph", true}}},
  };
}

bench::Arithmetic arithmetic_of(const nlohmann::json& solver) {
  if (solver.contains("mixed_precision")) return bench::Arithmetic::Half;
  return solver.contains("enable_tf32_compute") ? bench::Arithmetic::TF32 : bench::Arithmetic::F32;
}

bench::CostOptions cost_options(const nlohmann::json& solver, std::int64_t batch) {
  bench::CostOptions o;
  o.batch = batch;
  if (solver.contains("mixed_precision")) o.activation_bytes = 2;
  if (solver.contains("embedding_dtype") && solver["embedding_dtype"] != "f32") o.table_bytes = 2;
  return o;
}

struct EmberRun {
  double rate = 0;  // steady samples/s; 0 when it failed
  std::string error, graph_status;
  bench::SampleCost cost;
};

// One Ember run of `j` with `mode`'s solver settings; with --parts, then a profiling pass of the
// same session (two steps to let the restarted input pipeline fill, then the timed steps).
EmberRun run_ember(const Args& a, nlohmann::json j, const Mode& mode, const std::string& what,
                   const std::string& where, bool summary) {
  for (const auto& [key, value] : a.solver.items())
    j["solver"][key] = value;
  for (const auto& [key, value] : mode.solver.items())
    j["solver"][key] = value;
  EmberRun run;
  try {
    train::SessionOptions so;
    so.progress = false;
    const train::ModelConfig config = train::parse_model_config(j, where);
    const std::int64_t batch = config.solver.batchsize;
    train::Session s(config, so);
    bench::CostOptions costs = cost_options(mode.solver, batch);
    for (const std::string& name : s.gathered_embeddings())
      costs.gathered.insert(name);
    run.cost = bench::sample_cost(config, costs);
    // The measured steps are the last a.iters: the display windows that cover them (a run whose
    // windows are longer, --quick's, takes every window after the first).
    const std::int64_t display = config.solver.display;
    run.rate =
        steady_rate(s.train(), display > 0 ? static_cast<std::size_t>(a.iters / display) : 0);
    run.graph_status = s.cuda_graph_status();
    if (a.parts) {
      const bool gpu = j["solver"].value("device", std::string()) == "cuda";
      PartTimer timer(gpu ? Place::cuda(0) : Place::host());
      timer.set_by_layer(a.by_layer);
      for (int i = 0; i < 2; ++i)
        s.train_step();
      s.set_part_timer(&timer);
      for (std::int64_t i = 0; i < a.parts_steps; ++i)
        s.train_step();
      s.set_part_timer(nullptr);
      bench::print_parts(what, timer.collect(), timer.steps(), batch, run.rate, gpu, summary);
    }
  } catch (const std::exception& e) {
    run.error = e.what();
    run.rate = 0;
  }
  return run;
}

int run_quick(const Args& a, const fs::path& dir) {
  // The CPU: the demo-sized DLRM of configs/dlrm.json on this machine's cores.
  const nlohmann::json base = read_json(config_path("dlrm"));
  data::DatagenOptions o;
  data::apply_model_config(base, "configs/dlrm.json", o);
  o.out_dir = (dir / "dlrm").string();
  o.samples = 400000;
  o.eval_samples = 4096;
  const auto desc = data::generate_dataset(o);
  nlohmann::json j = base;
  j["layers"][0]["source"] = desc.train.file_list;
  j["layers"][0]["eval_source"] = "";
  j["solver"]["max_iter"] = 300;
  j["solver"]["display"] = 50;
  j["solver"]["eval_interval"] = 0;
  j["solver"]["device"] = "cpu";
  const EmberRun r = run_ember(a, j, Mode{"fp32", {}}, "DLRM demo config on the CPU, fp32",
                               "configs/dlrm.json", false);
  if (r.rate <= 0) throw std::runtime_error(r.error);
  std::printf("\nCPU (%u hardware threads), configs/dlrm.json, batch 1024: %.0f samples/s\n",
              std::thread::hardware_concurrency(), r.rate);
  bench::print_roofline("DLRM demo config, fp32", r.cost, r.rate, nullptr, bench::Arithmetic::F32,
                        false);
  std::printf("SUMMARY | train | DLRM demo config on the CPU, samples/s | %.0f | - | -\n", r.rate);
  return 0;
}

struct TorchRun {
  std::string mode;
  bool compiled = false;
  double rate = 0;
  std::string error;
  std::string name() const { return mode + (compiled ? " torch.compile" : " eager"); }
};

// The PyTorch peer of `model` (bench/train/torch_ctr_train.py) on the Raw file `data`.
std::vector<TorchRun> run_torch(const Args& a, std::int64_t warmup, const std::string& model,
                                const fs::path& config, const std::string& data, std::int64_t batch,
                                const std::vector<std::int64_t>& slot_sizes,
                                const std::string& modes, const std::string& compiled) {
  const std::string cmd =
      "python3 " + std::string(EMBER_SOURCE_DIR) +
      "/bench/train/torch_ctr_train.py --json --model " + model + " --config " + config.string() +
      " --modes " + modes + (a.compile ? " --compile " + compiled : "") + " --data " + data +
      " --batch " + std::to_string(batch) + " --iters " + std::to_string(a.iters) + " --warmup " +
      std::to_string(warmup) + " --slot-sizes " + join(slot_sizes) + " 2>&1";
  const std::string out = run_capture(cmd);
  std::vector<TorchRun> runs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{", 0) != 0) continue;
    const auto r = nlohmann::json::parse(line);
    runs.push_back({r.value("mode", ""), r.value("compiled", false), r.value("samples_per_s", 0.0),
                    r.value("error", "")});
  }
  if (runs.empty()) std::printf("PyTorch peer of %s failed:\n%s\n", model.c_str(), out.c_str());
  return runs;
}

bool torch_available(const Args& a) {
  static const bool importable = std::system("python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return a.torch && importable;
}

// The peak figures of the device trained on, printed once.
const bench::DevicePeaks* device_peaks() {
  static const bench::DevicePeaks* peaks = [] {
    const std::string name = device_name(0);
    const bench::DevicePeaks* p = bench::peaks_for(name);
    if (p != nullptr) {
      std::printf(
          "\nRoofline peaks for %s (as %s): HBM %.0f GB/s, f32 %.1f TFLOP/s, tf32 tensor %.1f, "
          "f16/bf16 tensor %.1f (%s)\n",
          name.c_str(), p->model, p->hbm_gb_per_s, p->f32_tflops, p->tf32_tflops, p->half_tflops,
          bench::peaks_source());
    } else {
      std::printf("\nNo peak figures for %s: the rooflines give the costs per sample only\n",
                  name.c_str());
    }
    return p;
  }();
  return peaks;
}

int run_dlrm(const Args& a, const fs::path& dir) {
  const fs::path path = config_path("dlrm_criteo_kaggle");
  const nlohmann::json base = read_json(path);
  const std::int64_t batch = base["solver"]["batchsize"].get<std::int64_t>();
  const std::int64_t iterations = a.warmup + a.iters;
  data::DatagenOptions o;
  data::apply_model_config(base, path.string(), o);
  o.float_label_dense = true;  // the PyTorch peer reads f32 label and dense; the config says so
  o.out_dir = (dir / "kaggle").string();
  o.files = 16;  // one per reader thread, as for the other models
  o.samples = batch * (iterations + 2);
  o.eval_samples = batch;
  const auto t0 = std::chrono::steady_clock::now();
  const auto desc = generated_dataset(o);
  std::printf(
      "dataset: %lld samples of Criteo-Kaggle shape (26 one-hot slots, %lld rows) in %s (%.1f s)\n",
      static_cast<long long>(o.samples),
      static_cast<long long>(
          std::accumulate(desc.slot_size_array.begin(), desc.slot_size_array.end(), 0LL)),
      o.out_dir.c_str(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  nlohmann::json j = base;
  auto& d = j["layers"][0];
  d["source"] = desc.train.files.front();
  d["eval_source"] = desc.eval.files.front();
  d["num_samples"] = o.samples;
  d["eval_num_samples"] = o.eval_samples;
  d["float_label_dense"] = true;
  j["solver"]["max_iter"] = iterations;
  j["solver"]["display"] = a.warmup;
  j["solver"]["eval_interval"] = 0;
  j["solver"]["device"] = "cuda";
  j["solver"]["eval_metrics"] = {"AUC"};

  std::printf("\nDLRM Criteo-Kaggle, batch %lld, samples/s (ms per iteration):\n",
              static_cast<long long>(batch));
  double best_mixed = 0, tf32 = 0;
  std::vector<std::pair<const Mode*, EmberRun>> done;
  const std::vector<Mode> modes = ember_modes();
  for (const Mode& mode : modes) {
    const std::string what = std::string("DLRM ") + mode.name;
    const bool summary = mode.name == std::string("fp32") || mode.name == std::string("mixed f16");
    const EmberRun r = run_ember(a, j, mode, what, path.string(), summary);
    if (r.rate <= 0) {
      std::printf("  Ember   %-36s fails: %s\n", mode.name, r.error.c_str());
      std::printf("SUMMARY | train | DLRM %s, Ember samples/s | fails | - | -\n", mode.name);
      continue;
    }
    std::printf(
        "  Ember   %-36s %7.3f M (%.2f ms)%s\n", mode.name, r.rate / 1e6,
        1e3 * static_cast<double>(batch) / r.rate,
        mode.solver.contains("cuda_graph") ? (" [graph: " + r.graph_status + "]").c_str() : "");
    std::printf("SUMMARY | train | DLRM %s, Ember samples/s | %.3f M | - | -\n", mode.name,
                r.rate / 1e6);
    if (std::string(mode.name).rfind("mixed", 0) == 0) best_mixed = std::max(best_mixed, r.rate);
    if (std::string(mode.name) == "tf32") tf32 = r.rate;
    done.emplace_back(&mode, r);
  }
  std::printf(
      "SUMMARY | train | DLRM mixed precision (best), Ember samples/s | %.3f M | >= 15 M | %s\n",
      best_mixed / 1e6, best_mixed >= 15e6 ? "yes" : "no");
  std::printf("SUMMARY | train | DLRM tf32, Ember samples/s | %.3f M | >= 8 M | %s\n", tf32 / 1e6,
              tf32 >= 8e6 ? "yes" : "no");

  const bench::DevicePeaks* peaks = device_peaks();
  std::printf(
      "DLRM roofline by mode (one key per slot; ideal traffic, see docs/performance.md):\n");
  for (const auto& [mode, r] : done) {
    const std::string name = mode->name;
    bench::print_roofline("DLRM " + name, r.cost, r.rate, peaks, arithmetic_of(mode->solver),
                          name == "fp32" || name == "tf32" || name == "mixed f16");
  }

  if (!torch_available(a)) {
    std::printf("PyTorch: not run\n");
    std::printf("SUMMARY | train | Ember mixed / PyTorch best | n/a | >= 4x | no\n");
    return 0;
  }
  double torch_best = 0;
  for (const TorchRun& r : run_torch(a, a.warmup, "dlrm", path, desc.train.files.front(), batch,
                                     desc.slot_size_array, "fp32,tf32,f16,bf16", "f16,bf16")) {
    if (!r.error.empty() || r.rate <= 0) {
      std::printf("  PyTorch %-36s fails: %s\n", r.name().c_str(), r.error.c_str());
      continue;
    }
    std::printf("  PyTorch %-36s %7.3f M (%.2f ms)\n", r.name().c_str(), r.rate / 1e6,
                1e3 * static_cast<double>(batch) / r.rate);
    std::printf("SUMMARY | train | DLRM %s, PyTorch samples/s | %.3f M | - | -\n", r.name().c_str(),
                r.rate / 1e6);
    torch_best = std::max(torch_best, r.rate);
  }
  const double ratio = torch_best > 0 ? best_mixed / torch_best : 0;
  std::printf("SUMMARY | train | Ember mixed / PyTorch best | %.2fx | >= 4x | %s\n", ratio,
              ratio >= 4 ? "yes" : "no");
  return 0;
}

// DCN, DeepFM and Wide&Deep (configs/) at a GPU batch, in fp32 and mixed precision, against their
// PyTorch peers (fed the same samples from a Raw twin of the Norm dataset Ember reads).
void run_other_model(const Args& a, const fs::path& dir, const std::string& name) {
  const fs::path path = config_path(name);
  const nlohmann::json base = read_json(path);
  data::DatagenOptions o;
  data::apply_model_config(base, path.string(), o);
  o.out_dir = (dir / name).string();
  // One reader thread per file: with datagen's default of 4 files the input pipeline, not the
  // GPU, set Wide&Deep's pace (the host waited 2.1 ms a step for batches). Sixteen files, as a
  // Criteo set split for a 16-core host would be, give every reader thread one.
  o.files = 16;
  // The window starts once the batches the input pipeline parsed ahead are used up. Its reader
  // threads fill up to two host batches each (about 30 at 14 readers) while the session starts;
  // a model whose step outruns them draws on that store for well over a hundred steps (the
  // H200: Wide&Deep's step took 1.07 ms, 14 readers made a batch every 1.34 ms, and a window of
  // steps 11 to 50 measured 61 M samples/s where 600 steps made 48.8 M). A window after 200
  // steps measures what a long run gets.
  const std::int64_t warmup =
      (std::max(a.warmup, a.other_warmup) + a.iters - 1) / a.iters * a.iters;
  o.samples = a.other_batch * (warmup + a.iters + 2);
  o.eval_samples = 1024;
  const auto desc = generated_dataset(o);
  nlohmann::json j = base;
  j["layers"][0]["source"] = desc.train.file_list;
  j["layers"][0]["eval_source"] = "";
  j["solver"]["batchsize"] = a.other_batch;
  j["solver"]["batchsize_eval"] = a.other_batch;
  j["solver"]["max_iter"] = warmup + a.iters;
  j["solver"]["display"] = a.iters;  // the last display window is the measured one
  j["solver"]["eval_interval"] = 0;
  j["solver"]["device"] = "cuda";
  double ember[2] = {0, 0};  // fp32, mixed
  std::vector<Mode> modes;
  if (a.modes.empty() || a.modes.count("fp32") > 0) modes.push_back(Mode{"fp32", {}});
  if (a.modes.empty() || a.modes.count("mixed") > 0) {
    modes.push_back(Mode{"mixed f16", {{"mixed_precision", 1024}}});
  }
  for (const Mode& mode : modes) {
    const int m = std::string_view(mode.name) == "fp32" ? 0 : 1;  // ember[] is {fp32, mixed}
    const EmberRun r = run_ember(a, j, mode, name + " " + mode.name, path.string(), false);
    if (r.rate <= 0) {
      std::printf("  Ember   %-14s %-22s fails: %s\n", name.c_str(), mode.name, r.error.c_str());
      std::printf("SUMMARY | train | %s %s, Ember samples/s | fails | - | -\n", name.c_str(),
                  mode.name);
      continue;
    }
    ember[m] = r.rate;
    std::printf("  Ember   %-14s %-22s %7.3f M\n", name.c_str(), mode.name, r.rate / 1e6);
    std::printf("SUMMARY | train | %s %s, Ember samples/s | %.3f M | - | -\n", name.c_str(),
                mode.name, r.rate / 1e6);
    bench::print_roofline(name + " " + mode.name, r.cost, r.rate, device_peaks(),
                          arithmetic_of(mode.solver), false);
  }
  if (!torch_available(a)) {
    std::printf("SUMMARY | train | %s: Ember mixed / PyTorch best mixed | n/a | >= 3x | no\n",
                name.c_str());
    return;
  }
  // The same samples as Raw (one key per slot), which the peer reads without parsing Norm.
  data::DatagenOptions raw = o;
  raw.format = data::DataFormat::Raw;
  raw.float_label_dense = true;  // as the peer reads it
  raw.out_dir = (dir / (name + "-raw")).string();
  const auto raw_desc = generated_dataset(raw);
  double torch_best[2] = {0, 0};  // fp32, mixed (f16 or bf16)
  for (const TorchRun& r :
       run_torch(a, warmup, name, path, raw_desc.train.files.front(), a.other_batch,
                 raw_desc.slot_size_array, "fp32,f16,bf16", "f16,bf16")) {
    if (!r.error.empty() || r.rate <= 0) {
      std::printf("  PyTorch %-14s %-22s fails: %s\n", name.c_str(), r.name().c_str(),
                  r.error.c_str());
      continue;
    }
    std::printf("  PyTorch %-14s %-22s %7.3f M\n", name.c_str(), r.name().c_str(), r.rate / 1e6);
    std::printf("SUMMARY | train | %s %s, PyTorch samples/s | %.3f M | - | -\n", name.c_str(),
                r.name().c_str(), r.rate / 1e6);
    double& best = torch_best[r.mode == "fp32" ? 0 : 1];
    best = std::max(best, r.rate);
  }
  const double fp32 = torch_best[0] > 0 ? ember[0] / torch_best[0] : 0;
  const double mixed = torch_best[1] > 0 ? ember[1] / torch_best[1] : 0;
  std::printf("  %s: Ember / PyTorch: fp32 %.2fx, mixed %.2fx (against PyTorch's best mixed)\n",
              name.c_str(), fp32, mixed);
  std::printf("SUMMARY | train | %s: Ember fp32 / PyTorch fp32 | %.2fx | - | -\n", name.c_str(),
              fp32);
  std::printf("SUMMARY | train | %s: Ember mixed / PyTorch best mixed | %.2fx | >= 3x | %s\n",
              name.c_str(), mixed, mixed >= 3 ? "yes" : "no");
}

// AUC after a fixed number of steps on a learnable generated dataset (configs/dlrm.json's shape),
// f32 embedding tables against 16-bit ones: what chooses the tables' rounding (docs/embedding.md).
// On a GPU with mixed precision (where 16-bit tables belong); on the CPU in fp32, smaller.
void run_auc_comparison(const Args& a, const fs::path& dir, bool gpu) {
  const fs::path path = fs::path(EMBER_SOURCE_DIR) / "configs" / "dlrm.json";
  const nlohmann::json base = read_json(path);
  const std::int64_t batch = gpu ? 8192 : 1024, iterations = gpu ? 600 : a.auc_iters;
  data::DatagenOptions o;
  data::apply_model_config(base, path.string(), o);
  o.out_dir = (dir / "auc").string();
  o.samples = batch * iterations;
  o.eval_samples = gpu ? 262144 : 32768;
  const auto desc = data::generate_dataset(o);
  nlohmann::json j = base;
  j["layers"][0]["source"] = desc.train.file_list;
  j["layers"][0]["eval_source"] = desc.eval.file_list;
  j["solver"]["batchsize"] = batch;
  j["solver"]["batchsize_eval"] = batch;
  j["solver"]["max_iter"] = iterations;
  j["solver"]["display"] = iterations;
  j["solver"]["eval_interval"] = 0;
  j["solver"]["device"] = gpu ? "cuda" : "cpu";
  if (gpu) j["solver"]["mixed_precision"] = 1024;
  std::printf(
      "\nAUC after %lld steps of batch %lld (configs/dlrm.json shape, %s), by table type:\n",
      static_cast<long long>(iterations), static_cast<long long>(batch),
      gpu ? "mixed precision" : "CPU, fp32");
  double f32_auc = 0;
  for (const Mode& mode :
       {Mode{"f32 tables", {}}, Mode{"f16 stochastic", {{"embedding_dtype", "f16"}}},
        Mode{"f16 nearest", {{"embedding_dtype", "f16"}, {"embedding_rounding", "nearest"}}},
        Mode{"bf16 stochastic", {{"embedding_dtype", "bf16"}}},
        Mode{"bf16 nearest", {{"embedding_dtype", "bf16"}, {"embedding_rounding", "nearest"}}}}) {
    nlohmann::json m = j;
    for (const auto& [key, value] : mode.solver.items())
      m["solver"][key] = value;
    try {
      train::SessionOptions so;
      so.progress = false;
      train::Session s(train::parse_model_config(m, path.string()), so);
      const train::TrainResult r = s.train();
      const double auc = r.last_eval ? r.last_eval->auc : s.evaluate().auc;
      if (f32_auc == 0) f32_auc = auc;
      std::printf("  %-16s AUC %.5f (%+.5f)\n", mode.name, auc, auc - f32_auc);
      std::printf("SUMMARY | train | AUC %s minus f32 tables | %+.5f | within 0.001 | %s\n",
                  mode.name, auc - f32_auc, std::abs(auc - f32_auc) <= 0.001 ? "yes" : "no");
    } catch (const std::exception& e) {
      std::printf("  %-16s fails: %s\n", mode.name, e.what());
    }
  }
}

// --costs: what a sample costs each model in each precision (from the models alone: nothing is
// trained, no device is needed), and the roofline's limit on the device named.
void print_costs(const Args& a) {
  const bench::DevicePeaks* h100 = bench::peaks_for("H100");
  std::printf(
      "Cost per sample from the models (one key per slot); roofline limits on the %s: "
      "HBM %.0f GB/s, f32 %.1f, tf32 %.1f, f16/bf16 %.1f TFLOP/s (%s)\n",
      h100->model, h100->hbm_gb_per_s, h100->f32_tflops, h100->tf32_tflops, h100->half_tflops,
      bench::peaks_source());
  std::vector<std::pair<std::string, std::int64_t>> models;
  if (a.models.count("dlrm") > 0) models.emplace_back("dlrm_criteo_kaggle", 0);
  for (const char* name : kOtherModels) {
    if (a.models.count(name) > 0) models.emplace_back(name, a.other_batch);
  }
  for (const auto& [name, batch_override] : models) {
    nlohmann::json j = read_json(config_path(name));
    if (batch_override > 0) j["solver"]["batchsize"] = batch_override;
    const train::ModelConfig config = train::parse_model_config(j, config_path(name).string());
    for (const Mode& mode : ember_modes()) {
      if (mode.solver.contains("cuda_graph")) continue;
      const bench::SampleCost cost =
          bench::sample_cost(config, cost_options(mode.solver, config.solver.batchsize));
      const std::string what = name + " " + mode.name;
      bench::print_roofline(what, cost, 0, nullptr, arithmetic_of(mode.solver), false);
      const bench::Arithmetic ar = arithmetic_of(mode.solver);
      const double peak = ar == bench::Arithmetic::F32    ? h100->f32_tflops
                          : ar == bench::Arithmetic::TF32 ? h100->tf32_tflops
                                                          : h100->half_tflops;
      const double by_memory = h100->hbm_gb_per_s * 1e9 / cost.bytes();
      const double by_compute = peak * 1e12 / cost.flops();
      std::printf("    roofline limit: %.1f M samples/s by memory, %.1f M by compute: %s-bound\n",
                  by_memory / 1e6, by_compute / 1e6, by_memory < by_compute ? "memory" : "compute");
    }
  }
}

// Weak scaling (--gpus N): DLRM Criteo-Kaggle with the localized one-hot embedding
// (configs/dlrm_criteo_kaggle.json) and with HybridSparseEmbedding
// (configs/dlrm_criteo_kaggle_hybrid.json; once more with frequent_rule "traffic"), batch 65536
// per GPU, fp32 and mixed f16, on 1, 2, 4, ... N GPUs of this process (one rank per GPU, NCCL).
// Each run's profiling pass times the collectives as parts of their own on GPU 0
// (TimedCommunicator): the per-step all-to-all and all-reduce, and the rest of the step.
int run_scaling(const Args& a, const fs::path& dir) {
  const int available = cuda_device_count();
  if (a.gpus > available) {
    std::fprintf(stderr, "bench_train: --gpus %d but %d GPU(s) are visible\n", a.gpus, available);
    return 2;
  }
  std::vector<int> counts;
  for (int n = 1; n <= a.gpus; n *= 2)
    counts.push_back(n);
  if (counts.back() != a.gpus) counts.push_back(a.gpus);
  const std::int64_t per_gpu = 65536, iterations = a.warmup + a.iters;
  std::vector<Mode> modes;
  if (a.modes.empty() || a.modes.count("fp32") > 0) modes.push_back(Mode{"fp32", {}});
  if (a.modes.empty() || a.modes.count("mixed") > 0) {
    modes.push_back(Mode{"mixed f16", {{"mixed_precision", 1024}}});
  }
  // The hybrid twice: with its configuration's HugeCTR rule for the frequent rows
  // (NVLink_SingleNode, p_dup_max 0.01) and with Ember's traffic rule.
  struct Variant {
    const char* key;  // --variants
    const char* config;
    std::string name;
    const char* frequent_rule;  // nullptr: the configuration's
  };
  const Variant variants[] = {
      {"onehot", "dlrm_criteo_kaggle", "dlrm_criteo_kaggle", nullptr},
      {"hybrid", "dlrm_criteo_kaggle_hybrid", "dlrm_criteo_kaggle_hybrid", nullptr},
      {"traffic", "dlrm_criteo_kaggle_hybrid", "dlrm_criteo_kaggle_hybrid traffic", "traffic"}};
  std::set<std::string> generated_for;
  for (const Variant& v : variants) {
    if (!a.variants.empty() && a.variants.count(v.key) == 0) continue;
    const std::string name = v.name;
    const fs::path path = config_path(v.config);
    nlohmann::json base = read_json(path);
    if (v.frequent_rule != nullptr) {
      for (auto& layer : base["layers"]) {
        if (layer.value("type", "") == "HybridSparseEmbedding") {
          layer["sparse_embedding_hparam"]["frequent_rule"] = v.frequent_rule;
        }
      }
    }
    data::DatagenOptions o;
    data::apply_model_config(base, path.string(), o);
    o.out_dir = (dir / v.config).string();
    // Norm in 16 files, one per reader thread (the configurations' Raw file is one stream, which
    // would feed 4 GPUs from one thread).
    o.format = data::DataFormat::Norm;
    o.files = 16;
    o.samples = per_gpu * a.gpus * (iterations + 4);
    o.eval_samples = per_gpu;
    if (generated_for.insert(v.config).second) (void)generated_dataset(o);  // reused
    // The generated data's layer (format, file list, counts) with the model's names and inputs.
    const nlohmann::json generated = read_json(fs::path(o.out_dir) / "dataset.json")["data_layer"];
    std::printf("\nWeak scaling, %s, batch %lld per GPU, samples/s:\n", name.c_str(),
                static_cast<long long>(per_gpu));
    for (const Mode& mode : modes) {
      double one = 0;
      for (int n : counts) {
        nlohmann::json j = base;
        auto& d = j["layers"][0];
        nlohmann::json layer = generated;
        for (const char* key : {"name", "label", "dense", "sparse"})
          layer[key] = d[key];
        layer["eval_source"] = "";
        d = layer;
        j["solver"]["batchsize"] = per_gpu * n;
        j["solver"]["batchsize_eval"] = per_gpu * n;
        j["solver"]["max_iter"] = iterations;
        j["solver"]["display"] = a.warmup;
        j["solver"]["eval_interval"] = 0;
        j["solver"]["device"] = "cuda";
        std::vector<int> gpu_list(static_cast<std::size_t>(n));
        std::iota(gpu_list.begin(), gpu_list.end(), 0);
        j["solver"]["gpu"] = gpu_list;
        const std::string what = name + " " + mode.name + " on " + std::to_string(n) + " GPU(s)";
        const EmberRun r = run_ember(a, j, mode, what, path.string(), false);
        if (r.rate <= 0) {
          std::printf("  %-48s fails: %s\n", what.c_str(), r.error.c_str());
          std::printf("SUMMARY | scaling | %s | fails | - | no\n", what.c_str());
          continue;
        }
        if (n == 1) one = r.rate;
        const double scaling = one > 0 ? r.rate / one : 0;
        const char* target = n == 2 ? ">= 1.9x" : n == 4 ? ">= 3.6x" : n == 8 ? ">= 7x" : "-";
        const double need = n == 2 ? 1.9 : n == 4 ? 3.6 : n == 8 ? 7.0 : 0;
        std::printf("  %-48s %8.3f M (%.3f M per GPU, %.2fx one GPU)\n", what.c_str(), r.rate / 1e6,
                    r.rate / 1e6 / n, scaling);
        std::printf("SUMMARY | scaling | %s, samples/s | %.3f M (%.2fx) | %s | %s\n", what.c_str(),
                    r.rate / 1e6, scaling, target,
                    need == 0         ? "-"
                    : scaling >= need ? "yes"
                                      : "no");
      }
    }
  }
  return 0;
}

int usage() {
  std::fprintf(
      stderr,
      "usage: bench_train [--quick] [--costs] [--iters N] [--other-warmup N] [--models LIST] "
      "[--dlrm-only] [--parts] "
      "[--parts-steps N] [--layers] [--no-torch] [--no-compile] [--no-auc] [--auc-only] "
      "[--gpus N [--variants onehot,hybrid,traffic] [--modes fp32,mixed]] [--dir DIR] "
      "[--set KEY=VALUE]...\n  LIST: comma-separated of dlrm, dcn, deepfm, wide_and_deep\n  --set: "
      "a solver key for every Ember run, VALUE in JSON (e.g. "
      "--set overlap_embedding=false)\n");
  return 2;
}

bool parse_models(const std::string& list, std::set<std::string>& models) {
  models.clear();
  std::istringstream in(list);
  for (std::string m; std::getline(in, m, ',');) {
    const bool known = m == "dlrm" || std::find(std::begin(kOtherModels), std::end(kOtherModels),
                                                m) != std::end(kOtherModels);
    if (!known) {
      std::fprintf(stderr, "bench_train: --models: unknown model '%s'\n", m.c_str());
      return false;
    }
    models.insert(m);
  }
  return !models.empty();
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp(argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool value = i + 1 < argc;
    if (s == "--quick") {
      a.quick = true;
    } else if (s == "--no-torch") {
      a.torch = false;
    } else if (s == "--no-compile") {
      a.compile = false;
    } else if (s == "--dlrm-only") {
      a.models = {"dlrm"};
    } else if (s == "--models" && value) {
      if (!parse_models(argv[++i], a.models)) return usage();
    } else if (s == "--costs") {
      a.costs = true;
    } else if (s == "--parts") {
      a.parts = true;
    } else if (s == "--layers") {
      a.parts = true;
      a.by_layer = true;
    } else if (s == "--parts-steps" && value) {
      a.parts = true;
      a.parts_steps = std::stoll(argv[++i]);
    } else if (s == "--no-auc") {
      a.auc = false;
    } else if (s == "--auc-only") {
      a.auc_only = true;
    } else if (s == "--iters" && value) {
      a.iters = std::stoll(argv[++i]);
    } else if (s == "--other-warmup" && value) {
      a.other_warmup = std::stoll(argv[++i]);
    } else if (s == "--gpus" && value) {
      a.gpus = std::stoi(argv[++i]);
    } else if ((s == "--variants" || s == "--modes") && value) {
      std::set<std::string>& chosen = s == "--variants" ? a.variants : a.modes;
      const std::set<std::string> known = s == "--variants"
                                              ? std::set<std::string>{"onehot", "hybrid", "traffic"}
                                              : std::set<std::string>{"fp32", "mixed"};
      std::istringstream in(argv[++i]);
      for (std::string m; std::getline(in, m, ',');) {
        if (known.count(m) == 0) {
          std::fprintf(stderr, "bench_train: %s: unknown '%s'\n", s.c_str(), m.c_str());
          return usage();
        }
        chosen.insert(m);
      }
    } else if (s == "--dir" && value) {
      a.dir = argv[++i];
    } else if (s == "--set" && value) {
      const std::string kv = argv[++i];
      const std::size_t eq = kv.find('=');
      const nlohmann::json v = eq == std::string::npos
                                   ? nlohmann::json()
                                   : nlohmann::json::parse(kv.substr(eq + 1), nullptr, false);
      if (v.is_discarded() || v.is_null()) return usage();
      a.solver[kv.substr(0, eq)] = v;
    } else {
      return usage();
    }
  }
  if (a.iters < 1 || a.other_warmup < 0) {
    std::fprintf(stderr,
                 "bench_train: --iters must be at least 1 and --other-warmup not negative\n");
    return usage();
  }
  if (a.costs) {
    print_costs(a);
    return 0;
  }
  const bool gpu = !a.quick && cuda_available();
  const fs::path dir = !a.dir.empty() ? fs::path(a.dir)
                                      : fs::temp_directory_path() /
                                            ("ember-bench-train-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int rc = 0;
  try {
    if (a.gpus > 0) {
      if (!gpu) throw std::runtime_error("--gpus needs CUDA devices");
      rc = run_scaling(a, dir);
      if (a.dir.empty()) fs::remove_all(dir);
      return rc;
    }
    if (!a.auc_only && !gpu) rc = run_quick(a, dir);
    if (!a.auc_only && gpu && a.models.count("dlrm") > 0) rc = run_dlrm(a, dir);
    if (!a.auc_only && gpu && rc == 0) {
      bool header = false;
      for (const char* name : kOtherModels) {
        if (a.models.count(name) == 0) continue;
        if (!header) {
          std::printf("\nOther sample models, batch %lld, samples/s:\n",
                      static_cast<long long>(a.other_batch));
          header = true;
        }
        run_other_model(a, dir, name);
      }
    }
    if (rc == 0 && (a.auc || a.auc_only)) run_auc_comparison(a, dir, gpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    rc = 1;
  }
  if (a.dir.empty()) fs::remove_all(dir);
  return rc;
}
