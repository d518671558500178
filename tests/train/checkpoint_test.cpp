// Checkpoint directories as a user's files meet them: what a save replaces and what it keeps,
// the directories it refuses, the places a run writes to, and the recovery of a save that a
// crash interrupted at each of its moments.
#include "ember/train/checkpoint.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/checkpoint_recovery.hpp"
#include "ember/train/output_paths.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;

SessionOptions quiet() {
  static std::ostringstream sink;
  SessionOptions o;
  o.progress = false;
  o.out = &sink;
  return o;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The id of a process that has ended (a child that exited and was reaped).
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// A small trained model, saved at `dir`, at iteration `iterations`.
struct Trained {
  std::unique_ptr<TinyDataset> data = make_dataset(sample_config("dlrm"), 2000);
  ModelConfig config(std::int64_t iterations) const {
    return tiny_config(sample_config("dlrm"), *data, 256, iterations);
  }
  void save(const fs::path& dir, std::int64_t iterations) const {
    Session s(config(iterations), quiet());
    (void)s.train();
    s.save(dir);
  }
  std::int64_t load(const fs::path& dir) const {
    Session s(config(1), quiet());
    s.load(dir);
    return s.iteration();
  }
};

TEST(Checkpoint, ASaveKeepsWhatTheReplacedDirectoryHeldBesidesTheModel) {
  Trained t;
  testing::ScratchDir dir;
  const fs::path model = dir / "model";
  t.save(model, 2);
  // What a run and a user put there: metrics, a snapshot, notes.
  std::ofstream(model / "metrics.csv") << "iteration,phase,metric,value\n1,train,loss,0.5\n";
  t.save(model / "snapshot_1", 1);
  std::ofstream(model / "notes.txt") << "mine";
  t.save(model, 3);
  EXPECT_EQ(t.load(model), 3);
  EXPECT_EQ(t.load(model / "snapshot_1"), 1);
  EXPECT_NE(read(model / "metrics.csv").find("1,train,loss,0.5"), std::string::npos);
  EXPECT_EQ(read(model / "notes.txt"), "mine");
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename(), "model") << "left behind: " << e.path();
  }
}

TEST(Checkpoint, AUsersDirectoryIsNeverReplaced) {
  Trained t;
  testing::ScratchDir dir;
  fs::create_directories(dir / "photos");
  std::ofstream(dir / "photos" / "a.jpg") << "x";
  EMBER_EXPECT_THROW_WITH(t.save(dir / "photos", 1), DataError,
                          "is a non-empty directory that is not an Ember checkpoint (it holds "
                          "'a.jpg')");
  EXPECT_EQ(read(dir / "photos" / "a.jpg"), "x");
  EMBER_EXPECT_THROW_WITH(check_checkpoint_destination(dir / "photos", "--model-out"), DataError,
                          "--model-out");
  // A run directory Ember left (metrics, snapshots, an interrupted save) is fine.
  fs::create_directories(dir / "run" / "snapshot_5");
  std::ofstream(dir / "run" / "metrics.csv") << "iteration,phase,metric,value\n";
  EXPECT_NO_THROW(check_checkpoint_destination(dir / "run", "--model-out"));
  std::ofstream(dir / "file") << "x";
  EMBER_EXPECT_THROW_WITH(check_checkpoint_destination(dir / "file", "--model-out"), DataError,
                          "exists and is not a directory");
  EMBER_EXPECT_THROW_WITH(check_checkpoint_destination(".", "--model-out"), DataError,
                          "is the current directory or one that holds it");
  EMBER_EXPECT_THROW_WITH(check_checkpoint_destination("..", "--model-out"), DataError,
                          "is the current directory or one that holds it");
  EMBER_EXPECT_THROW_WITH(check_checkpoint_destination(fs::current_path() / "", "--model-out"),
                          DataError, "is the current directory or one that holds it");
  EMBER_EXPECT_THROW_WITH(check_output_file(dir.path(), "--out"), DataError, "is a directory");
  EXPECT_NO_THROW(check_output_file(dir / "new" / "scores.csv", "--out"));
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directories(dir / "locked");
    fs::permissions(dir / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    EMBER_EXPECT_THROW_WITH(check_checkpoint_destination(dir / "locked" / "m", "--model-out"),
                            DataError, "cannot write in");
    fs::permissions(dir / "locked", fs::perms::owner_all);
  }
}

