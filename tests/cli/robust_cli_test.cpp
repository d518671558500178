// What a user meets when something goes wrong, end to end through the `ember` binary (issue 12):
// divergence and NaN, where models go and what is kept, checkpoints of another model, wrong
// flags and paths found before training, Ctrl-C, a full disk, and the friction fixes (eval and
// predict from the model alone, --set, the done and display lines, log wording).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <limits>
#include <regex>
#include <thread>

#include "cli/cli_run_support.hpp"
#include "cli/process_support.hpp"
#include "ember/train/checkpoint.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class RobustCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new testing::ScratchDir;
    const Outcome d =
        ember("datagen --like '" + config() + "' --out '" + data() + "' --samples 12000 --files 2",
              *data_dir_);
    ASSERT_EQ(d.status, 0) << d.err;
  }
  static void TearDownTestSuite() {
    delete data_dir_;
    data_dir_ = nullptr;
  }
  static std::string config() { return (testing::source_dir() / "configs" / "dlrm.json").string(); }
  static std::string data() { return (data_dir_->path() / "data").string(); }
  // The sample DLRM on the generated data, small batches, on the CPU.
  static std::string train_args(const std::string& more) {
    return "train '" + config() + "'" + settings() + " --no-progress " + more;
  }
  static std::string settings() {
    return " --set layers.data.source='" + data() + "/train.txt' --set layers.data.eval_source='" +
           data() +
           "/eval.txt' --device cpu --set solver.batchsize=256"
           " --set solver.batchsize_eval=512 --set solver.display=10";
  }
  static std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

  testing::ScratchDir dir_;

 private:
  static testing::ScratchDir* data_dir_;
};

testing::ScratchDir* RobustCli::data_dir_ = nullptr;

void rehash(const fs::path& dir) {
  nlohmann::json meta = nlohmann::json::parse(slurp(dir / "meta.json"));
  for (auto& f : meta["files"]) {
    const fs::path p = dir / f["path"].get<std::string>();
    f["bytes"] = static_cast<std::uint64_t>(fs::file_size(p));
    f["hash"] = train::hash_file(p);
  }
  std::ofstream(dir / "meta.json") << meta.dump(2);
}

// The last number after "key=" in `text`.
double value_of(const std::string& text, const std::string& key) {
  const std::regex re(key + "=([-0-9.eE+naif]+)");
  double v = std::numeric_limits<double>::quiet_NaN();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    v = std::stod((*it)[1]);
  }
  return v;
}

TEST_F(RobustCli, ADivergingRunStopsWithTheIterationOrSkipsWhenAskedTo) {
  const std::string lr = " --set optimizer.adam_hparam.learning_rate=1e30 --set solver.max_iter=20";
  const Outcome stop = ember(train_args(lr + " --model-out " + q(dir_ / "m")), dir_);
  EXPECT_EQ(stop.status, 1);
  EXPECT_THAT(stop.err, HasSubstr("training diverged: the loss is nan at iteration 2"));
  EXPECT_FALSE(fs::exists(dir_ / "m" / "meta.json"));  // no model from it
  const Outcome skip =
      ember(train_args(lr + " --set solver.nan_policy=skip --model-out " + q(dir_ / "m")), dir_);
  ASSERT_EQ(skip.status, 0) << skip.err;
  EXPECT_THAT(skip.out, HasSubstr("skipped=19"));
  EXPECT_THAT(skip.err, HasSubstr("iteration 2: the loss is not finite; batch skipped"));
  EXPECT_THAT(skip.err, HasSubstr("further skips are only counted"));
}

TEST_F(RobustCli, EvalAndPredictOfANanModelEndInsteadOfHanging) {
  ASSERT_EQ(ember(train_args("--set solver.max_iter=5 --model-out " + q(dir_ / "m")), dir_).status,
            0);
  {
    std::fstream f(dir_ / "m" / "dense.model", std::ios::in | std::ios::out | std::ios::binary);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int i = 0; i < 64; ++i)
      f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  }
  rehash(dir_ / "m");
  const Outcome e = ember("eval --model " + q(dir_ / "m"), dir_);
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("AUC=nan"));
  EXPECT_THAT(e.err, HasSubstr("1200 of 1200 scores are NaN"));
  const Outcome p = ember("predict --model " + q(dir_ / "m") + " --out " + q(dir_ / "p.csv"), dir_);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("AUC=nan"));
}

