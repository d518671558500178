// End-to-end training throughput: `ember train`'s session on DLRM with Criteo-Kaggle-sized tables
// (configs/dlrm_criteo_kaggle.json: 26 one-hot tables, 23.8 M rows of width 128, bottom MLP
// 512-256-128, top MLP 1024-1024-512-256-1, batch 65536, SGD), reading synthetic data already on
// disk through the input pipeline, in every precision mode: fp32, tf32, mixed f16, mixed bf16,
// mixed f16 with f16 embedding tables, and that with cuda_graph. In the same run the same model in
// plain PyTorch (nn.EmbeddingBag with sparse gradients, SGD; fp32, tf32, autocast f16 and bf16,
// eager, and f16 and bf16 under torch.compile), fed batches it has already staged on the GPU (no
// input pipeline: the most favourable case for PyTorch). Then DCN, DeepFM and Wide&Deep (configs/)
// at batch 65536 in fp32 and mixed precision (Ember only).
//
//   build/bench/bench_train            GPU run (about 3 minutes on an H100)
//   build/bench/bench_train --quick    CPU run of configs/dlrm.json on this machine
// Options: --iters N (measured iterations), --no-torch, --no-compile (PyTorch eager only),
// --dlrm-only (no DCN / DeepFM / Wide&Deep), --no-auc / --auc-only (the AUC of f32 against
// f16 and bf16 embedding tables on a learnable generated dataset, each rounding), --dir DIR
// (dataset location).
// Ends with "SUMMARY |" lines.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/openmp_policy.hpp"
#include "ember/data/datagen.hpp"
#include "ember/train/session.hpp"

namespace fs = std::filesystem;
using namespace ember;

