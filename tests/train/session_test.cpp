// Training sessions on the CPU: sample configs learn, several ranks give one rank's losses, a
// resumed run equals an uninterrupted one, evaluation and prediction agree, checkpoints are
// verified, and the solver's controls (AUC target, snapshots, epochs) work.
#include "ember/train/session.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/data/auc.hpp"
#include "ember/train/checkpoint.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i)
    s += v[i];
  return s / static_cast<double>(to - from);
}

TEST(Session, EverySampleConfigTrainsAndItsLossFalls) {
  for (const char* name : {"dlrm", "deepfm", "wide_and_deep", "dcn"}) {
    const auto json = sample_config(name);
    auto data = make_dataset(json, 16000);
    Session session(tiny_config(json, *data, 256, 50), quiet_options("", 1));
    const auto losses = losses_of(session.train());
    ASSERT_EQ(losses.size(), 50u) << name;
    for (double l : losses)
      ASSERT_TRUE(std::isfinite(l)) << name;
    EXPECT_LT(mean(losses, 40, 50), mean(losses, 0, 10) - 0.02) << name;
  }
}

TEST(Session, SeveralCpuRanksGiveTheLossesOfOne) {
  const auto base = sample_config("dlrm");
  auto data = make_dataset(base, 8000);
  for (const char* type :
       {"LocalizedSlotSparseEmbeddingHash", "DistributedSlotSparseEmbeddingHash"}) {
    auto json = base;
    json["layers"][1]["type"] = type;
    if (std::string(type) == "DistributedSlotSparseEmbeddingHash") {
      json["layers"][1]["sparse_embedding_hparam"]["workspace_size_per_gpu_in_mb"] = 4;
    }
    std::vector<double> one;
    for (int ranks : {1, 2, 3, 4}) {
      Session session(tiny_config(json, *data, 240, 12), quiet_options("", ranks));
      EXPECT_EQ(session.ranks(), ranks);
      const auto losses = losses_of(session.train());
      if (ranks == 1) {
        one = losses;
        continue;
      }
      ASSERT_EQ(losses.size(), one.size());
      for (std::size_t i = 0; i < one.size(); ++i) {
        EXPECT_NEAR(losses[i], one[i], 1e-4 * std::fabs(one[i]))
            << type << ", " << ranks << " ranks, iteration " << i + 1;
      }
    }
  }
}

TEST(Session, ResumeEqualsUninterrupted) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  for (int ranks : {1, 2}) {
    std::vector<double> straight;
    {
      Session s(tiny_config(json, *data, 256, 20), quiet_options("", ranks));
      straight = losses_of(s.train());
    }
    ember::testing::ScratchDir ckpt;
    {
      Session s(tiny_config(json, *data, 256, 10), quiet_options("", ranks));
      const auto first = losses_of(s.train());
      for (std::size_t i = 0; i < first.size(); ++i)
        EXPECT_DOUBLE_EQ(first[i], straight[i]);
      s.save(ckpt / "at10");
    }
    Session resumed(tiny_config(json, *data, 256, 20), quiet_options("", ranks));
    resumed.load(ckpt / "at10");
    EXPECT_EQ(resumed.iteration(), 10);
    const TrainResult r = resumed.train();
    const auto rest = losses_of(r);
    ASSERT_EQ(rest.size(), 10u);
    EXPECT_EQ(r.losses.front().first, 11);
    for (std::size_t i = 0; i < rest.size(); ++i) {
      EXPECT_NEAR(rest[i], straight[10 + i], 1e-6 * std::fabs(straight[10 + i]))
          << ranks << " rank(s), iteration " << 11 + i;
    }
  }
}

