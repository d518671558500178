// Bad data and a configuration that does not match the data, end to end through the `ember`
// binary as a user meets them (issue 12): a label outside the loss's range and a NaN feature
// (error, then bad_sample_policy "drop"), the wrong solver.input_key_type, a key budget too
// small, a directory or a data file where the file list belongs. Each ends with one line naming
// the file, the sample and what the configuration says against what the data holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "cli/cli_run_support.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The sample DLRM's layout in a Norm file with check None: a 64-byte header, then per sample
// 1 label, 13 dense values and 26 one-hot slots (i32 nnz, u32 key).
constexpr std::size_t kHeaderBytes = 64;
constexpr std::size_t kSampleBytes = 4 + 13 * 4 + 26 * (4 + 4);

class BadDataCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new testing::ScratchDir;
    const Outcome d = ember("datagen --like '" + config() + "' --out '" + data() +
                                "' --samples 4000 --eval-samples 1000 --files 1 --check none",
                            *data_dir_);
    ASSERT_EQ(d.status, 0) << d.err;
  }
  static void TearDownTestSuite() {
    delete data_dir_;
    data_dir_ = nullptr;
  }
  static std::string config() { return (testing::source_dir() / "configs" / "dlrm.json").string(); }
  static std::string data() { return (data_dir_->path() / "data").string(); }
  static std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

  // `ember train` of the sample DLRM on the CPU, sources given.
  Outcome train(const fs::path& source, const fs::path& eval_source, const std::string& more) {
    return ember("train " + q(config()) + " --set layers.data.source=" + q(source) +
                     " --set layers.data.eval_source=" + q(eval_source) +
                     " --set layers.data.check=None --device cpu --set solver.batchsize=256"
                     " --set solver.batchsize_eval=256 --set solver.max_iter=4"
                     " --set solver.eval_interval=4 --no-progress --model-out " +
                     q(dir_ / "model") + " " + more,
                 dir_);
  }
  fs::path good_list() const { return fs::path(data()) / "train.txt"; }
  fs::path good_eval_list() const { return fs::path(data()) / "eval.txt"; }

  // A copy of the generated data file `name` with float `column` of sample `sample` set to
  // `value` (column 0 is the label, 1 to 13 the dense values), and a file list of it.
  fs::path patched_list(const std::string& name, std::size_t sample, std::size_t column,
                        float value) {
    const fs::path file = dir_ / name;
    fs::copy_file(fs::path(data()) / name, file, fs::copy_options::overwrite_existing);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(kHeaderBytes + sample * kSampleBytes + column * 4));
    char bytes[4];
    std::memcpy(bytes, &value, 4);
    f.write(bytes, 4);
    f.close();
    const fs::path list = dir_ / (name + ".txt");
    std::ofstream(list) << "1\n" << file.string() << "\n";
    return list;
  }

  testing::ScratchDir dir_;

 private:
  static testing::ScratchDir* data_dir_;
};

testing::ScratchDir* BadDataCli::data_dir_ = nullptr;

TEST_F(BadDataCli, ALabelOutsideTheLossRangeIsNamedThenDroppedOnRequest) {
  const fs::path list = patched_list("train_0.data", 37, 0, 2.0f);
  const Outcome o = train(list, good_eval_list(), "");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("'" + (dir_ / "train_0.data").string() +
                               "': sample 37: label column 0 is 2, outside [0, 1], the labels the "
                               "BinaryCrossEntropyLoss layer"));
  EXPECT_THAT(o.err, HasSubstr("\"bad_sample_policy\": \"drop\" drops such samples instead"));
  EXPECT_FALSE(fs::exists(dir_ / "model" / "meta.json"));  // no model (the run directory may be)
  const Outcome drop = train(list, good_eval_list(), "--set layers.data.bad_sample_policy=drop");
  ASSERT_EQ(drop.status, 0) << drop.err;
  EXPECT_THAT(drop.out + drop.err, HasSubstr("sample 37 dropped: label column 0 is 2"));
  EXPECT_TRUE(fs::exists(dir_ / "model" / "meta.json"));
}

TEST_F(BadDataCli, ANaNOrInfiniteFeatureInTheEvaluationDataIsNamed) {
  const fs::path nan =
      patched_list("eval_0.data", 5, 1 + 4, std::numeric_limits<float>::quiet_NaN());
  Outcome o = train(good_list(), nan, "");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("'" + (dir_ / "eval_0.data").string() +
                               "': sample 5: dense column 4 is NaN"));
  const fs::path inf =
      patched_list("eval_0.data", 9, 1 + 12, -std::numeric_limits<float>::infinity());
  o = train(good_list(), inf, "");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("': sample 9: dense column 12 is -infinity"));
}

TEST_F(BadDataCli, AKeyTypeOtherThanTheDatasIsNamedAsTheConfigurations) {
  const Outcome o = train(good_list(), good_eval_list(), "--set solver.input_key_type=I64");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("holds 32-bit keys, but the configuration reads 64-bit ones "
                               "(solver.input_key_type \"I64\")"));
  EXPECT_THAT(o.err, HasSubstr("set solver.input_key_type to \"I32\""));
  EXPECT_THAT(o.err, ::testing::Not(HasSubstr("broken record")));
}

TEST_F(BadDataCli, AKeyBudgetTooSmallIsNamedAsTheConfigurations) {
  const Outcome o = train(good_list(), good_eval_list(),
                          "--set layers.data.sparse.0.max_feature_num_per_sample=20");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("the configuration's key budget is too small for this data (raise "
                               "max_feature_num_per_sample of sparse input 0 to at least 26)"));
  EXPECT_THAT(o.err, ::testing::Not(HasSubstr("broken record")));
}

TEST_F(BadDataCli, ADirectoryOrADataFileWhereTheFileListBelongsIsNamed) {
  Outcome o = train(fs::path(data()), good_eval_list(), "");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("file list '" + data() + "' is a directory, not a file"));
  o = train(fs::path(data()) / "train_0.data", good_eval_list(), "");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("looks like a data file, not a file list"));
  // Binary bytes are not quoted back at the user.
  EXPECT_EQ(o.err.find('\0'), std::string::npos);
}

}  // namespace
}  // namespace ember
