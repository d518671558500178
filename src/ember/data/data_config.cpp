#include "ember/data/data_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"

namespace ember::data {

using nlohmann::json;

std::string_view to_string(DataFormat format) {
  switch (format) {
    case DataFormat::Norm: return "Norm";
    case DataFormat::Raw: return "Raw";
    case DataFormat::Parquet: return "Parquet";
  }
  return "?";
}

std::string_view to_string(CheckMode check) {
  return check == CheckMode::Sum ? "Sum" : "None";
}

std::string_view to_string(SparseInputType type) {
  return type == SparseInputType::LocalizedSlot ? "LocalizedSlot" : "DistributedSlot";
}

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

DataFormat parse_data_format(std::string_view text, std::string_view what) {
  const std::string l = lower(text);
  if (l == "norm") return DataFormat::Norm;
  if (l == "raw") return DataFormat::Raw;
  if (l == "parquet") return DataFormat::Parquet;
  EMBER_THROW_AS(ConfigError, what, ": unknown format \"", text,
                 "\" (expected Norm, Raw or Parquet)");
}

CheckMode parse_check_mode(std::string_view text, std::string_view what) {
  const std::string l = lower(text);
  if (l == "sum") return CheckMode::Sum;
  if (l == "none") return CheckMode::None;
  EMBER_THROW_AS(ConfigError, what, ": unknown check \"", text, "\" (expected Sum or None)");
}

std::int64_t DataConfig::total_slots() const {
  std::int64_t total = 0;
  for (const auto& s : sparse) total += s.slot_num;
  return total;
}

std::vector<std::int64_t> DataConfig::slot_offsets() const {
  std::vector<std::int64_t> offsets;
  offsets.reserve(slot_size_array.size());
  std::int64_t sum = 0;
  for (std::int64_t size : slot_size_array) {
    offsets.push_back(sum);
    sum += size;
  }
  return offsets;
}

namespace {

// Strict readers for one JSON object: every key read is remembered so that whatever is left
// over can be reported as unknown.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object.is_object()) {
      EMBER_THROW_AS(ConfigError, where_, ": expected a JSON object, got ", object.dump());
    }
  }

  bool has(const char* key) {
    seen_.insert(key);
    return object_.contains(key);
  }

  const json& required(const char* key) {
    seen_.insert(key);
    const auto it = object_.find(key);
    if (it == object_.end()) {
      EMBER_THROW_AS(ConfigError, where_, ": missing required key \"", key, "\"");
    }
    return *it;
  }

  std::string string(const char* key) { return as_string(key, required(key)); }
  std::string string_or(const char* key, std::string fallback) {
    return has(key) ? as_string(key, object_.at(key)) : fallback;
  }

  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max) {
    return as_integer(key, required(key), min, max);
  }
  std::int64_t integer_or(const char* key, std::int64_t fallback, std::int64_t min,
                          std::int64_t max) {
    return has(key) ? as_integer(key, object_.at(key), min, max) : fallback;
  }

  bool boolean_or(const char* key, bool fallback) {
    if (!has(key)) return fallback;
    const json& v = object_.at(key);
    if (v.is_boolean()) return v.get<bool>();
    // HugeCTR read some flags with get<int>; accept 0 and 1 too.
    if (v.is_number_integer() && (v.get<std::int64_t>() == 0 || v.get<std::int64_t>() == 1)) {
      return v.get<std::int64_t>() == 1;
    }
    EMBER_THROW_AS(ConfigError, where_, ": \"", key, "\" must be true or false, got ", v.dump());
  }

  std::vector<std::int64_t> integer_array(const char* key, const json& v, std::int64_t min) {
    if (!v.is_array()) {
      EMBER_THROW_AS(ConfigError, where_, ": \"", key, "\" must be an array of integers, got ",
                     v.dump());
    }
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      out.push_back(as_integer((std::string(key) + "[" + std::to_string(i) + "]").c_str(), v[i],
                               min, std::numeric_limits<std::int64_t>::max()));
    }
    return out;
  }

  // Keys HugeCTR accepted for GPU-only features Ember does not have: accepted, noted once.
  void accept_ignored(const char* key, const char* why) {
    if (has(key)) {
      log_once(std::string("ignored data key ") + key, spdlog::level::info,
               cat(where_, ": ignoring \"", key, "\" (", why, ")"));
    }
  }

  void reject_unknown() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (!seen_.contains(it.key())) {
        EMBER_THROW_AS(ConfigError, where_, ": unknown key \"", it.key(), "\"");
      }
    }
  }

  const std::string& where() const { return where_; }

 private:
  std::string as_string(const char* key, const json& v) const {
    if (!v.is_string()) {
      EMBER_THROW_AS(ConfigError, where_, ": \"", key, "\" must be a string, got ", v.dump());
    }
    return v.get<std::string>();
  }

  std::int64_t as_integer(const char* key, const json& v, std::int64_t min,
                          std::int64_t max) const {
    std::int64_t value = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() &&
          v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        value = std::numeric_limits<std::int64_t>::max();
      } else {
        value = v.get<std::int64_t>();
      }
    } else if (v.is_number_float() && v.get<double>() == static_cast<double>(
                                                             static_cast<std::int64_t>(v.get<double>()))) {
      value = static_cast<std::int64_t>(v.get<double>());
    } else {
      EMBER_THROW_AS(ConfigError, where_, ": \"", key, "\" must be an integer, got ", v.dump());
    }
    if (value < min || value > max) {
      if (max == std::numeric_limits<std::int64_t>::max()) {
        EMBER_THROW_AS(ConfigError, where_, ": \"", key, "\" must be at least ", min, ", got ",
                       value);
      }
      EMBER_THROW_AS(ConfigError, where_, ": \"", key, "\" must be in [", min, ", ", max,
                     "], got ", value);
    }
    return value;
  }

  const json& object_;
  std::string where_;
  std::set<std::string, std::less<>> seen_;
};

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();