TEST(Session, EvaluationAndPredictionAgree) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  Session s(tiny_config(json, *data, 256, 15), quiet_options("", 1));
  (void)s.train();
  const EvalResult eval = s.evaluate();
  ember::testing::ScratchDir dir;
  const EvalResult pred = s.predict(dir / "predictions.csv");
  EXPECT_EQ(eval.samples, 1600);
  EXPECT_EQ(pred.samples, eval.samples);
  EXPECT_DOUBLE_EQ(pred.auc, eval.auc);
  EXPECT_DOUBLE_EQ(pred.average_loss, eval.average_loss);
  std::ifstream in(dir / "predictions.csv");
  std::vector<double> scores;
  std::vector<float> labels;
  for (std::string line; std::getline(in, line);) {
    const auto comma = line.find(',');
    ASSERT_NE(comma, std::string::npos) << line;
    labels.push_back(std::stof(line.substr(0, comma)));
    const double score = std::stod(line.substr(comma + 1));
    ASSERT_GT(score, 0.0);
    ASSERT_LT(score, 1.0);
    scores.push_back(score);
  }
  EXPECT_EQ(static_cast<std::int64_t>(scores.size()), eval.samples);
  // Scores are printed with 8 digits: the AUC from the file matches up to those roundings.
  EXPECT_NEAR(data::exact_auc(scores, labels), eval.auc, 1e-6);
  EXPECT_GT(eval.auc, 0.55);
}

TEST(Session, CorruptOrTruncatedCheckpointsAreRefusedAndEarlierOnesStayIntact) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  {
    Session s(tiny_config(json, *data, 256, 5), quiet_options("", 1));
    (void)s.train();
    s.save(dir / "a");
    {
      // A save that never completes (a crash mid-write) leaves the checkpoint it would replace.
      CheckpointWriter abandoned(dir / "a");
      std::ofstream(abandoned.staging() / "dense.model") << "partial";
    }
    s.save(dir / "b");
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  auto expect_refused = [&](const std::filesystem::path& ckpt, const char* needle) {
    Session s(tiny_config(json, *data, 256, 5), quiet_options("", 1));
    try {
      s.load(ckpt);
      ADD_FAILURE() << "loaded " << ckpt;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Truncated dense model.
  std::filesystem::resize_file(dir / "b" / "dense.model",
                               std::filesystem::file_size(dir / "b" / "dense.model") - 4);
  expect_refused(dir / "b", "dense.model");
  // A damaged (same size) sparse vectors file.
  std::filesystem::copy(dir / "a", dir / "c", std::filesystem::copy_options::recursive);
  std::filesystem::path vectors;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "c" / "sparse")) {
    if (e.path().filename() == "vectors") vectors = e.path();
  }
  ASSERT_FALSE(vectors.empty());
  {
    std::fstream f(vectors, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  expect_refused(dir / "c", "vectors");
  // No meta.json: an incomplete checkpoint.
  std::filesystem::copy(dir / "a", dir / "d", std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir / "d" / "meta.json");
  expect_refused(dir / "d", "meta.json");
  // The first checkpoint is intact and loads.
  Session s(tiny_config(json, *data, 256, 5), quiet_options("", 1));
  s.load(dir / "a");
  EXPECT_EQ(s.iteration(), 5);
}

TEST(Session, SaveAndLoadGiveTheSameEvaluation) {
  const auto json = sample_config("dcn");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  EvalResult before;
  {
    Session s(tiny_config(json, *data, 256, 8), quiet_options("", 1));
    (void)s.train();
    before = s.evaluate();
    s.save(dir / "m");
  }
  Session fresh(tiny_config(json, *data, 256, 8), quiet_options("", 1));
  fresh.load(dir / "m", /*with_optimizer_states=*/false);
  const EvalResult after = fresh.evaluate();
  EXPECT_EQ(after.samples, before.samples);
  EXPECT_DOUBLE_EQ(after.auc, before.auc);
  EXPECT_NEAR(after.average_loss, before.average_loss, 1e-12);
}

TEST(Session, AucTargetStopsTrainingAndSnapshotsAreWritten) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 8000);
  ember::testing::ScratchDir dir;
  const std::string prefix = (dir.path() / "ckpt_").string();
  Session s(tiny_config(json, *data, 256, 100,
                        {"solver.eval_interval=10", "solver.eval_metrics=[\"AUC:0.5\"]",
                         "solver.snapshot=5", "solver.snapshot_prefix=" + prefix}),
            quiet_options("", 1));
  const TrainResult r = s.train();
  EXPECT_TRUE(r.reached_auc_target);
  EXPECT_EQ(r.iterations, 10);
  ASSERT_TRUE(r.last_eval.has_value());
  EXPECT_GE(r.last_eval->auc, 0.5);
  for (const char* it : {"5", "10"}) {
    const auto snapshot = std::filesystem::path(prefix + std::string("snapshot_") + it);
    EXPECT_NO_THROW(verify_checkpoint(snapshot)) << snapshot;
  }
}

