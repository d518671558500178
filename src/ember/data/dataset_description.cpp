#include "ember/data/dataset_description.hpp"

#include <filesystem>
#include <fstream>

#include "ember/core/error.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/file_list.hpp"

namespace ember::data {

using nlohmann::json;

std::int64_t DatasetDescription::slot_num() const {
  std::int64_t n = 0;
  for (const auto& s : sparse)
    n += s.slot_num;
  return n;
}

void DatasetDescription::write_file_lists(const std::string& dir) {
  for (auto [split, name] : {std::pair{&train, "train.txt"}, std::pair{&eval, "eval.txt"}}) {
    if (split->files.empty()) continue;
    split->file_list = output_path(dir, name);
    write_file_list(split->file_list, split->files);
  }
}

DataConfig DatasetDescription::data_config() const {
  DataConfig c;
  c.format = format;
  c.check = check;
  c.source =
      format == DataFormat::Raw ? (train.files.empty() ? "" : train.files[0]) : train.file_list;
  c.eval_source =
      format == DataFormat::Raw ? (eval.files.empty() ? "" : eval.files[0]) : eval.file_list;
  c.label_dim = label_dim;
  c.dense_dim = dense_dim;
  for (const auto& s : sparse) {
    SparseInputConfig in;
    in.top = s.name;
    in.slot_num = s.slot_num;
    in.max_nnz = s.max_nnz;
    in.max_feature_num_per_sample = s.max_feature_num_per_sample;
    c.sparse.push_back(in);
  }
  if (format == DataFormat::Raw) {
    c.num_samples = train.samples;
    c.eval_num_samples = eval.samples;
    c.float_label_dense = float_label_dense;
  }
  // Raw and Parquet store per-slot ids: the reader adds the slot offsets.
  if (format != DataFormat::Norm) c.slot_size_array = slot_size_array;
  return c;
}

namespace {
json split_json(const DatasetSplitDescription& s) {
  json j;
  if (!s.file_list.empty()) j["file_list"] = s.file_list;
  j["files"] = s.files;
  j["samples"] = s.samples;
  return j;
}
DatasetSplitDescription split_from(const json& j) {
  DatasetSplitDescription s;
  s.file_list = j.value("file_list", "");
  s.files = j.value("files", std::vector<std::string>{});
  s.samples = j.value("samples", std::int64_t{0});
  return s;
}
std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

json DatasetDescription::to_json() const {
  json j = extra.is_object() ? extra : json::object();
  j["generator"] = generator;
  j["format"] = lower(data::to_string(format));
  j["check"] = lower(data::to_string(check));
  j["key_type"] = std::string(key_type_name(key_type));
  j["input_key_type"] = key_type == DType::I64 ? "I64" : "I32";
  j["label_dim"] = label_dim;
  j["dense_dim"] = dense_dim;
  j["slot_num"] = slot_num();
  json sp = json::array();
  for (const auto& s : sparse) {
    sp.push_back({{"name", s.name},
                  {"slot_num", s.slot_num},
                  {"max_nnz", s.max_nnz},
                  {"max_feature_num_per_sample", s.max_feature_num_per_sample}});
  }
  j["sparse"] = sp;
  j["slot_size_array"] = slot_size_array;
  std::int64_t vocabulary = 0;
  for (auto v : slot_size_array)
    vocabulary += v;
  j["vocabulary_size"] = vocabulary;
  if (format == DataFormat::Raw) j["float_label_dense"] = float_label_dense;
  j["train"] = split_json(train);
  j["eval"] = split_json(eval);
  j["data_layer"] = data::to_json(data_config());
  return j;
}

DatasetDescription DatasetDescription::from_json(const json& j) {
  DatasetDescription d;
  d.generator = j.value("generator", "");
  d.format = parse_data_format(j.at("format").get<std::string>(), "dataset description");
  d.check = parse_check_mode(j.at("check").get<std::string>(), "dataset description");
  d.key_type = parse_key_type(j.at("key_type").get<std::string>(), "dataset description");
  d.label_dim = j.at("label_dim").get<std::int64_t>();
  d.dense_dim = j.at("dense_dim").get<std::int64_t>();
  for (const auto& s : j.at("sparse")) {
    d.sparse.push_back({s.at("name").get<std::string>(), s.at("slot_num").get<std::int64_t>(),
                        s.at("max_nnz").get<std::int64_t>(),
                        s.at("max_feature_num_per_sample").get<std::int64_t>()});
  }
  d.slot_size_array = j.at("slot_size_array").get<std::vector<std::int64_t>>();
  d.float_label_dense = j.value("float_label_dense", false);
  d.train = split_from(j.at("train"));
  d.eval = split_from(j.at("eval"));
  for (const char* key : {"teacher_auc", "teacher_auc_per_label", "seed", "parameters", "malformed",
                          "positive_rate", "inputs", "lines", "parquet_compression"}) {
    if (j.contains(key)) d.extra[key] = j.at(key);
  }
  return d;
}

void DatasetDescription::write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  if (!out) EMBER_THROW_AS(DataError, "cannot write dataset description '", path, "'");
  out << to_json().dump(2) << '\n';
  if (!out) EMBER_THROW_AS(DataError, "error writing dataset description '", path, "'");
}

DatasetDescription DatasetDescription::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) EMBER_THROW_AS(DataError, "cannot open dataset description '", path, "'");
  try {
    return from_json(json::parse(in));
  } catch (const json::exception& e) {
    EMBER_THROW_AS(DataError, "dataset description '", path, "': ", e.what());
  }
}

void create_output_directory(const std::string& dir, std::string_view tool) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) EMBER_THROW_AS(DataError, tool, ": cannot create '", dir, "': ", ec.message());
}

std::string output_path(const std::string& dir, const std::string& name) {
  return std::filesystem::absolute(std::filesystem::path(dir) / name).lexically_normal().string();
}

}  // namespace ember::data
