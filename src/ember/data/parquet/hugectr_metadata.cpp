#include "ember/data/parquet/hugectr_metadata.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "ember/core/error.hpp"

namespace ember::data::parquet {

namespace fs = std::filesystem;
using nlohmann::json;

std::int64_t HugeCtrMetadata::rows_of(const std::string& data_file) const {
  const std::string name = fs::path(data_file).filename().string();
  for (const auto& s : file_stats) {
    if (s.file_name == name || fs::path(s.file_name).filename().string() == name) return s.num_rows;
  }
  return -1;
}

std::string metadata_path_for(const std::string& data_file) {
  return (fs::path(data_file).parent_path() / "_metadata.json").string();
}

namespace {

const json& member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) EMBER_THROW_AS(DataError, where, ": expected a JSON object");
  const auto it = object.find(key);
  if (it == object.end()) EMBER_THROW_AS(DataError, where, ": missing \"", key, "\"");
  return *it;
}

std::int64_t integer(const json& v, const char* key, const std::string& where) {
  if (!v.is_number_integer()) {
    EMBER_THROW_AS(DataError, where, ": \"", key, "\" must be an integer, got ", v.dump());
  }
  return v.get<std::int64_t>();
}

std::vector<MetadataColumn> read_columns(const json& doc, const char* group,
                                         const std::string& path) {
  const json& list = member(doc, group, "'" + path + "'");
  if (!list.is_array()) {
    EMBER_THROW_AS(DataError, "'", path, "': \"", group, "\" must be an array");
  }
  std::vector<MetadataColumn> out;
  std::set<std::int64_t> indices;
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = cat("'", path, "': ", group, "[", i, "]");
    MetadataColumn c;
    const json& name = member(list[i], "col_name", where);
    if (!name.is_string()) EMBER_THROW_AS(DataError, where, ": \"col_name\" must be a string");
    c.col_name = name.get<std::string>();
    c.index = integer(member(list[i], "index", where), "index", where);
    if (!indices.insert(c.index).second) {
      EMBER_THROW_AS(DataError, where, ": index ", c.index, " appears twice in \"", group, "\"");
    }
    if (!names.insert(c.col_name).second) {
      EMBER_THROW_AS(DataError, where, ": column '", c.col_name, "' appears twice in \"", group,
                     "\"");
    }
    out.push_back(std::move(c));
  }
  // HugeCTR's reader takes each group's columns in the order of their index.
  std::stable_sort(out.begin(), out.end(), [](const MetadataColumn& a, const MetadataColumn& b) {
    return a.index < b.index;
  });
  return out;
}

}  // namespace

HugeCtrMetadata read_hugectr_metadata(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    EMBER_THROW_AS(DataError, "cannot open Parquet metadata '", path,
                   "' (HugeCTR's layout puts a _metadata.json beside the Parquet files)");
  }
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    EMBER_THROW_AS(DataError, "Parquet metadata '", path, "' is not valid JSON: ", e.what());
  }
  HugeCtrMetadata m;
  m.path = path;
  const json& stats = member(doc, "file_stats", "'" + path + "'");
  if (!stats.is_array()) EMBER_THROW_AS(DataError, "'", path, "': \"file_stats\" must be an array");
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const std::string where = cat("'", path, "': file_stats[", i, "]");
    FileStats s;
    const json& name = member(stats[i], "file_name", where);
    if (!name.is_string()) EMBER_THROW_AS(DataError, where, ": \"file_name\" must be a string");
    s.file_name = name.get<std::string>();
    s.num_rows = integer(member(stats[i], "num_rows", where), "num_rows", where);
    if (s.num_rows < 0) EMBER_THROW_AS(DataError, where, ": negative num_rows ", s.num_rows);
    m.file_stats.push_back(std::move(s));
  }
  m.labels = read_columns(doc, "labels", path);
  m.conts = read_columns(doc, "conts", path);
  m.cats = read_columns(doc, "cats", path);
  return m;
}

void write_hugectr_metadata(const std::string& path, const HugeCtrMetadata& m) {
  json doc;
  json stats = json::array();
  for (const auto& s : m.file_stats)
    stats.push_back({{"file_name", s.file_name}, {"num_rows", s.num_rows}});
  doc["file_stats"] = stats;
  const auto columns = [](const std::vector<MetadataColumn>& cs) {
    json a = json::array();
    for (const auto& c : cs)
      a.push_back({{"col_name", c.col_name}, {"index", c.index}});
    return a;
  };
  doc["labels"] = columns(m.labels);
  doc["conts"] = columns(m.conts);
  doc["cats"] = columns(m.cats);
  std::ofstream out(path, std::ios::trunc);
  if (!out) EMBER_THROW_AS(DataError, "cannot write Parquet metadata '", path, "'");
  out << doc.dump(2) << '\n';
  if (!out) EMBER_THROW_AS(DataError, "error writing Parquet metadata '", path, "'");
}

}  // namespace ember::data::parquet