namespace {

struct Args {
  bool quick = false;
  bool torch = true;
  std::int64_t iters = 40;
  std::int64_t warmup = 10;
  bool compile = true;  // PyTorch also under torch.compile
  bool others = true;   // DCN, DeepFM, Wide&Deep too
  std::int64_t other_batch = 65536;
  bool auc = true;  // the AUC of f32 against 16-bit tables
  bool auc_only = false;
  std::int64_t auc_iters = 150;  // CPU (--quick) steps of the AUC comparison
  std::string dir;
};

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// Steady-state samples/s: the display windows after the first (warm-up) one.
double steady_rate(const train::TrainResult& r) {
  if (r.rates.size() < 2) return r.samples_per_second;
  double sum = 0;
  for (std::size_t i = 1; i < r.rates.size(); ++i)
    sum += r.rates[i];
  return sum / static_cast<double>(r.rates.size() - 1);
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

int run_quick(const Args& a, const fs::path& dir) {
  // The CPU: the demo-sized DLRM of configs/dlrm.json on this machine's cores.
  const nlohmann::json base = read_json(fs::path(EMBER_SOURCE_DIR) / "configs" / "dlrm.json");
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
  train::SessionOptions so;
  so.progress = false;
  train::Session s(train::parse_model_config(j, "configs/dlrm.json"), so);
  const train::TrainResult r = s.train();
  const double rate = steady_rate(r);
  std::printf("\nCPU (%u hardware threads), configs/dlrm.json, batch 1024: %.0f samples/s\n",
              std::thread::hardware_concurrency(), rate);
  std::printf("SUMMARY | train | DLRM demo config on the CPU, samples/s | %.0f | - | -\n", rate);
  (void)a;
  return 0;
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

// One Ember run of `j` with `mode`'s solver settings: steady samples/s, or 0 and the reason.
double run_ember(nlohmann::json j, const Mode& mode, const std::string& where, std::string& error,
                 std::string* graph_status = nullptr) {
  for (const auto& [key, value] : mode.solver.items())
    j["solver"][key] = value;
  try {
    train::SessionOptions so;
    so.progress = false;
    train::Session s(train::parse_model_config(j, where), so);
    const double rate = steady_rate(s.train());
    if (graph_status != nullptr) *graph_status = s.cuda_graph_status();
    return rate;
  } catch (const std::exception& e) {
    error = e.what();
    return 0;
  }
}

struct TorchRun {
  std::string mode;
  bool compiled = false;
  double rate = 0;
  std::string error;
};

std::vector<TorchRun> run_torch(const Args& a, const std::string& data, std::int64_t batch,
                                const std::vector<std::int64_t>& slot_sizes) {
  std::string sizes;
  for (std::int64_t v : slot_sizes)
    sizes += (sizes.empty() ? "" : ",") + std::to_string(v);
  const std::string cmd = "python3 " + std::string(EMBER_SOURCE_DIR) +
                          "/bench/train/torch_dlrm_train.py --json --modes fp32,tf32,f16,bf16" +
                          (a.compile ? " --compile f16,bf16" : "") + " --data " + data +
                          " --batch " + std::to_string(batch) + " --iters " +
                          std::to_string(a.iters) + " --warmup " + std::to_string(a.warmup) +
                          " --slot-sizes " + sizes + " 2>&1";
  const std::string out = run_capture(cmd);
  std::vector<TorchRun> runs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{", 0) != 0) continue;
    const auto r = nlohmann::json::parse(line);
    runs.push_back({r.value("mode", ""), r.value("compiled", false), r.value("samples_per_s", 0.0),
                    r.value("error", "")});
  }
  if (runs.empty()) std::printf("PyTorch peer failed:\n%s\n", out.c_str());
  return runs;
}

int run_gpu(const Args& a, const fs::path& dir) {
  const fs::path config_path = fs::path(EMBER_SOURCE_DIR) / "configs" / "dlrm_criteo_kaggle.json";
  const nlohmann::json base = read_json(config_path);
  const std::int64_t batch = base["solver"]["batchsize"].get<std::int64_t>();
  const std::int64_t iterations = a.warmup + a.iters;
  data::DatagenOptions o;
  data::apply_model_config(base, config_path.string(), o);
  o.out_dir = (dir / "kaggle").string();
  o.samples = batch * (iterations + 2);
  o.eval_samples = batch;
  const auto t0 = std::chrono::steady_clock::now();
  const auto desc = data::generate_dataset(o);
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
  for (const Mode& mode : ember_modes()) {
    std::string error, graph;
    const double rate = run_ember(j, mode, config_path.string(), error, &graph);
    if (rate <= 0) {
      std::printf("  Ember   %-36s fails: %s\n", mode.name, error.c_str());
      std::printf("SUMMARY | train | DLRM %s, Ember samples/s | fails | - | -\n", mode.name);
      continue;
    }
    std::printf("  Ember   %-36s %7.3f M (%.2f ms)%s\n", mode.name, rate / 1e6,
                1e3 * static_cast<double>(batch) / rate,
                mode.solver.contains("cuda_graph") ? (" [graph: " + graph + "]").c_str() : "");
    std::printf("SUMMARY | train | DLRM %s, Ember samples/s | %.3f M | - | -\n", mode.name,
                rate / 1e6);
    if (std::string(mode.name).rfind("mixed", 0) == 0) best_mixed = std::max(best_mixed, rate);
    if (std::string(mode.name) == "tf32") tf32 = rate;
  }
  std::printf(
      "SUMMARY | train | DLRM mixed precision (best), Ember samples/s | %.3f M | >= 15 M | %s\n",
      best_mixed / 1e6, best_mixed >= 15e6 ? "yes" : "no");
  std::printf("SUMMARY | train | DLRM tf32, Ember samples/s | %.3f M | >= 8 M | %s\n", tf32 / 1e6,
              tf32 >= 8e6 ? "yes" : "no");

  if (!a.torch || std::system("python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    std::printf("PyTorch: not run\n");
    std::printf("SUMMARY | train | Ember mixed / PyTorch best | n/a | >= 4x | no\n");
    return 0;
  }
  double torch_best = 0;
  for (const TorchRun& r : run_torch(a, desc.train.files.front(), batch, desc.slot_size_array)) {
    const std::string name = r.mode + (r.compiled ? " torch.compile" : " eager");
    if (!r.error.empty() || r.rate <= 0) {
      std::printf("  PyTorch %-36s fails: %s\n", name.c_str(), r.error.c_str());
      continue;
    }
    std::printf("  PyTorch %-36s %7.3f M (%.2f ms)\n", name.c_str(), r.rate / 1e6,
                1e3 * static_cast<double>(batch) / r.rate);
    std::printf("SUMMARY | train | DLRM %s, PyTorch samples/s | %.3f M | - | -\n", name.c_str(),
                r.rate / 1e6);
    torch_best = std::max(torch_best, r.rate);
  }
  const double ratio = torch_best > 0 ? best_mixed / torch_best : 0;
  std::printf("SUMMARY | train | Ember mixed / PyTorch best | %.2fx | >= 4x | %s\n", ratio,
              ratio >= 4 ? "yes" : "no");
  return 0;
}

// DCN, DeepFM and Wide&Deep (configs/) at a GPU batch, in fp32 and mixed precision (Ember only:
// their PyTorch peers are not written yet).
void run_other_models(const Args& a, const fs::path& dir) {
  std::printf("\nOther sample models, batch %lld, Ember samples/s:\n",
              static_cast<long long>(a.other_batch));
  for (const char* name : {"dcn", "deepfm", "wide_and_deep"}) {
    const fs::path path = fs::path(EMBER_SOURCE_DIR) / "configs" / (std::string(name) + ".json");
    const nlohmann::json base = read_json(path);
    data::DatagenOptions o;
    data::apply_model_config(base, path.string(), o);
    o.out_dir = (dir / name).string();
    o.samples = a.other_batch * (a.warmup + a.iters + 2);
    o.eval_samples = 1024;
    const auto desc = data::generate_dataset(o);
    nlohmann::json j = base;
    j["layers"][0]["source"] = desc.train.file_list;
    j["layers"][0]["eval_source"] = "";
    j["solver"]["batchsize"] = a.other_batch;
    j["solver"]["batchsize_eval"] = a.other_batch;
    j["solver"]["max_iter"] = a.warmup + a.iters;
    j["solver"]["display"] = a.warmup;
    j["solver"]["eval_interval"] = 0;
    j["solver"]["device"] = "cuda";
    for (const Mode& mode : {Mode{"fp32", {}}, Mode{"mixed f16", {{"mixed_precision", 1024}}}}) {
      std::string error;
      const double rate = run_ember(j, mode, path.string(), error);
      if (rate <= 0) {
        std::printf("  %-14s %-10s fails: %s\n", name, mode.name, error.c_str());
        std::printf("SUMMARY | train | %s %s, Ember samples/s | fails | - | -\n", name, mode.name);
        continue;
      }
      std::printf("  %-14s %-10s %7.3f M\n", name, mode.name, rate / 1e6);
      std::printf("SUMMARY | train | %s %s, Ember samples/s | %.3f M | - | -\n", name, mode.name,
                  rate / 1e6);
    }
  }
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

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp(argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick")
      a.quick = true;
    else if (s == "--no-torch")
      a.torch = false;
    else if (s == "--no-compile")
      a.compile = false;
    else if (s == "--dlrm-only")
      a.others = false;
    else if (s == "--no-auc")
      a.auc = false;
    else if (s == "--auc-only")
      a.auc_only = true;
    else if (s == "--iters" && i + 1 < argc)
      a.iters = std::stoll(argv[++i]);
    else if (s == "--dir" && i + 1 < argc)
      a.dir = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: bench_train [--quick] [--iters N] [--no-torch] [--no-compile] "
                   "[--dlrm-only] [--no-auc] [--auc-only] [--dir DIR]\n");
      return 2;
    }
  }
  const bool gpu = !a.quick && cuda_available();
  const fs::path dir = !a.dir.empty() ? fs::path(a.dir)
                                      : fs::temp_directory_path() /
                                            ("ember-bench-train-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int rc = 0;
  try {
    if (!a.auc_only) rc = gpu ? run_gpu(a, dir) : run_quick(a, dir);
    if (gpu && rc == 0 && a.others && !a.auc_only) run_other_models(a, dir);
    if (rc == 0 && (a.auc || a.auc_only)) run_auc_comparison(a, dir, gpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    rc = 1;
  }
  if (a.dir.empty()) fs::remove_all(dir);
  return rc;
}
