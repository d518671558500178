#include "ember/data/data_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"

namespace ember::data {

using nlohmann::json;

namespace {

// HugeCTR's names, spelled once: the JSON reader takes them exactly, the command line in any case.
constexpr Named<DataFormat> kFormats[] = {
    {"Norm", DataFormat::Norm}, {"Raw", DataFormat::Raw}, {"Parquet", DataFormat::Parquet}};
// "Non" is HugeCTR's Python spelling of None (hugectr.Check_t.Non); to_string gives "None".
constexpr Named<CheckMode> kChecks[] = {
    {"Sum", CheckMode::Sum}, {"None", CheckMode::None}, {"Non", CheckMode::None}};
constexpr Named<BadSamplePolicy> kBadSamplePolicies[] = {{"error", BadSamplePolicy::Error},
                                                         {"drop", BadSamplePolicy::Drop}};
constexpr Named<SparseInputType> kSparseTypes[] = {
    {"DistributedSlot", SparseInputType::DistributedSlot},
    {"LocalizedSlot", SparseInputType::LocalizedSlot}};

template <class T, std::size_t N>
std::string_view name_of(T value, const Named<T> (&names)[N]) {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return "?";
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

// The command line's spelling of a name: HugeCTR's, in any case.
template <class T, std::size_t N>
T parse_name(std::string_view text, const Named<T> (&names)[N], std::string_view what,
             std::string_view kind) {
  std::string expected;
  for (std::size_t i = 0; i < N; ++i) {
    if (same_ignoring_case(text, names[i].name)) return names[i].value;
    expected += cat(i == 0 ? "" : i + 1 == N ? " or " : ", ", names[i].name);
  }
  EMBER_THROW_AS(ConfigError, what, ": unknown ", kind, " \"", text, "\" (expected ", expected,
                 ")");
}

}  // namespace

std::string_view to_string(DataFormat format) {
  return name_of(format, kFormats);
}
std::string_view to_string(CheckMode check) {
  return name_of(check, kChecks);
}
std::string_view to_string(SparseInputType type) {
  return name_of(type, kSparseTypes);
}
std::string_view to_string(BadSamplePolicy policy) {
  return name_of(policy, kBadSamplePolicies);
}

std::vector<std::int64_t> SparseInputConfig::fixed_nnz() const {
  if (!is_fixed_length) return {};
  if (!nnz_per_slot.empty()) return nnz_per_slot;
  return std::vector<std::int64_t>(static_cast<std::size_t>(slot_num), max_nnz);
}

DataFormat parse_data_format(std::string_view text, std::string_view what) {
  return parse_name(text, kFormats, what, "format");
}

CheckMode parse_check_mode(std::string_view text, std::string_view what) {
  return parse_name(text, kChecks, what, "check");
}

std::int64_t DataConfig::total_slots() const {
  std::int64_t total = 0;
  for (const auto& s : sparse)
    total += s.slot_num;
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

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();
constexpr IntRange kCount = IntRange::between(0, kMaxInt);
constexpr IntRange kPositiveCount = IntRange::between(1, kMaxInt);

// Keys HugeCTR accepted for GPU-only features Ember does not have.
constexpr IgnoredKey kIgnoredDataKeys[] = {
    {"async_param", "HugeCTR's asynchronous GPU-direct Raw reader"},
};

SparseInputConfig parse_sparse_input(ConfigReader& r) {
  SparseInputConfig s;
  s.top = r.string("top");
  s.type = r.choice_or("type", SparseInputType::DistributedSlot, kSparseTypes);
  s.slot_num = r.integer("slot_num", kPositiveCount);
  s.is_fixed_length = r.boolean_or("is_fixed_length", false);
  if (r.has("nnz_per_slot")) {
    // A count per slot, or one count for every slot.
    if (r.raw("nnz_per_slot").is_array()) {
      s.nnz_per_slot = r.integers("nnz_per_slot", kCount);
      if (static_cast<std::int64_t>(s.nnz_per_slot.size()) != s.slot_num) {
        r.fail("nnz_per_slot",
               cat("has ", s.nnz_per_slot.size(), " entries but slot_num is ", s.slot_num));
      }
    } else {
      s.nnz_per_slot.assign(static_cast<std::size_t>(s.slot_num),
                            r.integer("nnz_per_slot", kCount));
    }
  }
  std::int64_t nnz_total = 0;
  for (std::int64_t n : s.nnz_per_slot)
    nnz_total += n;
  // Newer HugeCTR configurations give only nnz_per_slot.
  s.max_feature_num_per_sample =
      s.nnz_per_slot.empty() ? r.integer("max_feature_num_per_sample", kCount)
                             : r.integer_or("max_feature_num_per_sample", nnz_total, kCount);
  std::int64_t default_max_nnz = s.max_feature_num_per_sample;
  if (!s.nnz_per_slot.empty()) {
    default_max_nnz = *std::max_element(s.nnz_per_slot.begin(), s.nnz_per_slot.end());
  }
  s.max_nnz = r.integer_or("max_nnz", default_max_nnz, kCount);
  if (s.is_fixed_length) {
    std::int64_t fixed_total = 0;
    for (std::int64_t n : s.fixed_nnz())
      fixed_total += n;
    if (fixed_total > s.max_feature_num_per_sample) {
      r.fail("is_fixed_length",
             cat("is true, so every sample holds ", fixed_total, " keys (",
                 s.nnz_per_slot.empty()
                     ? cat("max_nnz ", s.max_nnz, " in each of ", s.slot_num, " slots")
                     : std::string("the sum of nnz_per_slot"),
                 "), but max_feature_num_per_sample is ", s.max_feature_num_per_sample));
    }
  }
  return s;
}

}  // namespace

DataConfig parse_data_layer(const json& layer, const std::string& where) {
  ConfigReader r(layer, where);
  DataConfig c;
  c.name = r.string_or("name", "data");
  // Only a Data layer is read here ("type" may be left out where the layer is given alone).
  if (const std::string type = r.string_or("type", "Data"); type != "Data") {
    r.invalid("type", "\"Data\"", type);
  }
  c.format = r.choice_or("format", DataFormat::Norm, kFormats);
  c.source = r.string("source");
  c.eval_source = r.string_or("eval_source", "");
  c.check = r.choice("check", kChecks);
  c.num_workers = static_cast<int>(r.integer_or("num_workers", 0, IntRange::between(0, 1024)));
  if (r.has("cache_eval_data")) {
    // false/true (the whole evaluation set), or a number of batches.
    const auto& v = r.raw("cache_eval_data");
    c.cache_eval_data = v.is_boolean() ? (v.get<bool>() ? -1 : 0)
                                       : r.integer("cache_eval_data", IntRange::at_least(0));
  }
  {
    ConfigReader label = r.object("label");
    c.label_top = label.string("top");
    c.label_dim = label.integer("label_dim", kPositiveCount);
  }
  {
    ConfigReader dense = r.object("dense");
    c.dense_top = dense.string("top");
    c.dense_dim = dense.integer("dense_dim", kCount);
  }
  std::set<std::string> tops;
  for (ConfigReader& input : r.objects("sparse")) {
    c.sparse.push_back(parse_sparse_input(input));
    if (!tops.insert(c.sparse.back().top).second) {
      r.fail(cat("two sparse inputs have the top \"", c.sparse.back().top, "\""));
    }
  }
  constexpr IntRange kSamples = IntRange::at_least(0);
  if (c.format == DataFormat::Raw) {
    c.num_samples = r.integer("num_samples", IntRange::at_least(1));
    // An evaluation file needs its sample count.
    c.eval_num_samples = c.eval_source.empty() ? r.integer_or("eval_num_samples", 0, kSamples)
                                               : r.integer("eval_num_samples", kSamples);
  } else {
    c.num_samples = r.integer_or("num_samples", 0, kSamples);
    c.eval_num_samples = r.integer_or("eval_num_samples", 0, kSamples);
  }
  if (r.has("slot_size_array")) {
    c.slot_size_array = r.integers("slot_size_array", IntRange::at_least(0));
    if (static_cast<std::int64_t>(c.slot_size_array.size()) != c.total_slots()) {
      r.fail("slot_size_array",
             cat("has ", c.slot_size_array.size(), " entries but the sparse inputs have ",
                 c.total_slots(), " slots in all"));
    }
  }
  c.float_label_dense = r.boolean_or("float_label_dense", false);
  c.bad_sample_policy =
      r.choice_or("bad_sample_policy", BadSamplePolicy::Error, kBadSamplePolicies);
  r.ignore(kIgnoredDataKeys);
  r.finish();
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
  if (c.cache_eval_data != 0) {
    j["cache_eval_data"] = c.cache_eval_data < 0 ? json(true) : json(c.cache_eval_data);
  }
  if (c.bad_sample_policy != BadSamplePolicy::Error) {
    j["bad_sample_policy"] = std::string(to_string(c.bad_sample_policy));
  }
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
    if (!s.nnz_per_slot.empty()) js["nnz_per_slot"] = s.nnz_per_slot;
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