SparseInputConfig parse_sparse_input(const json& j, const std::string& where) {
  ObjectReader r(j, where);
  SparseInputConfig s;
  s.top = r.string("top");
  const std::string type = r.string_or("type", "DistributedSlot");
  if (type == "DistributedSlot") {
    s.type = SparseInputType::DistributedSlot;
  } else if (type == "LocalizedSlot") {
    s.type = SparseInputType::LocalizedSlot;
  } else {
    EMBER_THROW_AS(ConfigError, where, ": unknown sparse input type \"", type,
                   "\" (expected DistributedSlot or LocalizedSlot)");
  }
  s.slot_num = r.integer("slot_num", 1, kMaxInt);
  s.is_fixed_length = r.boolean_or("is_fixed_length", false);
  if (r.has("nnz_per_slot")) {
    const json& v = j.at("nnz_per_slot");
    if (v.is_array()) {
      s.nnz_per_slot = r.integer_array("nnz_per_slot", v, 0);
      if (static_cast<std::int64_t>(s.nnz_per_slot.size()) != s.slot_num) {
        EMBER_THROW_AS(ConfigError, where, ": \"nnz_per_slot\" has ", s.nnz_per_slot.size(),
                       " entries but slot_num is ", s.slot_num);
      }
    } else {
      const std::int64_t n = r.integer("nnz_per_slot", 0, kMaxInt);
      s.nnz_per_slot.assign(static_cast<std::size_t>(s.slot_num), n);
    }
  }
  std::int64_t nnz_total = 0;
  for (std::int64_t n : s.nnz_per_slot) nnz_total += n;
  if (r.has("max_feature_num_per_sample")) {
    s.max_feature_num_per_sample = r.integer("max_feature_num_per_sample", 0, kMaxInt);
  } else if (!s.nnz_per_slot.empty()) {
    s.max_feature_num_per_sample = nnz_total;  // newer HugeCTR configs give only nnz_per_slot
  } else {
    r.required("max_feature_num_per_sample");  // throws naming the key
  }
  std::int64_t default_max_nnz = s.max_feature_num_per_sample;
  if (!s.nnz_per_slot.empty()) {
    default_max_nnz = *std::max_element(s.nnz_per_slot.begin(), s.nnz_per_slot.end());
  }
  s.max_nnz = r.integer_or("max_nnz", default_max_nnz, 0, kMaxInt);
  r.reject_unknown();
  return s;
}

}  // namespace

