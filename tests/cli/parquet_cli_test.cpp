// Parquet end to end through the `ember` binary: datagen --like a Parquet configuration, train
// to the same losses as the same data in Norm, eval and predict, inspect.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>

#include "cli/cli_run_support.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// Every "loss=<x>" in the output, in order.
std::vector<std::string> losses(const std::string& text) {
  const std::regex re("iter=([0-9]+) loss=([-0-9.eE+na]+)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str() + ":" + (*it)[2].str());
  }
  return out;
}

std::string last_auc(const std::string& text) {
  const std::regex re("AUC=([0-9.eE+-]+)");
  std::string v;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    v = (*it)[1].str();
  }
  return v;
}

void write_json(const std::filesystem::path& p, const json& j) {
  std::ofstream(p) << j.dump(2);
}

TEST(ParquetCli, TrainsLikeNormAndEvalPredictInspectWork) {
  testing::ScratchDir dir;
  json base;
  std::ifstream(testing::source_dir() / "configs" / "dlrm.json") >> base;
  base["layers"][0]["num_workers"] = 1;  // one reader: the same batch order for both formats

  // Norm data from the configuration.
  json norm = base;
  norm["layers"][0]["source"] = (dir / "norm" / "train.txt").string();
  norm["layers"][0]["eval_source"] = (dir / "norm" / "eval.txt").string();
  write_json(dir / "norm.json", norm);
  ASSERT_EQ(ember("datagen --like '" + (dir / "norm.json").string() + "' --out '" +
                      (dir / "norm").string() + "' --samples 6000 --seed 11",
                  dir)
                .status,
            0);
  json description;
  std::ifstream(dir / "norm" / "dataset.json") >> description;

  // The same data as Parquet: datagen --like a Parquet configuration with the Norm data's
  // vocabularies as its slot_size_array (which then gives the keys the same offsets).
  json pq = base;
  pq["layers"][0]["format"] = "Parquet";
  pq["layers"][0]["check"] = "None";
  pq["layers"][0]["slot_size_array"] = description["slot_size_array"];
  pq["layers"][0]["source"] = (dir / "pq" / "train" / "_file_list.txt").string();
  pq["layers"][0]["eval_source"] = (dir / "pq" / "eval" / "_file_list.txt").string();
  write_json(dir / "pq.json", pq);
  const Outcome g = ember("datagen --like '" + (dir / "pq.json").string() + "' --out '" +
                              (dir / "pq").string() + "' --samples 6000 --seed 11",
                          dir);
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_THAT(g.out, HasSubstr("(Parquet,"));

  const std::string run =
      " --device cpu --set solver.batchsize=256 --set solver.batchsize_eval=512"
      " --set solver.display=5 --set solver.max_iter=30 --set solver.eval_interval=15";
  const Outcome tn = ember("train '" + (dir / "norm.json").string() + "'" + run + " --model-out '" +
                               (dir / "norm_model").string() + "'",
                           dir);
  ASSERT_EQ(tn.status, 0) << tn.err;
  const Outcome tp = ember("train '" + (dir / "pq.json").string() + "'" + run + " --model-out '" +
                               (dir / "pq_model").string() + "'",
                           dir);
  ASSERT_EQ(tp.status, 0) << tp.err;
  const auto ln = losses(tn.out), lp = losses(tp.out);
  ASSERT_EQ(ln.size(), 7u) << tn.out;  // every 5 iterations, and the closing line
  EXPECT_EQ(lp, ln);
  EXPECT_EQ(last_auc(tp.out), last_auc(tn.out));

  // eval and predict read the Parquet evaluation split.
  const std::string small =
      " --device cpu --set solver.batchsize=256 --set solver.batchsize_eval=512";
  const Outcome e = ember("eval '" + (dir / "pq.json").string() + "'" + small + " --model '" +
                              (dir / "pq_model").string() + "'",
                          dir);
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(last_auc(e.out), last_auc(tp.out));
  const Outcome p =
      ember("predict '" + (dir / "pq.json").string() + "'" + small + " --model '" +
                (dir / "pq_model").string() + "' --out '" + (dir / "pred.csv").string() + "'",
            dir);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_EQ(last_auc(p.out), last_auc(tp.out));

  // inspect: the list's header, then samples with the keys as stored (per-slot ids).
  const Outcome i =
      ember("inspect '" + (dir / "pq" / "eval" / "_file_list.txt").string() + "' --limit 3", dir);
  ASSERT_EQ(i.status, 0) << i.err;
  const auto lines = i.lines();
  ASSERT_EQ(lines.size(), 4u);
  const json header = json::parse(lines[0]);
  EXPECT_EQ(header["format"], "parquet");
  EXPECT_EQ(header["number_of_records"], 600);
  const json sample = json::parse(lines[1]);
  EXPECT_EQ(sample["slots"].size(), 26u);
  EXPECT_EQ(sample["dense"].size(), 13u);

  // A damaged file is a one-line error naming it.
  std::filesystem::resize_file(dir / "pq" / "eval" / "part_0.parquet", 100);
  const Outcome bad =
      ember("inspect '" + (dir / "pq" / "eval" / "part_0.parquet").string() + "'", dir);
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("part_0.parquet' does not end with PAR1"));
}

}  // namespace
}  // namespace ember
