// Checkpoints of several ranks: every rank writes its own shard of each embedding
// (sparse/<name>/rank_<r>/), meta.json lists the shards' files and the layout, and the checkpoint
// loads on one rank, on the same rank count and on another, giving the saved model back bit for
// bit; a damaged or missing shard file is refused naming it.
#include <gtest/gtest.h>

#include <fstream>

#include "ember/core/error.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;

void expect_same_model(const embedding::EmbeddingSnapshot& got,
                       const embedding::EmbeddingSnapshot& want, const std::string& what) {
  ASSERT_FALSE(want.keys.empty()) << what;
  EXPECT_EQ(got.keys, want.keys) << what;
  EXPECT_EQ(got.slots, want.slots) << what;
  EXPECT_EQ(got.vectors, want.vectors) << what;  // bit for bit
  EXPECT_EQ(got.states, want.states) << what;
  EXPECT_EQ(got.step, want.step) << what;
}

nlohmann::json read_meta(const fs::path& dir) {
  std::ifstream in(dir / "meta.json");
  return nlohmann::json::parse(in);
}

TEST(ShardedCheckpoint, EveryRankWritesItsShardAndAnyRankCountLoadsIt) {
  for (const char* type :
       {"LocalizedSlotSparseEmbeddingHash", "DistributedSlotSparseEmbeddingHash"}) {
    auto json = sample_config("dlrm");
    json["layers"][1]["type"] = type;
    json["layers"][1]["sparse_embedding_hparam"]["workspace_size_per_gpu_in_mb"] = 4;
    auto data = make_dataset(json, 2000);
    const ModelConfig config = tiny_config(json, *data, 96, 4);
    const std::string name = config.embeddings.front().name;
    ember::testing::ScratchDir dir;
    embedding::EmbeddingSnapshot want;
    {
      Session s(config, quiet_options("", 2));
      (void)s.train();
      s.save(dir / "m");
      want = s.embedding_snapshot(name);
    }
    // One shard per rank, each listed with its size and hash, and the layout recorded.
    const nlohmann::json meta = read_meta(dir / "m");
    std::int64_t listed_rows = 0;
    ASSERT_EQ(meta.at("sparse_layout").at("shards"), 2) << meta.dump();
    for (const auto& e : meta.at("sparse_layout").at("embeddings")) {
      if (e.at("name") != name) continue;
      ASSERT_EQ(e.at("rows").size(), 2u);
      for (const auto& n : e.at("rows"))
        listed_rows += n.get<std::int64_t>();
    }
    EXPECT_EQ(listed_rows, static_cast<std::int64_t>(want.keys.size())) << type;
    EXPECT_FALSE(fs::exists(dir / "m" / "sparse" / name / "keys"));
    for (int r = 0; r < 2; ++r) {
      for (const char* file : {"keys", "vectors", "adam_m", "adam_v", "optimizer_step"}) {
        const std::string path = "sparse/" + name + "/rank_" + std::to_string(r) + "/" + file;
        ASSERT_TRUE(fs::is_regular_file(dir / "m" / path)) << path;
        bool listed = false;
        for (const auto& f : meta.at("files")) {
          if (f.at("path") == path) {
            listed = true;
            EXPECT_EQ(f.at("bytes").get<std::uint64_t>(), fs::file_size(dir / "m" / path)) << path;
            EXPECT_EQ(f.at("hash").get<std::uint64_t>(), hash_file(dir / "m" / path)) << path;
          }
        }
        EXPECT_TRUE(listed) << path;
      }
    }
    for (int ranks : {1, 2, 3}) {
      Session s(config, quiet_options("", ranks));
      s.load(dir / "m");
      EXPECT_EQ(s.iteration(), 4);
      expect_same_model(s.embedding_snapshot(name), want,
                        std::string(type) + " loaded by " + std::to_string(ranks) + " rank(s)");
      // ... and saved again by 1 rank, HugeCTR's layout, holding the same rows.
      if (ranks == 1) {
        s.save(dir / "one");
        EXPECT_TRUE(fs::is_regular_file(dir / "one" / "sparse" / name / "keys"));
        EXPECT_EQ(read_meta(dir / "one").at("sparse_layout").at("shards"), 1);
        for (const char* file : {"keys", "vectors", "adam_m", "adam_v"}) {
          const fs::path one = dir / "one" / "sparse" / name / file;
          std::ifstream in(one, std::ios::binary);
          const std::string bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
          EXPECT_EQ(bytes, merged_saved_file(dir / "m" / "sparse" / name, file)) << file;
        }
      }
    }
    // A checkpoint of one rank loads on two.
    {
      Session s(config, quiet_options("", 2));
      s.load(dir / "one");
      expect_same_model(s.embedding_snapshot(name), want, std::string(type) + " one to two");
    }
  }
}

// solver.sparse_model_file and sparse_opt_states_file naming a sharded sparse/<name>/: the
// model and its states load on any rank count (the states joined to the model shard by shard).
TEST(ShardedCheckpoint, SolverModelFilesMayBeSharded) {
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  const ModelConfig config = tiny_config(json, *data, 96, 3);
  const std::string name = config.embeddings.front().name;
  ember::testing::ScratchDir dir;
  embedding::EmbeddingSnapshot want;
  {
    Session s(config, quiet_options("", 2));
    (void)s.train();
    s.save(dir / "a");
    want = s.embedding_snapshot(name);
  }
  const fs::path emb = dir / "a" / "sparse" / name;
  ASSERT_TRUE(fs::is_directory(emb / "rank_1"));
  const std::vector<std::string> files = {
      "solver.sparse_model_file=[\"" + emb.string() + "\"]",
      "solver.sparse_opt_states_file=[\"" + emb.string() + "\"]"};
  for (int ranks : {1, 3}) {
    Session s(tiny_config(json, *data, 96, 3, files), quiet_options("", ranks));
    expect_same_model(s.embedding_snapshot(name), want,
                      "solver files loaded by " + std::to_string(ranks) + " rank(s)");
  }
  // States whose shards do not match the model's are refused naming the shard.
  fs::create_directories(dir / "states");
  fs::copy(emb / "rank_0", dir / "states" / "rank_0");
  const std::vector<std::string> partial = {
      files[0], "solver.sparse_opt_states_file=[\"" + (dir / "states").string() + "\"]"};
  EMBER_EXPECT_THROW_WITH(Session(tiny_config(json, *data, 96, 3, partial), quiet_options("", 1)),
                          DataError, "no shard rank_1");
}

TEST(ShardedCheckpoint, ADamagedOrMissingShardFileIsRefusedNamingIt) {
  auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  const ModelConfig config = tiny_config(json, *data, 96, 2);
  const std::string name = config.embeddings.front().name;
  ember::testing::ScratchDir dir;
  {
    Session s(config, quiet_options("", 2));
    (void)s.train();
    s.save(dir / "m");
  }
  fs::copy(dir / "m", dir / "n", fs::copy_options::recursive);
  const std::string shard = "sparse/" + name + "/rank_1/";
  fs::resize_file(dir / "m" / (shard + "vectors"),
                  fs::file_size(dir / "m" / (shard + "vectors")) - 4);
  fs::remove(dir / "n" / (shard + "adam_v"));
  for (int ranks : {1, 2}) {
    Session s(config, quiet_options("", ranks));
    EMBER_EXPECT_THROW_WITH(s.load(dir / "m"), DataError, shard + "vectors has ");
    EMBER_EXPECT_THROW_WITH(s.load(dir / "n"), DataError, "file " + shard + "adam_v is missing");
  }
}

}  // namespace
}  // namespace ember::train