DataConfig parse_data_layer(const json& layer, const std::string& where) {
  ObjectReader r(layer, where);
  DataConfig c;
  c.name = r.string_or("name", "data");
  if (r.has("type")) {
    const std::string type = r.string("type");
    if (type != "Data") {
      EMBER_THROW_AS(ConfigError, where, ": expected a layer of type \"Data\", got \"", type,
                     "\"");
    }
  }
  c.format = parse_data_format(r.string_or("format", "Norm"), where + " \"format\"");
  c.source = r.string("source");
  c.eval_source = r.string_or("eval_source", "");
  c.check = parse_check_mode(r.string("check"), where + " \"check\"");
  c.num_workers = static_cast<int>(r.integer_or("num_workers", 0, 0, 1024));
  if (r.has("cache_eval_data")) {
    const json& v = layer.at("cache_eval_data");
    if (v.is_boolean()) {
      c.cache_eval_data = v.get<bool>() ? -1 : 0;
    } else {
      c.cache_eval_data = r.integer("cache_eval_data", 0, std::numeric_limits<std::int64_t>::max());
    }
  }
  {
    ObjectReader label(r.required("label"), where + " \"label\"");
    c.label_top = label.string("top");
    c.label_dim = label.integer("label_dim", 1, kMaxInt);
    label.reject_unknown();
  }
  {
    ObjectReader dense(r.required("dense"), where + " \"dense\"");
    c.dense_top = dense.string("top");
    c.dense_dim = dense.integer("dense_dim", 0, kMaxInt);
    dense.reject_unknown();
  }
  const json& sparse = r.required("sparse");
  if (!sparse.is_array()) {
    EMBER_THROW_AS(ConfigError, where, ": \"sparse\" must be an array of sparse inputs, got ",
                   sparse.dump());
  }
  std::set<std::string> tops;
  for (std::size_t i = 0; i < sparse.size(); ++i) {
    c.sparse.push_back(parse_sparse_input(sparse[i], cat(where, " \"sparse\"[", i, "]")));
    if (!tops.insert(c.sparse.back().top).second) {
      EMBER_THROW_AS(ConfigError, where, ": two sparse inputs have the top \"",
                     c.sparse.back().top, "\"");
    }
  }
  if (c.format == DataFormat::Raw) {
    c.num_samples = r.integer("num_samples", 1, std::numeric_limits<std::int64_t>::max());
    c.eval_num_samples =
        r.integer_or("eval_num_samples", 0, 0, std::numeric_limits<std::int64_t>::max());
    if (!c.eval_source.empty() && c.eval_num_samples == 0) {
      r.required("eval_num_samples");  // throws naming the key
    }
  } else {
    c.num_samples = r.integer_or("num_samples", 0, 0, std::numeric_limits<std::int64_t>::max());
    c.eval_num_samples =
        r.integer_or("eval_num_samples", 0, 0, std::numeric_limits<std::int64_t>::max());
  }
  if (r.has("slot_size_array")) {
    c.slot_size_array = r.integer_array("slot_size_array", layer.at("slot_size_array"), 0);
    if (static_cast<std::int64_t>(c.slot_size_array.size()) != c.total_slots()) {
      EMBER_THROW_AS(ConfigError, where, ": \"slot_size_array\" has ", c.slot_size_array.size(),
                     " entries but the sparse inputs have ", c.total_slots(), " slots in all");
    }
  }
  c.float_label_dense = r.boolean_or("float_label_dense", false);
  r.accept_ignored("async_param", "HugeCTR's asynchronous GPU-direct Raw reader");
  r.reject_unknown();
  return c;
}

json to_json(const DataConfig& c) {
  json j;
  j["name"] = c.name;
  j["type"] = "Data";
  j["format"] = std::string(to_string(c.format));
  j["source"] = c.source;
  if (!c.eval_source.empty()) j["eval_source"] = c.eval_source;
  j["check"] = std::string(to_string(c.check));
  if (c.num_workers > 0) j["num_workers"] = c.num_workers;
  j["label"] = {{"top", c.label_top}, {"label_dim", c.label_dim}};
  j["dense"] = {{"top", c.dense_top}, {"dense_dim", c.dense_dim}};
  json sparse = json::array();
  for (const auto& s : c.sparse) {
    json js;
    js["top"] = s.top;
    js["type"] = std::string(to_string(s.type));
    js["max_feature_num_per_sample"] = s.max_feature_num_per_sample;
    js["max_nnz"] = s.max_nnz;
    js["slot_num"] = s.slot_num;
    if (s.is_fixed_length) js["is_fixed_length"] = true;
    sparse.push_back(js);
  }
  j["sparse"] = sparse;
  if (c.format == DataFormat::Raw) {
    j["num_samples"] = c.num_samples;
    j["eval_num_samples"] = c.eval_num_samples;
    j["float_label_dense"] = c.float_label_dense;
  }
  if (!c.slot_size_array.empty()) j["slot_size_array"] = c.slot_size_array;
  return j;
}

}  // namespace ember::data
