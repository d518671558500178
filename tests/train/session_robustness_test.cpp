// What a session does with bad numbers and stop requests, and what it keeps: a loss that is not
// finite (stop / skip), NaN scores, checkpoints of another model, snapshot retention, stop
// requests, HugeCTR's optimizer state files and prediction export, and the metrics log's
// failures.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;

std::vector<char> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path embedding_dir(const fs::path& checkpoint) {
  return checkpoint / "sparse" / "sparse_embedding1";
}

// Every row of `before` (keys u32, as dlrm's I32 keys are saved) has the same vector and the same
// optimizer states in `after`, bit for bit (the shards of a save of several ranks merged).
void expect_rows_unchanged(const fs::path& before, const fs::path& after, std::int64_t width) {
  auto read_keys = [](const fs::path& dir) {
    const std::string b = merged_saved_file(dir, "keys");
    std::vector<std::uint32_t> k(b.size() / 4);
    std::memcpy(k.data(), b.data(), b.size());
    return k;
  };
  const auto keys_before = read_keys(before), keys_after = read_keys(after);
  ASSERT_FALSE(keys_before.empty());
  for (const char* file : {"vectors", "adam_m", "adam_v"}) {
    const std::string b = merged_saved_file(before, file), a = merged_saved_file(after, file);
    const std::size_t row = static_cast<std::size_t>(width) * 4;
    std::size_t j = 0;
    for (std::size_t i = 0; i < keys_before.size(); ++i) {
      while (j < keys_after.size() && keys_after[j] < keys_before[i])
        ++j;
      ASSERT_LT(j, keys_after.size()) << "key " << keys_before[i] << " is gone";
      ASSERT_EQ(keys_after[j], keys_before[i]);
      EXPECT_EQ(std::memcmp(b.data() + i * row, a.data() + j * row, row), 0)
          << file << ": the row of key " << keys_before[i] << " changed";
    }
  }
}

TEST(SessionRobustness, ANonFiniteLossStopsTrainingNamingTheIteration) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  for (int ranks : {1, 2}) {
    {
      Session s(tiny_config(json, *data, 256, 3), quiet_options("", ranks));
      (void)s.train();
      s.save(dir / "m");
    }
    poison_first_value(dir / "m", "dense.model");
    Session s(tiny_config(json, *data, 256, 8), quiet_options("", ranks));
    s.load(dir / "m");
    EMBER_EXPECT_THROW_WITH(s.train(), Error, "the loss is nan at iteration 4");
    EMBER_EXPECT_THROW_WITH(s.train(), Error, "solver.nan_policy");
  }
}

TEST(SessionRobustness, SkippedBatchesApplyNoDenseOrSparseUpdateAndAreCounted) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  for (int ranks : {1, 2}) {
    ember::testing::ScratchDir dir;
    {
      Session s(tiny_config(json, *data, 256, 3), quiet_options("", ranks));
      (void)s.train();
      s.save(dir / "before");
    }
    // A NaN weight makes every batch's loss NaN: every step is skipped.
    poison_first_value(dir / "before", "dense.model");
    const std::vector<std::string> skip = {"solver.nan_policy=skip"};
    {
      Session s(tiny_config(json, *data, 256, 8, skip), quiet_options("", ranks));
      s.load(dir / "before");
      const TrainResult r = s.train();
      EXPECT_EQ(r.iterations, 8);
      EXPECT_EQ(r.skipped_batches, 5);
      EXPECT_EQ(s.skipped_batches(), 5);
      s.save(dir / "after");
    }
    for (const char* file : {"dense.model", "dense.non_trainable", "dense_opt_states.model"}) {
      EXPECT_EQ(bytes_of(dir / "before" / file), bytes_of(dir / "after" / file))
          << file << ", " << ranks << " rank(s)";
    }
    expect_rows_unchanged(embedding_dir(dir / "before"), embedding_dir(dir / "after"), 16);
    for (int r = 0; r < ranks; ++r) {
      const fs::path set = ranks == 1 ? fs::path() : fs::path("rank_" + std::to_string(r));
      const auto step = bytes_of(embedding_dir(dir / "before") / set / "optimizer_step");
      EXPECT_EQ(step.size(), 8u) << set;
      EXPECT_EQ(step, bytes_of(embedding_dir(dir / "after") / set / "optimizer_step")) << set;
    }
    // The count survives a checkpoint, and resuming checks the optimizers' steps against it.
    Session resumed(tiny_config(json, *data, 256, 10, skip), quiet_options("", ranks));
    resumed.load(dir / "after");
    EXPECT_EQ(resumed.skipped_batches(), 5);
    EXPECT_EQ(resumed.train().skipped_batches, 2);
    EXPECT_EQ(resumed.skipped_batches(), 7);
  }
}