TEST_F(RobustCli, ModelOutNeverReplacesAUsersDirectoryAndIsCheckedBeforeTraining) {
  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "thesis.tex") << "years of work";
  for (const auto& [target, message] : std::vector<std::pair<std::string, std::string>>{
           {q(dir_ / "mine"), "is a non-empty directory that is not an Ember checkpoint"},
           {q(data()), "is a non-empty directory that is not an Ember checkpoint"},
           {q(dir_ / "mine" / "thesis.tex"), "exists and is not a directory"}}) {
    const Outcome o = ember(train_args("--set solver.max_iter=5 --model-out " + target), dir_);
    EXPECT_EQ(o.status, 1) << target;
    EXPECT_THAT(o.err, HasSubstr(message)) << target;
    EXPECT_THAT(o.out, Not(HasSubstr("iter="))) << "trained before refusing " << target;
  }
  EXPECT_EQ(slurp(dir_ / "mine" / "thesis.tex"), "years of work");
  // "." from inside a directory: refused, and nothing there is touched.
  const Outcome here = shell("cd " + q(dir_ / "mine") + " && \"$EMBER\" " +
                                 train_args("--set solver.max_iter=5 --model-out ."),
                             dir_);
  EXPECT_EQ(here.status, 1);
  EXPECT_THAT(here.err, HasSubstr("is the current directory"));
  EXPECT_EQ(slurp(dir_ / "mine" / "thesis.tex"), "years of work");
  // predict --out naming a directory, before any scoring.
  ASSERT_EQ(ember(train_args("--set solver.max_iter=2 --model-out " + q(dir_ / "m")), dir_).status,
            0);
  const Outcome p = ember("predict --model " + q(dir_ / "m") + " --out " + q(dir_ / "mine"), dir_);
  EXPECT_EQ(p.status, 1);
  EXPECT_THAT(p.err, HasSubstr("--out " + (dir_ / "mine").string() + " is a directory"));
  EXPECT_THAT(p.err, Not(HasSubstr("predicting on")));
  if (::geteuid() != 0) {
    fs::create_directories(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    const Outcome ro =
        ember(train_args("--set solver.max_iter=5 --model-out " + q(dir_ / "ro" / "m")), dir_);
    EXPECT_EQ(ro.status, 1);
    EXPECT_THAT(ro.err, HasSubstr("cannot write in"));
    EXPECT_THAT(ro.out, Not(HasSubstr("iter=")));
    fs::permissions(dir_ / "ro", fs::perms::owner_all);
  }
}

TEST_F(RobustCli, SnapshotsUnderTheModelDirectorySurviveTheFinalSaveAndResumeKeepsHistory) {
  const fs::path m = dir_ / "m";
  const Outcome t = ember(
      train_args("--set solver.max_iter=20 --set solver.snapshot=10 --model-out " + q(m)), dir_);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("snapshot iter=10 dir=" + (m / "snapshot_10").string()));
  for (const char* snap : {"snapshot_10", "snapshot_20"}) {
    const Outcome e = ember("eval --model " + q(m / snap), dir_);
    EXPECT_EQ(e.status, 0) << snap << ": " << e.err;
  }
  // Saves never show their temporary names.
  EXPECT_THAT(t.out + t.err, Not(HasSubstr(".tmp-")));
  // Resuming into the same model directory appends to its metrics.
  const Outcome r = ember(train_args("--set solver.max_iter=20 --resume " + q(m / "snapshot_10") +
                                     " --model-out " + q(m)),
                          dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string csv = slurp(m / "metrics.csv");
  std::size_t headers = 0, rows_at_20 = 0;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    headers += line == "iteration,phase,metric,value";
    rows_at_20 += line.rfind("20,train,loss,", 0) == 0;
  }
  EXPECT_EQ(headers, 1u);
  EXPECT_EQ(rows_at_20, 2u);  // the first run's and the resumed run's
  EXPECT_THAT(csv, HasSubstr("10,train,loss,"));
  EXPECT_EQ(ember("eval --model " + q(m / "snapshot_10"), dir_).status, 0);
}

