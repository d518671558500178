// Criteo conversion: the shared 200-line sample, a hand-made bad file, the line parser.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "data/data_test_support.hpp"
#include "ember/data/criteo.hpp"
#include "ember/data/inspect.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/pipeline.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, '\t'))
    out.push_back(f);
  if (!line.empty() && line.back() == '\t') out.push_back("");
  return out;
}

TEST(Criteo, ParsesLinesAndExplainsBadOnes) {
  std::string line = "1";
  for (int j = 0; j < 13; ++j) {
    line += '\t';
    if (j == 2)
      line += "-5";
    else if (j != 4)
      line += std::to_string(j * 10);
  }
  for (int j = 0; j < 26; ++j)
    line += j == 3 ? "\t" : "\t68fd1e64";
  CriteoRecord r;
  std::string reason;
  ASSERT_TRUE(parse_criteo_line(line, r, reason)) << reason;
  EXPECT_EQ(r.label, 1);
  EXPECT_EQ(r.dense[1], 10);
  EXPECT_EQ(r.dense[2], -5);
  EXPECT_EQ(r.dense[4], 0);
  EXPECT_FALSE(r.present[3]);
  EXPECT_TRUE(r.present[0]);
  EXPECT_EQ(r.categorical[0], 0x68fd1e64u);
  ASSERT_TRUE(parse_criteo_line(std::string(line).append("\r"), r, reason));  // CRLF files
  EXPECT_FALSE(parse_criteo_line(std::string(line).append("\textra"), r, reason));
  EXPECT_THAT(reason, HasSubstr("expected 40 tab-separated fields, found 41"));
  std::string bad_label = line;
  bad_label[0] = '2';
  EXPECT_FALSE(parse_criteo_line(bad_label, r, reason));
  EXPECT_THAT(reason, HasSubstr("label '2'"));
  std::string bad_int = line;
  bad_int.replace(bad_int.find("\t10\t"), 4, "\t1x\t");
  EXPECT_FALSE(parse_criteo_line(bad_int, r, reason));
  EXPECT_THAT(reason, HasSubstr("I2 '1x' is not an integer"));
  std::string bad_hex = line;
  bad_hex.replace(bad_hex.rfind("68fd1e64"), 8, "68fd1e6g");
  EXPECT_FALSE(parse_criteo_line(bad_hex, r, reason));
  EXPECT_THAT(reason, HasSubstr("C26 '68fd1e6g' is not a 32-bit hex value"));
  EXPECT_FALSE(parse_criteo_line("", r, reason));
  EXPECT_EQ(criteo_dense_transform(-3), 0.f);
  EXPECT_EQ(criteo_dense_transform(0), 0.f);
  EXPECT_FLOAT_EQ(criteo_dense_transform(9), std::log(10.f));
}

