// `mpirun -np N ember train ...` on CPU ranks against one process with the same total ranks:
// the same losses and AUCs (the same reduction order, so to the printed digit), checkpoints that
// resume on another process count, and errors that end every process. Skipped where the build has
// no MPI launcher (EMBER_MPIEXEC).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <utility>

#include "cli/mpi_run_support.hpp"
#include "support/test_support.hpp"
#include "tensor/gemm_row_count.hpp"

namespace ember {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class MpiCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (kMpiexec == nullptr) return;
    dir_ = new testing::ScratchDir();
    for (const char* name : {"dlrm", "deepfm"}) {
      const Outcome g = ember(std::string("datagen --like '") + config_path(name) + "' --out '" +
                                  (*dir_ / name).string() + "' --samples 3000",
                              *dir_);
      ASSERT_EQ(g.status, 0) << g.err;
    }
    // DLRM on Parquet: the configuration with format Parquet, its data written by datagen --like
    // it, the file lists also where train_args looks for them (data/train.txt, data/eval.txt).
    std::string pq = slurp(config_path("dlrm"));
    for (auto [from, to] : {std::pair{"\"format\": \"Norm\"", "\"format\": \"Parquet\""},
                            std::pair{"\"check\": \"Sum\"", "\"check\": \"None\""}}) {
      const auto at = pq.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      pq.replace(at, std::string(from).size(), to);
    }
    std::ofstream(*dir_ / "dlrm_parquet.json") << pq;
    const Outcome g = ember("datagen --like '" + (*dir_ / "dlrm_parquet.json").string() +
                                "' --out '" + data("dlrm_parquet") + "' --samples 3000",
                            *dir_);
    ASSERT_EQ(g.status, 0) << g.err;
    for (const char* split : {"train", "eval"}) {
      std::filesystem::copy_file(*dir_ / "dlrm_parquet" / split / "_file_list.txt",
                                 *dir_ / "dlrm_parquet" / (std::string(split) + ".txt"));
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string data(const char* name) { return (*dir_ / name).string(); }

  static Outcome run(int processes, const std::string& args, const testing::ScratchDir& dir) {
    return run_in(processes, args, dir);
  }

  static testing::ScratchDir* dir_;
};

testing::ScratchDir* MpiCli::dir_ = nullptr;

struct Team {
  const char* config;
  const char* embedding_type;  // replaces sparse_embedding1's type ("" keeps it)
  int processes, ranks_each;
  const char* more_args = "";     // appended to both runs' arguments
  const char* log_regex = "";     // what the team's log must contain ("": anything)
  const char* key_exchange = "";  // EMBER_KEY_EXCHANGE for the team's processes ("": unset)
};

// Shared reading: process 0's line "input (training): process 0 parsed P samples (B bytes) and
// passed over S (key exchange X s of which meeting the others M s, collector waiting for
// readers Y s, training waiting for batches Z s, device copies C s, collector waiting for room
// R s, keys of K batches gathered by the ranks); process 1 ..." says that every process parsed its
// share of the samples (its ranks' rows of every batch) and passed over the rest, and where its
// input time went. The data here is one-hot: with one host rank a process, the ranks gather the
// keys of every training batch
// (`ranks_gather`); with more, the host exchange moves them all.
void expect_each_process_parsed_its_share(const std::string& err, int processes,
                                          bool ranks_gather) {
  const std::regex line(
      "process ([0-9]+) parsed ([0-9]+) samples \\(([0-9]+) bytes\\) and "
      "passed over ([0-9]+) \\(key exchange [0-9]+\\.[0-9]{2} s of which meeting the others "
      "[0-9]+\\.[0-9]{2} s, collector waiting for readers "
      "[0-9]+\\.[0-9]{2} s, training waiting for batches [0-9]+\\.[0-9]{2} s, device copies "
      "[0-9]+\\.[0-9]{2} s, collector waiting for room [0-9]+\\.[0-9]{2} s, keys of ([0-9]+) "
      "batches gathered by the ranks\\)");
  int seen = 0;
  for (std::sregex_iterator it(err.begin(), err.end(), line), end; it != end; ++it) {
    const auto& m = *it;
    EXPECT_EQ(std::stoi(m[1]), seen) << err;
    const double parsed = std::stod(m[2]), passed = std::stod(m[4]);
    EXPECT_GT(std::stod(m[3]), 0) << m[0];
    // 20 steps of full batches and what the readers read ahead: 1/N of every batch (the readers
    // may be inside a batch when the numbers are taken).
    EXPECT_NEAR(parsed / (parsed + passed), 1.0 / processes, 0.05) << m[0];
    // The 20 steps' batches at least (and those read ahead), or none.
    if (ranks_gather) {
      EXPECT_GE(std::stoi(m[5]), 20) << m[0];
    } else {
      EXPECT_EQ(std::stoi(m[5]), 0) << m[0];
    }
    ++seen;
  }
  EXPECT_EQ(seen, processes) << err;
}

// `config`: the configuration's path for a name (default configs/<name>.json).
void train_teams(const std::vector<Team>& teams,
                 const std::function<std::string(const char*)>& data,
                 const std::function<std::string(const char*)>& config = {}) {
  for (const Team& t : teams) {
    SCOPED_TRACE(std::string(t.config) + " " + t.embedding_type + " on " +
                 std::to_string(t.processes) + " processes");
    testing::ScratchDir dir;
    std::string args =
        train_args(config ? config(t.config) : config_path(t.config), data(t.config));
    if (*t.embedding_type != '\0') {
      args += std::string(" --set layers.sparse_embedding1.type=") + t.embedding_type;
    }
    args += t.more_args;
    const int total = t.processes * t.ranks_each;
    const Outcome one =
        run_in(0, args + " --cpu-ranks " + std::to_string(total) + " --run-dir one", dir);
    ASSERT_EQ(one.status, 0) << one.err;
    // mpirun's processes on this machine inherit its environment, and it ours.
    if (*t.key_exchange != '\0') ::setenv("EMBER_KEY_EXCHANGE", t.key_exchange, 1);
    const Outcome many =
        run_in(t.processes,
               args + " --cpu-ranks " + std::to_string(t.ranks_each) + " --run-dir many", dir);
    ::unsetenv("EMBER_KEY_EXCHANGE");
    ASSERT_EQ(many.status, 0) << many.err;
    if (*t.log_regex != '\0') {
      EXPECT_THAT(many.err, ContainsRegex(t.log_regex));
    }
    // Process 0 alone prints: every line once, the same numbers (the same reduction order).
    EXPECT_EQ(numbers_of(many.out), numbers_of(one.out)) << many.err;
    EXPECT_THAT(many.out, HasSubstr("eval iter=20 AUC="));
    EXPECT_THAT(many.err, HasSubstr(" in each of " + std::to_string(t.processes) + " processes"));
    expect_each_process_parsed_its_share(many.err, t.processes,
                                         t.ranks_each == 1 && *t.key_exchange == '\0');
    // One metrics.csv, written by process 0, with the rows of one process's.
    const auto rows = [&](const char* run_dir) {
      const std::string csv = slurp(dir / run_dir / "metrics.csv");
      return std::count(csv.begin(), csv.end(), '\n');
    };
    EXPECT_GT(rows("one"), 4);
    EXPECT_EQ(rows("many"), rows("one"));
  }
}

TEST_F(MpiCli, TwoProcessesTrainAsOneProcessWithTheSameRanks) {
  EMBER_REQUIRE_MPI();
  train_teams(
      {
          {"dlrm", "", 2, 2},                                    // localized, hash
          {"dlrm", "LocalizedSlotSparseEmbeddingOneHot", 2, 1},  // one-hot
          {"deepfm", "", 2, 2},                                  // distributed
      },
      [](const char* name) { return data(name); });
}

TEST_F(MpiCli, ThreeProcessesTrainAsOneProcessWithTheSameRanks) {
  EMBER_REQUIRE_MPI();
  train_teams(
      {
          {"dlrm", "", 3, 1},                                    // localized, hash
          {"dlrm", "LocalizedSlotSparseEmbeddingOneHot", 3, 1},  // one-hot
          {"deepfm", "", 3, 1},                                  // distributed
          // Every key through the host exchange, also where the ranks could gather them.
          {"dlrm", "LocalizedSlotSparseEmbeddingOneHot", 3, 1, "", "", "host"},
          {"dlrm", "", 2, 1, "", "", "mpi"},
      },
      [](const char* name) { return data(name); });
}

// Parquet: each process decodes only its ranks' rows of every batch (the others' values passed
// over in the column pages) and the team trains as one process does.
TEST_F(MpiCli, ParquetOnTwoAndThreeProcessesTrainsAsOneProcess) {
  EMBER_REQUIRE_MPI();
  train_teams(
      {{"dlrm_parquet", "", 2, 2}, {"dlrm_parquet", "", 3, 1}},
      [](const char* name) { return data(name); },
      [](const char* name) { return (*dir_ / (std::string(name) + ".json")).string(); });
}

// HybridSparseEmbedding: frequent rows replicated, the rest sharded over the ranks of both
// processes; every process chooses the same frequent categories from the same statistics, by
// HugeCTR's rule and by the traffic rule (which counts the ranks of every process).
TEST_F(MpiCli, HybridEmbeddingOnTwoProcessesTrainsAsOneProcess) {
  EMBER_REQUIRE_MPI();
  train_teams({{"dlrm", "HybridSparseEmbedding", 2, 1},
               {"dlrm", "HybridSparseEmbedding", 2, 2},
               {"dlrm", "HybridSparseEmbedding", 2, 2,
                " --set layers.sparse_embedding1.sparse_embedding_hparam.frequent_rule=traffic",
                // Some rows are frequent by the rule (the team's 4 ranks make it finite).
                "[1-9][0-9]* frequent categories [^\n]*frequent_rule traffic\\)"}},
              [](const char* name) { return data(name); });
}

TEST_F(MpiCli, CheckpointOfTwoProcessesResumesOnOneAndOnThree) {
  EMBER_REQUIRE_MPI();
  testing::ScratchDir dir;
  const std::string args = train_args(config_path("dlrm"), data("dlrm"));
  const Outcome whole = run(0, args + " --cpu-ranks 2", dir);
  ASSERT_EQ(whole.status, 0) << whole.err;
  const Outcome first = run(2, args + " --set solver.max_iter=10 --model-out half", dir);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("model saved to half"));
  {
    // Each process wrote its rank's shard of the embedding; meta.json lists both, with the
    // layout (process 0 gathered the other's hashes).
    const std::filesystem::path sparse = dir / "half" / "sparse" / "sparse_embedding1";
    EXPECT_FALSE(std::filesystem::exists(sparse / "keys"));
    std::ifstream in(dir / "half" / "meta.json");
    const nlohmann::json meta = nlohmann::json::parse(in);
    EXPECT_EQ(meta.at("sparse_layout").at("shards"), 2) << meta.dump();
    for (int r = 0; r < 2; ++r) {
      for (const char* file : {"keys", "vectors", "adam_m", "adam_v", "optimizer_step"}) {
        const std::string path = "sparse/sparse_embedding1/rank_" + std::to_string(r) + "/" + file;
        EXPECT_TRUE(std::filesystem::is_regular_file(dir / "half" / path)) << path;
        bool listed = false;
        for (const auto& f : meta.at("files"))
          listed = listed || f.at("path") == path;
        EXPECT_TRUE(listed) << path;
      }
    }
  }
  const auto tail_of = [](const std::vector<std::string>& lines) {
    std::vector<std::string> tail;
    for (const auto& l : lines) {
      if (l.rfind("iter=15", 0) == 0 || l.rfind("iter=20", 0) == 0 ||
          l.rfind("eval iter=20", 0) == 0)
        tail.push_back(l);
    }
    return tail;
  };
  // eval and predict of that model on 3 processes: one process's AUC and predictions.
  const std::string scoring = " --model half --device cpu --set layers.data.eval_source='" +
                              data("dlrm") + "/eval.txt' --set solver.batchsize_eval=240";
  const Outcome eval_one = run(0, " eval" + scoring, dir);
  const Outcome eval_three = run(3, " eval" + scoring, dir);
  ASSERT_EQ(eval_one.status, 0) << eval_one.err;
  ASSERT_EQ(eval_three.status, 0) << eval_three.err;
  ASSERT_FALSE(eval_one.lines().empty());
  EXPECT_EQ(eval_three.lines(), eval_one.lines());
  const Outcome predict_one = run(0, " predict" + scoring + " --out one.csv", dir);
  const Outcome predict_three = run(3, " predict" + scoring + " --out three.csv", dir);
  ASSERT_EQ(predict_one.status, 0) << predict_one.err;
  ASSERT_EQ(predict_three.status, 0) << predict_three.err;
  // The same predictions, to rounding where the CPU GEMM's rows depend on how the batch is split
  // (gemm_row_count.hpp; then one in ~10^7 relative, 3 processes against 1).
  const auto predictions = [&](const char* file) {
    std::vector<std::pair<int, double>> rows;
    std::istringstream in(slurp(dir / file));
    std::string line;
    while (std::getline(in, line)) {
      const auto comma = line.find(',');
      EXPECT_NE(comma, std::string::npos) << file << ": " << line;
      if (comma == std::string::npos) break;
      rows.emplace_back(std::stoi(line.substr(0, comma)), std::stod(line.substr(comma + 1)));
    }
    return rows;
  };
  const auto one = predictions("one.csv"), three = predictions("three.csv");
  EXPECT_FALSE(one.empty());
  ASSERT_EQ(three.size(), one.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(three[i].first, one[i].first) << "label of sample " << i;
    ember::testing::expect_same_or_close(three[i].second, one[i].second, 1e-6, 0,
                                         cat("prediction of sample ", i));
  }