TEST_F(RobustCli, AFullDiskThatCutsTheMetricsShortFailsTheRun) {
  // A 4 KiB file size limit: metrics.csv outgrows it after some display lines (the model is not
  // saved: the run fails first); SIGXFSZ is ignored so that the write fails as on a full disk.
  const Outcome o = shell("trap '' XFSZ; ulimit -f 8 && exec \"$EMBER\" " +
                              train_args("--set solver.max_iter=400 --set solver.display=1 "
                                         "--run-dir " +
                                         q(dir_ / "run")),
                          dir_);
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_THAT(o.err,
              HasSubstr("cannot write the run log " + (dir_ / "run" / "metrics.csv").string()));
  EXPECT_THAT(o.err, HasSubstr("cut short"));
  EXPECT_THAT(o.out, Not(HasSubstr("done iter=")));
}

TEST_F(RobustCli, ASaveCutBetweenItsRenamesIsRestoredAtTheNextStart) {
  const fs::path m = dir_ / "m";
  ASSERT_EQ(ember(train_args("--set solver.max_iter=5 --model-out " + q(m)), dir_).status, 0);
  // What a crash between the two renames leaves: the model moved aside by a process now gone.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  fs::rename(m, dir_ / ("m.old-" + std::to_string(child)));
  const Outcome e = ember("eval --model " + q(m), dir_);
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_THAT(e.err, HasSubstr(m.string() + ": restored from m.old-"));
  EXPECT_TRUE(fs::exists(m / "meta.json"));
}

TEST_F(RobustCli, ACheckpointOfAnotherNetworkIsRefused) {
  const fs::path m = dir_ / "m";
  ASSERT_EQ(ember(train_args("--set solver.max_iter=2 --model-out " + q(m)), dir_).status, 0);
  // The same number of dense weights in other shapes.
  const Outcome o = ember("eval '" + config() + "'" + settings() +
                              " --set layers.fc1.fc_param.num_output=52"
                              " --set layers.fc2.fc_param.num_output=40 --model " +
                              q(m),
                          dir_);
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("holds another model: dense tensor 0 is 'fc1.weight' [13,64]"));
  const Outcome file = ember("eval --model " + q(m / "dense.model"), dir_);
  EXPECT_EQ(file.status, 1);
  EXPECT_THAT(file.err, HasSubstr("is a file, not a checkpoint directory"));
  EXPECT_THAT(file.err, Not(HasSubstr("does not exist")));
}