TEST(Criteo, ConvertsTheSharedSampleWithVocabularies) {
  EMBER_REQUIRE_SHARED_DATA(shared);
  const std::string tsv = (shared / "criteo_sample.tsv").string();
  testing::ScratchDir dir;
  CriteoConvertOptions o;
  o.inputs = {tsv};
  o.out_dir = dir.path().string();
  o.min_frequency = 2;
  o.eval_fraction = 0.1;
  o.samples_per_file = 70;
  o.progress = false;
  const CriteoConvertResult r = convert_criteo(o);
  EXPECT_EQ(r.lines, 200);
  EXPECT_EQ(r.malformed, 0);
  EXPECT_EQ(r.samples, 200);
  const DatasetDescription& d = r.description;
  EXPECT_EQ(d.train.samples, 180);
  EXPECT_EQ(d.eval.samples, 20);
  EXPECT_EQ(d.train.files.size(), 3u);  // 70 + 70 + 40

  // Reference, computed here from the text: per slot, the values seen at least twice in the
  // first 180 lines, each with its expected id (by decreasing count, then value).
  std::ifstream in(tsv);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);)
    rows.push_back(split_tabs(line));
  ASSERT_EQ(rows.size(), 200u);
  std::vector<std::int64_t> expected_sizes;
  std::vector<std::map<std::string, std::int64_t>> expected_ids(26);
  for (int s = 0; s < 26; ++s) {
    std::map<std::string, int> count;
    for (std::size_t i = 0; i < 180; ++i) {
      const std::string& v = rows[i].at(static_cast<std::size_t>(14 + s));
      if (!v.empty()) ++count[v];
    }
    std::vector<std::pair<int, std::uint32_t>> kept;
    for (const auto& [v, n] : count) {
      if (n >= 2) kept.emplace_back(-n, static_cast<std::uint32_t>(std::stoul(v, nullptr, 16)));
    }
    std::sort(kept.begin(), kept.end());
    for (std::size_t i = 0; i < kept.size(); ++i) {
      char hex[9];
      std::snprintf(hex, sizeof hex, "%08x", kept[i].second);
      expected_ids[static_cast<std::size_t>(s)][hex] = static_cast<std::int64_t>(i + 1);
    }
    expected_sizes.push_back(static_cast<std::int64_t>(kept.size()) + 1);
  }
  EXPECT_EQ(d.slot_size_array, expected_sizes);

  std::vector<datatest::Sample> samples = datatest::read_split(d, DataSplit::Train, DType::U32);
  const auto eval = datatest::read_split(d, DataSplit::Eval, DType::U32);
  samples.insert(samples.end(), eval.begin(), eval.end());
  ASSERT_EQ(samples.size(), 200u);
  std::vector<std::int64_t> offsets{0};
  for (auto size : d.slot_size_array)
    offsets.push_back(offsets.back() + size);
  for (std::size_t i = 0; i < 200; ++i) {
    const auto& row = rows[i];
    const auto& s = samples[i];
    EXPECT_EQ(s.label[0], std::stof(row[0])) << "line " << i + 1;
    for (int j = 0; j < 13; ++j) {
      const std::string& v = row[static_cast<std::size_t>(1 + j)];
      const double x = v.empty() ? 0.0 : std::max(0.0, std::stod(v));
      EXPECT_FLOAT_EQ(s.dense[static_cast<std::size_t>(j)], static_cast<float>(std::log(x + 1)))
          << "line " << i + 1 << " I" << j + 1;
    }
    for (int k = 0; k < 26; ++k) {
      const auto sk = static_cast<std::size_t>(k);
      ASSERT_EQ(s.slots[sk].size(), 1u);
      const std::int64_t key = s.slots[sk][0];
      EXPECT_GE(key, offsets[sk]);  // disjoint slot ranges
      EXPECT_LT(key, offsets[sk + 1]);
      const std::string& v = row[static_cast<std::size_t>(14 + k)];
      const auto it = expected_ids[sk].find(v);
      const std::int64_t id = (v.empty() || it == expected_ids[sk].end()) ? 0 : it->second;
      EXPECT_EQ(key, offsets[sk] + id) << "line " << i + 1 << " C" << k + 1 << " '" << v << "'";
    }
  }
}

TEST(Criteo, HashEncodingAndRawOutput) {
  EMBER_REQUIRE_SHARED_DATA(shared);
  testing::ScratchDir dir;
  CriteoConvertOptions o;
  o.inputs = {(shared / "criteo_sample.tsv").string()};
  o.out_dir = dir.path().string();
  o.format = DataFormat::Raw;
  o.encoding = CategoricalEncoding::Hash;
  o.hash_buckets = {1000};
  o.progress = false;
  const CriteoConvertResult r = convert_criteo(o);
  EXPECT_EQ(r.description.slot_size_array, std::vector<std::int64_t>(26, 1000));
  EXPECT_EQ(r.description.train.samples, 200);
  EXPECT_EQ(r.description.eval.samples, 0);
  const auto samples = datatest::read_split(r.description, DataSplit::Train, DType::I64);
  ASSERT_EQ(samples.size(), 200u);
  std::set<std::int64_t> distinct;
  for (const auto& s : samples) {
    for (std::size_t k = 0; k < 26; ++k) {
      ASSERT_GE(s.slots[k][0], 1000 * static_cast<std::int64_t>(k));
      ASSERT_LT(s.slots[k][0], 1000 * static_cast<std::int64_t>(k + 1));
      distinct.insert(s.slots[k][0]);
    }
    for (float x : s.dense)
      EXPECT_GE(x, 0.f);
  }
  EXPECT_GT(distinct.size(), 300u);  // hashing spreads the values
}