// A key that only rank 1 of 2 sees is out of its one-hot slot's range: rank 1 fails, and rank 0,
// waiting for it in the embedding's exchange, is freed at once (Communicator::abort) instead of
// after the collectives' 300 s timeout. The session reports rank 1's own error.
TEST(SessionRobustness, AnErrorOnOneRankEndsEveryRankAtOnceWithThatRanksMessage) {
  const OneRankFailure f = one_rank_failure_config();
  {
    Session s(tiny_config(f.good, *f.data, 256, 2), quiet_options("", 2));
    EXPECT_EQ(s.train().iterations, 2);  // the data is good for the uncut configuration
  }
  Session s(tiny_config(f.bad, *f.data, 256, 4), quiet_options("", 2));
  const auto start = std::chrono::steady_clock::now();
  EMBER_EXPECT_THROW_WITH(s.train(), DataError, "is outside the slot's range");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(SessionRobustness, EvaluatingAModelWithNanWeightsEndsWithANanAuc) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  {
    Session s(tiny_config(json, *data, 256, 2), quiet_options("", 1));
    (void)s.train();
    s.save(dir / "m");
  }
  poison_first_value(dir / "m", "dense.model");
  Session s(tiny_config(json, *data, 256, 2), quiet_options("", 1));
  s.load(dir / "m", /*with_optimizer_states=*/false);
  const EvalResult r = s.evaluate();
  EXPECT_TRUE(std::isnan(r.auc));
  EXPECT_EQ(r.nan_scores, r.samples);
  EXPECT_GT(r.samples, 0);
  const EvalResult p = s.predict(dir / "scores.csv");
  EXPECT_TRUE(std::isnan(p.auc));
}

TEST(SessionRobustness, ACheckpointOfAnotherShapeIsRefusedEvenWithTheSameSizes) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  ember::testing::ScratchDir dir;
  {
    Session s(tiny_config(json, *data, 256, 2), quiet_options("", 1));
    (void)s.train();
    s.save(dir / "a");
  }
  // fc1 52 and fc2 40 instead of 64 and 32: the same number of weights (3504) in other shapes.
  const std::vector<std::string> other = {"layers.fc1.fc_param.num_output=52",
                                          "layers.fc2.fc_param.num_output=40"};
  {
    Session b(tiny_config(json, *data, 256, 2, other), quiet_options("", 1));
    b.save(dir / "b");
  }
  ASSERT_EQ(fs::file_size(dir / "a" / "dense.model"), fs::file_size(dir / "b" / "dense.model"));
  for (bool states : {true, false}) {
    Session b(tiny_config(json, *data, 256, 2, other), quiet_options("", 1));
    EMBER_EXPECT_THROW_WITH(b.load(dir / "a", states), DataError, "holds another model");
    EMBER_EXPECT_THROW_WITH(b.load(dir / "a", states), DataError,
                            "'fc1.weight' [13,64] there but 'fc1.weight' [13,52]");
  }
  // An embedding of another width (the bottom MLP follows it).
  Session c(tiny_config(json, *data, 256, 2,
                        {"layers.sparse_embedding1.sparse_embedding_hparam.embedding_vec_size=8",
                         "layers.fc3.fc_param.num_output=8"}),
            quiet_options("", 1));
  EMBER_EXPECT_THROW_WITH(c.load(dir / "a"), DataError,
                          "embedding 'sparse_embedding1' has 26 slots of 16 there but 26 slots "
                          "of 8");
}