TEST_F(RobustCli, AMissingTrainingSourceSaysHowToMakeOne) {
  // The sample configuration as a new user first runs it: from a directory without its data.
  fs::create_directories(dir_ / "new");
  const std::string in_new = "cd " + q(dir_ / "new") + " && \"$EMBER\" ";
  const std::string quick =
      " --device cpu --no-progress --set solver.max_iter=3 --set solver.batchsize=256"
      " --set solver.batchsize_eval=256 --set solver.eval_interval=0";
  const Outcome first = shell(in_new + "train '" + config() + "'" + quick, dir_);
  EXPECT_EQ(first.status, 1);
  const std::string advice = "ember datagen --like " + config() + " --out ./demo-data";
  EXPECT_THAT(first.err, HasSubstr("file list './demo-data/train.txt' does not exist; to train on "
                                   "synthetic data of this model's shape, make it first: " +
                                   advice));
  // The advice works (with fewer samples, to be quick).
  const Outcome made =
      shell(in_new + "datagen --like '" + config() + "' --out ./demo-data --samples 3000", dir_);
  ASSERT_EQ(made.status, 0) << made.err;
  const Outcome then = shell(in_new + "train '" + config() + "'" + quick, dir_);
  EXPECT_EQ(then.status, 0) << then.err;
  EXPECT_THAT(then.out, HasSubstr("done iter=3"));
  // A source outside datagen's layout: the flags that point the run at generated data.
  const Outcome other = ember(
      "train '" + config() + "'" + quick + " --set layers.data.source=" + q(dir_ / "x.txt"), dir_);
  EXPECT_EQ(other.status, 1);
  EXPECT_THAT(other.err, HasSubstr("' does not exist; to train on synthetic data of this model's "
                                   "shape: ember datagen --like " +
                                   config() +
                                   " --out DIR, then --set layers.data.source=DIR/train.txt "
                                   "--set layers.data.eval_source=DIR/eval.txt"));
  // A training source that exists gets no advice, whatever else is wrong with the data.
  const Outcome bad = ember(
      train_args("--set solver.max_iter=3 --set layers.data.eval_source=" + q(dir_ / "none.txt")),
      dir_);
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("none.txt' does not exist"));
  EXPECT_THAT(bad.err, Not(HasSubstr("datagen")));
}

TEST_F(RobustCli, CpuRanksMustBePositive) {
  for (const char* ranks : {"0", "-2", "65"}) {
    const Outcome o =
        ember(train_args("--set solver.max_iter=2 --cpu-ranks " + std::string(ranks)), dir_);
    EXPECT_EQ(o.status, 1) << ranks;
    EXPECT_THAT(o.err,
                HasSubstr("--cpu-ranks must be an integer in [1, 64], got " + std::string(ranks)));
  }
}

TEST_F(RobustCli, EvalAndPredictNeedOnlyTheModelAndScoreAnyDataFile) {
  const fs::path m = dir_ / "m";
  const Outcome t = ember(train_args("--set solver.max_iter=10 --model-out " + q(m)), dir_);
  ASSERT_EQ(t.status, 0) << t.err;
  const Outcome given = ember("eval '" + config() + "'" + settings() + " --model " + q(m), dir_);
  const Outcome recorded = ember("eval --model " + q(m), dir_);
  ASSERT_EQ(recorded.status, 0) << recorded.err;
  EXPECT_EQ(value_of(recorded.out, "AUC"), value_of(given.out, "AUC"));
  EXPECT_THAT(recorded.err, HasSubstr("evaluating on cpu"));
  EXPECT_THAT(recorded.err, Not(HasSubstr("training on")));
  // One data file (not a list), and a list, scored with the recorded configuration.
  const std::string one_file = data() + "/eval_0.data";
  const Outcome p = ember(
      "predict --model " + q(m) + " --data '" + one_file + "' --out " + q(dir_ / "p.csv"), dir_);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("wrote 1200 predictions"));
  EXPECT_THAT(p.err, HasSubstr("predicting on cpu"));
  const Outcome train_list =
      ember("eval --model " + q(m) + " --data '" + data() + "/train.txt'", dir_);
  ASSERT_EQ(train_list.status, 0) << train_list.err;
  EXPECT_THAT(train_list.out, HasSubstr("samples=12000"));
  const Outcome missing = ember("eval --model " + q(m) + " --data " + q(dir_ / "none"), dir_);
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.err, HasSubstr("--data " + (dir_ / "none").string() + " does not exist"));
}

TEST_F(RobustCli, SetComesBeforeOrAfterTheConfigurationAndNullDeletes) {
  const Outcome o = ember("train --set solver.max_iter=3 --set solver.display=null '" + config() +
                              "'" + settings() + " --no-progress",
                          dir_);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("done iter=3"));
}