TEST(Criteo, MalformedLinesAreCountedAndReportedWithLineNumbers) {
  testing::ScratchDir dir;
  std::string good = "0";
  for (int j = 0; j < 13; ++j)
    good.append("\t").append(std::to_string(j));
  for (int j = 0; j < 26; ++j)
    good.append("\ta1b2c3d").append(std::to_string(j % 10));
  const std::string path = (dir / "bad.tsv").string();
  {
    std::ofstream out(path);
    out << good << "\n"                   // line 1
        << good << "\textra\n"            // line 2: too many fields
        << "x" << good.substr(1) << "\n"  // line 3: bad label
        << good << "\n"                   // line 4
        << "\n"                           // line 5: empty
        << good;                          // line 6, no final newline
  }
  CriteoConvertOptions o;
  o.inputs = {path};
  o.out_dir = (dir / "out").string();
  o.min_frequency = 1;
  o.progress = false;
  o.report_malformed = 2;
  const CriteoConvertResult r = convert_criteo(o);
  EXPECT_EQ(r.lines, 6);
  EXPECT_EQ(r.samples, 3);
  EXPECT_EQ(r.malformed, 3);
  ASSERT_EQ(r.first_malformed.size(), 2u);
  EXPECT_EQ(r.first_malformed[0].file, path);
  EXPECT_EQ(r.first_malformed[0].line, 2);
  EXPECT_THAT(r.first_malformed[0].reason, HasSubstr("found 41"));
  EXPECT_EQ(r.first_malformed[1].line, 3);
  EXPECT_THAT(r.first_malformed[1].reason, HasSubstr("label 'x'"));
  const auto desc = DatasetDescription::read((dir / "out" / "dataset.json").string());
  EXPECT_EQ(desc.extra["malformed"]["count"], 3);
  EXPECT_EQ(desc.extra["malformed"]["first"][0]["line"], 2);
  EXPECT_EQ(desc.train.samples, 3);
}

TEST(Criteo, ProgressTextShowsRateAndEta) {
  const std::string line = conversion_progress_text("convert", 250, 1000, 2000000, 2.0);
  EXPECT_THAT(line, HasSubstr("25.0%"));
  EXPECT_THAT(line, HasSubstr("2.00M lines"));
  EXPECT_THAT(line, HasSubstr("1.00M lines/s"));
  EXPECT_THAT(line, HasSubstr("ETA 0:06"));
  EXPECT_EQ(line, "convert  25.0% 2.00M lines 1.00M lines/s 125B/s ETA 0:06");
  // Unknown total: no share and no ETA.
  EXPECT_EQ(conversion_progress_text("convert", 3000, 0, 10, 1.0),
            "convert 10 lines 10 lines/s 3.0kB/s");
}

TEST(Inspect, PrintsHeaderAndSamplesAsJsonLines) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  datatest::SampleShape shape;
  shape.dense_dim = 2;
  shape.slots_per_input = {3};
  const auto samples = datatest::random_samples(rng, 10, shape);
  datatest::write_norm(dir / "f.data", samples, shape, CheckMode::Sum, DType::I64);
  InspectOptions o;
  o.path = (dir / "f.data").string();
  o.key_type = DType::I64;
  o.offset = 3;
  o.limit = 4;
  std::ostringstream out;
  const InspectSummary s = inspect_dataset(o, out);
  EXPECT_EQ(s.printed, 4);
  std::istringstream lines(out.str());
  std::string line;
  std::getline(lines, line);
  const auto header = nlohmann::json::parse(line);
  EXPECT_EQ(header["number_of_records"], 10);
  EXPECT_EQ(header["error_check"], 1);
  for (int i = 3; i < 7; ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    const auto j = nlohmann::json::parse(line);
    const auto& want = samples[static_cast<std::size_t>(i)];
    EXPECT_EQ(j["label"].get<std::vector<float>>(), want.label);
    EXPECT_EQ(j["dense"].get<std::vector<float>>(), want.dense);  // shortest round-trip floats
    EXPECT_EQ(j["slots"].get<std::vector<std::vector<std::int64_t>>>(), want.slots);
  }
  EXPECT_FALSE(std::getline(lines, line));
}

}  // namespace
}  // namespace ember::data