TEST(SessionRobustness, KeepSnapshotsKeepsTheNewestAndNothingElseIsTouched) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  const std::string prefix = (dir / "ckpt_").string();
  fs::create_directories(dir / "ckpt_snapshot_99");  // not a checkpoint
  std::ofstream(dir / "ckpt_snapshot_99" / "notes.txt") << "mine";
  {
    Session s(tiny_config(json, *data, 256, 1), quiet_options("", 1));
    (void)s.train();
    s.save(dir / "other_snapshot_1");  // another prefix
  }
  Session s(tiny_config(json, *data, 256, 10,
                        {"solver.snapshot=2", "solver.keep_snapshots=2",
                         "solver.snapshot_prefix=" + prefix}),
            quiet_options("", 1));
  (void)s.train();
  for (int it : {2, 4, 6}) {
    EXPECT_FALSE(fs::exists(prefix + "snapshot_" + std::to_string(it))) << it;
  }
  for (int it : {8, 10}) {
    EXPECT_NO_THROW(verify_checkpoint(prefix + "snapshot_" + std::to_string(it))) << it;
  }
  EXPECT_TRUE(fs::exists(dir / "ckpt_snapshot_99" / "notes.txt"));
  EXPECT_NO_THROW(verify_checkpoint(dir / "other_snapshot_1"));
  // keep 1: each snapshot replaces the one before, never itself.
  Session one(tiny_config(json, *data, 256, 4,
                          {"solver.snapshot=1", "solver.keep_snapshots=1",
                           "solver.snapshot_prefix=" + (dir / "one_").string()}),
              quiet_options("", 1));
  (void)one.train();
  int kept = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path().filename().string().rfind("one_snapshot_", 0) == 0) ++kept;
  }
  EXPECT_EQ(kept, 1);
  EXPECT_NO_THROW(verify_checkpoint(dir / "one_snapshot_4"));
}

TEST(SessionRobustness, AStopRequestEndsAfterTheStepWithASnapshot) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  std::atomic<bool> stop{true};  // asked before the first step: one step, then the snapshot
  SessionOptions o = quiet_options("", 1);
  o.run_dir = dir.path();
  o.stop_requested = &stop;
  Session s(tiny_config(json, *data, 256, 50), o);
  const TrainResult r = s.train();
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.iterations, 1);
  EXPECT_EQ(r.interrupt_snapshot, dir / "snapshot_1");
  EXPECT_FALSE(r.last_eval.has_value());  // no final evaluation on the way out
  Session resumed(tiny_config(json, *data, 256, 50), quiet_options("", 1));
  resumed.load(r.interrupt_snapshot);
  EXPECT_EQ(resumed.iteration(), 1);
}

TEST(SessionRobustness, TheLastLossIsReportedWhenNoDisplayLineFellInTheRun) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  Session s(tiny_config(json, *data, 256, 5, {"solver.display=100"}), quiet_options("", 1));
  const TrainResult r = s.train();
  EXPECT_TRUE(r.losses.empty());
  ASSERT_TRUE(r.last_loss.has_value());
  EXPECT_TRUE(std::isfinite(*r.last_loss));
  EXPECT_GT(*r.last_loss, 0);
}

TEST(SessionRobustness, ExportPredictionsPrefixWritesHugeCtrsFilesPerEvaluation) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  const std::string prefix = (dir / "pred").string();
  Session s(tiny_config(json, *data, 256, 10,
                        {"solver.eval_interval=5", "solver.export_predictions_prefix=" + prefix}),
            quiet_options("", 1));
  (void)s.train();
  auto numbers = [](const std::string& path) {
    std::ifstream in(path);
    std::vector<double> v;
    for (double x; in >> x;)
      v.push_back(x);
    return v;
  };
  for (int it : {5, 10}) {
    const auto scores = numbers(prefix + "_prediction_" + std::to_string(it));
    const auto labels = numbers(prefix + "_label_" + std::to_string(it));
    EXPECT_EQ(scores.size(), 800u) << it;  // the eval split: samples / 5
    ASSERT_EQ(labels.size(), scores.size()) << it;
    for (double y : labels)
      ASSERT_TRUE(y == 0 || y == 1) << y;
  }
  // The last export holds the scores predict gives for the same model.
  const EvalResult p = s.predict(dir / "p.csv");
  std::ifstream in(dir / "p.csv");
  const auto exported = numbers(prefix + "_prediction_10");
  std::size_t i = 0;
  for (std::string line; std::getline(in, line); ++i) {
    ASSERT_LT(i, exported.size());
    EXPECT_NEAR(std::stod(line.substr(line.find(',') + 1)), exported[i], 1e-7);
  }
  EXPECT_EQ(i, exported.size());
  EXPECT_EQ(p.samples, 800);
}