TEST_F(RobustCli, TheDoneLineHasTheLastLossAndDisplayLinesTheEpoch) {
  const Outcome quiet =
      ember(train_args("--set solver.max_iter=5 --set solver.display=1000"), dir_);
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  for (const std::string& line : quiet.lines())
    EXPECT_NE(line.rfind("iter=", 0), 0u) << "a display line: " << line;
  EXPECT_GT(value_of(quiet.out, "done iter=5 loss"), 0);
  const Outcome shown = ember(train_args("--set solver.max_iter=100"), dir_);
  ASSERT_EQ(shown.status, 0) << shown.err;
  // 12000 samples in batches of 256: 100 iterations are 2.13 passes.
  EXPECT_THAT(shown.out, HasSubstr("iter=10 loss="));
  EXPECT_NEAR(value_of(shown.out, "epoch"), 100 * 256 / 12000.0, 0.01);
}

TEST_F(RobustCli, HitRateAndEnableOverlapAreHonoured) {
  const Outcome o = ember(train_args("--set solver.max_iter=10 --set solver.enable_overlap=true "
                                     "--set 'solver.eval_metrics=[\"AUC\",\"HitRate:0.3\"]' "
                                     "--run-dir " +
                                     q(dir_ / "run")),
                          dir_);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr(" HitRate="));
  EXPECT_THAT(slurp(dir_ / "run" / "metrics.csv"), HasSubstr("10,eval,HitRate,"));
  EXPECT_THAT(o.err, HasSubstr("\"enable_overlap\": Ember always overlaps"));
}

// Ctrl-C: the step ends, a snapshot is written and named, the status is 130; a second Ctrl-C
// ends the process at once.
TEST_F(RobustCli, CtrlCStopsAfterTheStepWithASnapshot) {
  const fs::path m = dir_ / "m";
  {
    testing::ChildProcess run(
        testing::ember_argv(
            {"train", config(), "--set", "layers.data.source=" + data() + "/train.txt", "--set",
             "layers.data.eval_source=" + data() + "/eval.txt", "--device", "cpu", "--set",
             "solver.batchsize=256", "--set", "solver.display=1", "--set",
             "solver.max_iter=1000000", "--no-progress", "--model-out", m.string()}),
        dir_ / "err.txt");
    ASSERT_TRUE(run.wait_for_line([](const std::string& l) { return l.rfind("iter=3 ", 0) == 0; },
                                  std::chrono::seconds(60)));
    run.send(SIGINT);
    const int status = run.wait();
    ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 130);
    std::string all;
    for (const auto& l : run.lines())
      all += l + "\n";
    EXPECT_THAT(all, HasSubstr("interrupted iter="));
    EXPECT_THAT(all, HasSubstr("continue with: ember train"));
    const double stopped = value_of(all, "interrupted iter");
    const fs::path snapshot = m / ("snapshot_" + std::to_string(static_cast<long>(stopped)));
    EXPECT_THAT(all, HasSubstr("--resume " + snapshot.string()));
    EXPECT_THAT(slurp(dir_ / "err.txt"), HasSubstr("stopping after the current step"));
    const Outcome e = ember("eval --model " + q(snapshot), dir_);
    EXPECT_EQ(e.status, 0) << e.err;
    EXPECT_FALSE(fs::exists(m / "meta.json"));  // the final model was not written
  }
  {
    testing::ChildProcess run(
        testing::ember_argv(
            {"train", config(), "--set", "layers.data.source=" + data() + "/train.txt", "--set",
             "layers.data.eval_source=" + data() + "/eval.txt", "--device", "cpu", "--set",
             "solver.batchsize=12000", "--set", "solver.display=1", "--set",
             "solver.max_iter=1000000", "--no-progress", "--run-dir", (dir_ / "run2").string()}),
        dir_ / "err2.txt");
    ASSERT_TRUE(run.wait_for_line([](const std::string& l) { return l.rfind("iter=2 ", 0) == 0; },
                                  std::chrono::seconds(60)));
    run.send(SIGINT);
    // The second once the first was taken (signals sent together may arrive as one), while the
    // step (a whole pass over the data, about a quarter of a second) still runs.
    for (int i = 0; i < 500 && slurp(dir_ / "err2.txt").find("stopping after") == std::string::npos;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    run.send(SIGINT);
    const int status = run.wait();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
  }
}

}  // namespace
}  // namespace ember