  const auto expected = tail_of(numbers_of(whole.out));
  ASSERT_EQ(expected.size(), 3u) << whole.out;
  // One process with the two ranks: the very same steps.
  const Outcome on_one = run(0, args + " --cpu-ranks 2 --resume half --run-dir r1", dir);
  ASSERT_EQ(on_one.status, 0) << on_one.err;
  EXPECT_THAT(on_one.out, HasSubstr("resumed iter=10 from half"));
  EXPECT_EQ(tail_of(numbers_of(on_one.out)), expected);
  // Three processes of two ranks: the embedding rows are resharded over six ranks on load; the
  // batch is cut in six shares, so only the summation order of the gradients differs.
  const Outcome on_three = run(3, args + " --cpu-ranks 2 --resume half --run-dir r3", dir);
  ASSERT_EQ(on_three.status, 0) << on_three.err;
  EXPECT_THAT(on_three.out, HasSubstr("resumed iter=10 from half"));
  const auto got = tail_of(numbers_of(on_three.out));
  ASSERT_EQ(got.size(), 3u) << on_three.out;
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(value_of_key(got[i], "loss"), value_of_key(expected[i], "loss"), 1e-4) << got[i];
  EXPECT_NEAR(value_of_key(got[2], "AUC"), value_of_key(expected[2], "AUC"), 1e-4) << got[2];
}