TEST(SessionRobustness, OptimizerStateFilesAreLoadedAsTheModelFilesAre) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  {
    Session a(tiny_config(json, *data, 256, 5), quiet_options("", 1));
    (void)a.train();
    a.save(dir / "a");
  }
  const fs::path a = dir / "a", emb = embedding_dir(dir / "a");
  auto quoted = [](const fs::path& p) { return "\"" + p.string() + "\""; };
  const std::vector<std::string> files = {
      "solver.dense_model_file=" + (a / "dense.model").string(),
      "solver.sparse_model_file=[" + quoted(emb) + "]",
      "solver.dense_opt_states_file=" + (a / "dense_opt_states.model").string(),
      "solver.sparse_opt_states_file=[" + quoted(emb) + "]"};
  for (int ranks : {1, 2}) {
    {
      Session b(tiny_config(json, *data, 256, 5, files), quiet_options("", ranks));
      b.save(dir / "b");
    }
    for (const char* file : {"dense.model", "dense_opt_states.model"}) {
      EXPECT_EQ(bytes_of(a / file), bytes_of(dir / "b" / file)) << file;
    }
    // Two ranks write one shard each: the same rows.
    EXPECT_EQ(fs::exists(embedding_dir(dir / "b") / "rank_1"), ranks == 2);
    for (const char* file : {"keys", "vectors", "adam_m", "adam_v"}) {
      const std::vector<char> want = bytes_of(emb / file);
      EXPECT_FALSE(want.empty()) << file;
      EXPECT_EQ(std::string(want.begin(), want.end()),
                merged_saved_file(embedding_dir(dir / "b"), file))
          << file;
    }
  }
  // Without the state files the states start at zero: the files above did the loading.
  {
    Session c(tiny_config(json, *data, 256, 5, {files[0], files[1]}), quiet_options("", 1));
    c.save(dir / "c");
    EXPECT_NE(bytes_of(a / "dense_opt_states.model"),
              bytes_of(dir / "c" / "dense_opt_states.model"));
  }
  // Files of the wrong size or shape, states without a model.
  EMBER_EXPECT_THROW_WITH(
      Session(tiny_config(json, *data, 256, 5,
                          {"solver.dense_opt_states_file=" + (a / "dense.model").string()}),
              quiet_options("", 1)),
      DataError, "2 optimizer state slot(s) need");
  EMBER_EXPECT_THROW_WITH(
      Session(tiny_config(json, *data, 256, 5, {files[3]}), quiet_options("", 1)), ConfigError,
      "sparse_opt_states_file needs solver.sparse_model_file");
  fs::copy(emb, dir / "states");
  fs::remove(dir / "states" / "adam_v");
  EMBER_EXPECT_THROW_WITH(Session(tiny_config(json, *data, 256, 5,
                                              {files[1], "solver.sparse_opt_states_file=[" +
                                                             quoted(dir / "states") + "]"}),
                                  quiet_options("", 1)),
                          DataError, "no 'adam_v' file");
}

// HugeCTR's DCN and DeepFM samples name a dense model (./criteo.model) that only its --model-init
// step writes; HugeCTR trains from the initialisers when the file is missing, and so does Ember
// (with a warning). A file that is there must fit the model.
TEST(SessionRobustness, AMissingDenseModelFileStartsFromTheInitialisersAsInHugeCtr) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 4000);
  ember::testing::ScratchDir dir;
  const std::vector<double> plain = [&] {
    Session a(tiny_config(json, *data, 256, 5), quiet_options("", 1));
    return losses_of(a.train());
  }();
  for (int ranks : {1, 2}) {
    Session b(tiny_config(json, *data, 256, 5,
                          {"solver.dense_model_file=" + (dir / "criteo.model").string()}),
              quiet_options("", ranks));
    const std::vector<double> losses = losses_of(b.train());
    ASSERT_EQ(losses.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i)
      EXPECT_NEAR(losses[i], plain[i], 1e-5 * std::fabs(plain[i])) << ranks << " ranks, " << i;
  }
  std::ofstream(dir / "short.model") << "12345678";
  EMBER_EXPECT_THROW_WITH(
      Session(tiny_config(json, *data, 256, 5,
                          {"solver.dense_model_file=" + (dir / "short.model").string()}),
              quiet_options("", 1)),
      DataError, "has 8 bytes; this model's dense weights need");
}

TEST(SessionRobustness, AMetricsLogThatCannotBeWrittenEndsTheRun) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  ember::testing::ScratchDir dir;
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_symlink("/dev/full", dir / "metrics.csv");
  SessionOptions o = quiet_options("", 1);
  o.run_dir = dir.path();
  EMBER_EXPECT_THROW_WITH(Session(tiny_config(json, *data, 256, 5), o), DataError,
                          "cannot write the run log");
}

}  // namespace
}  // namespace ember::train