TEST(Checkpoint, AFileGivenAsACheckpointIsNamedAsSuch) {
  testing::ScratchDir dir;
  std::ofstream(dir / "model.bin") << "x";
  EMBER_EXPECT_THROW_WITH(verify_checkpoint(dir / "model.bin"), DataError,
                          "is a file, not a checkpoint directory");
  EMBER_EXPECT_THROW_WITH(verify_checkpoint(dir / "absent"), DataError, "does not exist");
}

// The moments of a save (CheckpointWriter::commit) a crash can fall between, rebuilt from a real
// save: the new checkpoint complete in <dir>.tmp-<pid>-<n>, the old one moved to <dir>.old-<pid>.
TEST(Checkpoint, ASaveInterruptedBetweenItsRenamesIsRecovered) {
  Trained t;
  testing::ScratchDir dir;
  const fs::path model = dir / "model";
  const long pid = dead_pid();
  const fs::path old = dir / ("model.old-" + std::to_string(pid));
  const fs::path staging = dir / ("model.tmp-" + std::to_string(pid) + "-7");

  // 1. Both renames pending but the old one moved aside: the finished new model wins, and what
  //    the old directory carried (metrics) moves into it.
  t.save(old, 2);
  std::ofstream(old / "metrics.csv") << "history\n";
  t.save(staging, 4);
  EXPECT_TRUE(recover_checkpoint(model));
  EXPECT_EQ(t.load(model), 4);
  EXPECT_EQ(read(model / "metrics.csv"), "history\n");
  EXPECT_FALSE(fs::exists(old));
  EXPECT_FALSE(fs::exists(staging));

  // 2. Only the moved-aside one (the new one never finished): it comes back, through load().
  fs::rename(model, old);
  fs::create_directories(staging);
  std::ofstream(staging / "dense.model") << "partial";
  EXPECT_EQ(t.load(model), 4);
  EXPECT_FALSE(fs::exists(staging));

  // 3. The new one in place, the old one half removed: the leftover goes, the model stays.
  t.save(old, 2);
  fs::remove(old / "meta.json");
  std::ofstream(old / "metrics.svg") << "<svg/>";
  EXPECT_FALSE(recover_checkpoint(model));
  EXPECT_EQ(t.load(model), 4);
  EXPECT_EQ(read(model / "metrics.svg"), "<svg/>");
  EXPECT_FALSE(fs::exists(old));

  // 4. A save of a living process (this one) is left alone.
  const fs::path mine = dir / ("model.tmp-" + std::to_string(::getpid()) + "-1");
  fs::create_directories(mine);
  EXPECT_FALSE(recover_checkpoint(model));
  EXPECT_TRUE(fs::exists(mine));

  // 5. Snapshots of a run directory are settled together.
  const fs::path snap = dir / "run" / "snapshot_3";
  t.save(dir / "run" / ("snapshot_3.old-" + std::to_string(pid)), 3);
  recover_checkpoints_in(dir / "run");
  EXPECT_EQ(t.load(snap), 3);
}

TEST(Checkpoint, ADamagedMetaJsonIsADataError) {
  Trained t;
  testing::ScratchDir dir;
  t.save(dir / "m", 1);
  const std::string meta = read(dir / "m" / "meta.json");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"files\"", "\"filez\""},
           {"\"bytes\"", "\"bytez\""},
           {"\"path\": \"dense.model\"", "\"path\": \"../dense.model\""},
           {"\"path\": \"dense.model\"", "\"path\": 3"},
           {"\"iteration\": 1", "\"iteration\": \"one\""},
           {"\"iteration\": 1", "\"iteration\": -5"}}) {
    std::string damaged = meta;
    const auto at = damaged.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    damaged.replace(at, from.size(), to);
    std::ofstream(dir / "m" / "meta.json") << damaged;
    try {
      (void)t.load(dir / "m");
      ADD_FAILURE() << "loaded with " << to;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("meta.json"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ember::train