// nan_policy "stop" over processes: each checks its own ranks' losses and the processes learn of
// a bad one a few steps later (no wait per step); every process then names the same first bad
// loss, as one process with the same ranks does, and no model is written. "skip" agrees at once
// (on the devices' own collective) and skips the same batches.
TEST_F(MpiCli, ADivergingJobStopsOnEveryProcessWithOneProcessesMessage) {
  EMBER_REQUIRE_MPI();
  testing::ScratchDir dir;
  const std::string args = train_args(config_path("dlrm"), data("dlrm")) +
                           " --set optimizer.adam_hparam.learning_rate=1e30"
                           " --set solver.max_iter=20";
  const Outcome one = run_in(0, args + " --cpu-ranks 2 --model-out one", dir);
  EXPECT_EQ(one.status, 1);
  const std::regex said("training diverged: the loss is [^;]*;");
  std::smatch want;
  ASSERT_TRUE(std::regex_search(one.err, want, said)) << one.err;
  const Outcome many = run_in(2, args + " --cpu-ranks 1 --model-out many", dir);
  EXPECT_NE(many.status, 0);
  EXPECT_THAT(many.err, HasSubstr("ember: error: process 0 of 2: " + want.str()));
  EXPECT_THAT(many.err, HasSubstr("ember: error: process 1 of 2: " + want.str()));
  EXPECT_FALSE(std::filesystem::exists(dir / "many" / "meta.json"));
  const Outcome skip =
      run_in(2, args + " --cpu-ranks 1 --set solver.nan_policy=skip --model-out skip", dir);
  ASSERT_EQ(skip.status, 0) << skip.err;
  EXPECT_THAT(skip.out, HasSubstr("skipped=19"));
}

