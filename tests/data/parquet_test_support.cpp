#include "data/parquet_test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "ember/data/file_list.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "support/test_support.hpp"

namespace ember::data::parquettest {

namespace fs = std::filesystem;
using nlohmann::json;

bool fixture_readable(const std::string& name) {
  if (name.find("zstd") != std::string::npos) return parquet::codec_readable(parquet::Codec::Zstd);
  return true;
}

fs::path fixture(const std::string& name) {
  return testing::source_dir() / "tests" / "data" / "fixtures" / "parquet" / name;
}

std::vector<datatest::Sample> fixture_samples(const std::string& name,
                                              const std::vector<std::int64_t>& slot_size_array) {
  std::ifstream in(fixture("values.json"));
  const json all = json::parse(in);
  const json& v = all.at(name);
  const auto labels = v.at("layout").at("labels").size();
  const auto conts = v.at("layout").at("conts").size();
  const auto cats = v.at("layout").at("cats").size();
  std::vector<std::int64_t> offsets(cats, 0);
  for (std::size_t s = 1; s < cats && !slot_size_array.empty(); ++s) {
    offsets[s] = offsets[s - 1] + slot_size_array[s - 1];
  }
  std::vector<datatest::Sample> out;
  for (const json& row : v.at("rows")) {
    datatest::Sample s;
    std::size_t c = 0;
    for (std::size_t j = 0; j < labels; ++j)
      s.label.push_back(row[c++].get<float>());
    for (std::size_t j = 0; j < conts; ++j)
      s.dense.push_back(row[c++].get<float>());
    for (std::size_t j = 0; j < cats; ++j, ++c) {
      std::vector<std::int64_t> keys;
      if (row[c].is_array()) {
        for (const json& k : row[c])
          keys.push_back(k.get<std::int64_t>() + offsets[j]);
      } else {
        keys.push_back(row[c].get<std::int64_t>() + offsets[j]);
      }
      s.slots.push_back(keys);
    }
    out.push_back(std::move(s));
  }
  return out;
}

BatchLayout fixture_layout(std::int64_t dense, std::int64_t slots, std::int64_t budget,
                           DType key_type) {
  BatchLayout layout;
  layout.label_dim = 1;
  layout.dense_dim = dense;
  layout.key_type = key_type;
  layout.sparse.push_back({"data1", slots, budget, budget});
  return layout;
}

std::vector<datatest::Sample> read_list(const std::string& list, const BatchLayout& layout,
                                        const std::vector<std::int64_t>& slot_size_array,
                                        std::int64_t capacity) {
  const FileList files = read_file_list(list);
  parquet::ParquetFileReader reader(layout, slot_size_array);
  HostBatch batch(layout, capacity);
  std::vector<datatest::Sample> out;
  for (const auto& f : files.files) {
    const auto metadata = parquet::read_hugectr_metadata(parquet::metadata_path_for(f));
    reader.open(f, metadata);
    while (!reader.done()) {
      batch.clear();
      reader.read(batch);
      const auto got = datatest::samples_of(batch);
      out.insert(out.end(), got.begin(), got.end());
    }
  }
  return out;
}

void copy_fixture(const std::string& name, const fs::path& to) {
  fs::create_directories(to);
  fs::copy(fixture(name), to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

namespace {

std::string run(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    out.append(buf, n);
  status = ::pclose(pipe);
  return out;
}

}  // namespace

std::optional<std::string> duckdb_reader(std::string& why) {
  int status = 0;
  run("node --version > /dev/null 2>&1", status);
  if (status != 0) {
    why = "node is not installed";
    return std::nullopt;
  }
  // The module where the fixtures' package.json installs it, or where the CTest setup step
  // (tests/data/fixtures/parquet/install-duckdb) put it in the build tree.
  const fs::path script = fixture("duckdb_read.mjs");
  std::vector<fs::path> homes = {fixture("node_modules")};
  if (const char* b = std::getenv("EMBER_DUCKDB_NODE_MODULES")) homes.insert(homes.begin(), b);
  for (const auto& home : homes) {
    if (fs::exists(home / "@duckdb" / "node-api")) {
      return "NODE_PATH='" + home.string() + "' node '" + script.string() + "'";
    }
  }
  why =
      "the npm package @duckdb/node-api is not installed (npm install in "
      "tests/data/fixtures/parquet, or set EMBER_DUCKDB_NODE_MODULES)";
  return std::nullopt;
}

std::vector<std::vector<double>> duckdb_rows(const std::string& reader,
                                             const std::vector<std::string>& files,
                                             const std::vector<std::string>& columns) {
  std::ostringstream cmd;
  cmd << reader << " --columns '";
  for (std::size_t i = 0; i < columns.size(); ++i)
    cmd << (i ? "," : "") << columns[i];
  cmd << "'";
  for (const auto& f : files)
    cmd << " '" << f << "'";
  cmd << " 2>&1";
  int status = 0;
  const std::string out = run(cmd.str(), status);
  EXPECT_EQ(status, 0) << "DuckDB failed: " << out;
  std::vector<std::vector<double>> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const json row = json::parse(line);
    std::vector<double> r;
    for (const json& v : row) {
      if (v.is_array()) {
        r.push_back(static_cast<double>(v.size()));
        for (const json& k : v)
          r.push_back(k.get<double>());
      } else {
        r.push_back(v.get<double>());
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace ember::data::parquettest