TEST(Session, EpochsModeSeesEveryFullBatchOnce) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 3000);  // 11 full batches of 256 and a partial one
  auto c = tiny_config(json, *data, 256, 1);
  auto j = c.json;
  j["solver"].erase("max_iter");
  j["solver"]["num_epochs"] = 2;
  Session s(parse_model_config(j, "test"), quiet_options("", 1));
  EXPECT_EQ(s.train().iterations, 22);
}

TEST(Session, ModelErrorsAtBuildTimeNameTheLayerAndShapes) {
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  // Interaction needs the bottom MLP's width to equal the embedding width (16): make it 12.
  for (auto& layer : json["layers"]) {
    if (layer["name"] == "fc3") layer["fc_param"]["num_output"] = 12;
  }
  try {
    Session s(tiny_config(json, *data, 256, 1), quiet_options("", 1));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("interaction1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("12"), std::string::npos) << e.what();
  }
  // The batch must split evenly over the ranks.
  EXPECT_THROW(Session(tiny_config(sample_config("dlrm"), *data, 250, 1), quiet_options("", 3)),
               ConfigError);
}

// --gpus and --cpu-ranks choose the device over the solver's, and contradicting flags are refused:
// no request is dropped without a word (before, --gpus on a machine without a GPU trained on the
// CPU, and --cpu-ranks on a GPU machine trained on the GPU).
TEST(Session, GpusOrCpuRanksChooseTheDeviceAndContradictionsAreRefused) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  auto solver_cuda = tiny_config(json, *data, 256, 1);
  solver_cuda.solver.device = "cuda";
  {
    // CPU ranks asked for, the solver says cuda: the CPU ranks.
    Session s(solver_cuda, quiet_options("", 2));
    EXPECT_EQ(s.ranks(), 2);
    EXPECT_EQ(s.describe_devices(), "cpu x2");
  }
  const auto refused = [&](SessionOptions o, const std::string& words) {
    try {
      Session s(tiny_config(json, *data, 256, 1), o);
      ADD_FAILURE() << "no error; expected: " << words;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  SessionOptions gpus_on_cpu = quiet_options("cpu");
  gpus_on_cpu.gpus = {0};
  refused(gpus_on_cpu, "GPUs (--gpus / gpus=) were asked for on the CPU (--device / device= cpu)");
  refused(quiet_options("cuda", 2),
          "2 CPU rank(s) (--cpu-ranks / cpu_ranks=) were asked for on the GPU (--device / device= "
          "cuda)");
  SessionOptions both = quiet_options("", 2);
  both.gpus = {0, 1};
  refused(both, "both GPUs (2, --gpus / gpus=) and 2 CPU rank(s)");
  // GPUs asked for with no device named: the GPU, or an error where there is none.
  SessionOptions gpus = quiet_options("");
  gpus.gpus = {0};
  auto solver_cpu = tiny_config(json, *data, 256, 1);  // its solver says cpu
  if (cuda_available()) {
    Session s(solver_cpu, gpus);
    EXPECT_EQ(s.describe_devices(), "cuda:0");
  } else {
    EXPECT_THROW(Session(solver_cpu, gpus), Error);
  }
}

}  // namespace
}  // namespace ember::train