TEST_F(MpiCli, AnErrorInOneProcessEndsEveryProcess) {
  EMBER_REQUIRE_MPI();
  testing::ScratchDir dir;
  // Two working directories, the data (a relative path) only in the first: process 1 cannot
  // open it while process 0 waits for it in the first collective.
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  std::filesystem::create_directory_symlink(data("dlrm"), dir / "a" / "data");
  const std::string args = train_args(config_path("dlrm"), "data");
  const std::string exe = "\"$EMBER\"";
  const Outcome r = shell("cd '" + dir.path().string() + "' && " + mpirun(1) + " -wdir a " + exe +
                              args + " : -np 1 -wdir b " + exe + args,
                          dir);
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("ember: error: process 1 of 2:"));
  EXPECT_THAT(r.err, HasSubstr("data/train.txt"));
}

TEST_F(MpiCli, BadJobsAreRefusedByEveryProcess) {
  EMBER_REQUIRE_MPI();
  testing::ScratchDir dir;
  const std::string args = train_args(config_path("dlrm"), data("dlrm"));
  const auto error_lines = [](const std::string& err) {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("ember: error: process ", 0) == 0) lines.push_back(l);
    }
    return lines;
  };
  {
    // Three processes, a batch of 241.
    const Outcome r = run(3, args + " --set solver.batchsize=241", dir);
    EXPECT_NE(r.status, 0);
    EXPECT_THAT(r.err, HasSubstr("solver.batchsize 241 must be a multiple of the 3 training "
                                 "devices (1 in each of 3 processes)"));
    EXPECT_GE(error_lines(r.err).size(), 1u) << r.err;
  }
  {
    // One GPU list per node, three lists for two processes.
    std::string on_gpus = args;
    on_gpus.replace(on_gpus.find("--device cpu"), 12, "--device cuda");
    const Outcome r = run(2, on_gpus + " --set 'solver.gpu=[[0],[1],[2]]'", dir);
    EXPECT_NE(r.status, 0);
    EXPECT_THAT(r.err, HasSubstr("solver.gpu has 3 list(s), one per node, but the MPI job has 2 "
                                 "processes"));
  }
  {
    // Processes given different configurations.
    const std::string exe = "\"$EMBER\"";
    const Outcome r = shell("cd '" + dir.path().string() + "' && " + mpirun(1) + " " + exe + args +
                                " : -np 1 " + exe + args + " --set solver.max_iter=30",
                            dir);
    EXPECT_NE(r.status, 0);
    EXPECT_THAT(r.err, HasSubstr("was given another configuration"));
  }
  {
    // Processes with different rank counts.
    const std::string exe = "\"$EMBER\"";
    const Outcome r = shell("cd '" + dir.path().string() + "' && " + mpirun(1) + " " + exe + args +
                                " --cpu-ranks 2 : -np 1 " + exe + args,
                            dir);
    EXPECT_NE(r.status, 0);
    EXPECT_THAT(r.err, HasSubstr("rank(s) but this process has"));
  }
}

}  // namespace
}  // namespace ember
