#include "ember/data/batch_layout.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "ember/core/allocator.hpp"
#include "ember/core/error.hpp"
#include "ember/data/data_config.hpp"

namespace ember::data {

std::int64_t BatchLayout::total_slots() const {
  std::int64_t total = 0;
  for (const auto& s : sparse)
    total += s.slot_num;
  return total;
}

void BatchLayout::validate(std::string_view what) const {
  if (label_dim < 0 || dense_dim < 0) {
    EMBER_THROW_AS(ConfigError, what, ": label_dim ", label_dim, " and dense_dim ", dense_dim,
                   " must not be negative");
  }
  if (key_type != DType::U32 && key_type != DType::I64) {
    EMBER_THROW_AS(ConfigError, what, ": key type must be u32 (I32) or i64 (I64), not ",
                   dtype_name(key_type));
  }
  for (std::size_t i = 0; i < sparse.size(); ++i) {
    const auto& s = sparse[i];
    if (s.slot_num < 0 || s.max_feature_num_per_sample < 0) {
      EMBER_THROW_AS(ConfigError, what, ": sparse input ", i, " (\"", s.name, "\") has slot_num ",
                     s.slot_num, " and max_feature_num_per_sample ", s.max_feature_num_per_sample,
                     "; neither may be negative");
    }
    if (!s.fixed_nnz.empty()) {
      std::int64_t total = 0;
      for (std::int64_t n : s.fixed_nnz)
        total += n;
      if (static_cast<std::int64_t>(s.fixed_nnz.size()) != s.slot_num ||
          total > s.max_feature_num_per_sample) {
        EMBER_THROW_AS(ConfigError, what, ": sparse input ", i, " (\"", s.name,
                       "\") is fixed-length with ", s.fixed_nnz.size(), " slot counts summing to ",
                       total, " keys, but has ", s.slot_num,
                       " slots and max_feature_num_per_sample ", s.max_feature_num_per_sample);
      }
    }
  }
}

BatchLayout BatchLayout::from_config(const DataConfig& config, DType key_type) {
  BatchLayout layout;
  layout.label_dim = config.label_dim;
  layout.dense_dim = config.dense_dim;
  layout.key_type = key_type;
  for (const auto& s : config.sparse) {
    layout.sparse.push_back(
        {s.top, s.slot_num, s.max_feature_num_per_sample, s.max_nnz, s.fixed_nnz()});
  }
  layout.validate(config.name);
  return layout;
}

DType parse_key_type(std::string_view text, std::string_view what) {
  std::string l(text);
  std::transform(l.begin(), l.end(), l.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "i32" || l == "u32" || l == "uint32") return DType::U32;
  if (l == "i64" || l == "int64") return DType::I64;
  EMBER_THROW_AS(ConfigError, what, ": unknown key type \"", text,
                 "\" (expected I32/u32 or I64/i64)");
}

std::string_view key_type_name(DType key_type) {
  return dtype_name(key_type);
}

namespace {
std::size_t align_up(std::size_t n) {
  return (n + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
}
}  // namespace

BatchBufferPlan::BatchBufferPlan(const BatchLayout& layout, std::int64_t label_rows_,
                                 std::int64_t samples_)
    : label_rows(label_rows_), samples(samples_) {
  std::size_t at = 0;
  label = at;
  at = align_up(at + static_cast<std::size_t>(label_rows * layout.label_dim) * sizeof(float));
  dense = at;
  at = align_up(at + static_cast<std::size_t>(label_rows * layout.dense_dim) * sizeof(float));
  for (const auto& s : layout.sparse) {
    row_offsets.push_back(at);
    at = align_up(at + static_cast<std::size_t>(samples * s.slot_num + 1) * sizeof(std::int64_t));
    values.push_back(at);
    value_capacity.push_back(samples * s.max_feature_num_per_sample);
    at = align_up(at + static_cast<std::size_t>(value_capacity.back()) * layout.key_size());
  }
  total_bytes = at;
}

std::int64_t keys_reserved_per_row(const SparseInputLayout& input) {
  if (!input.fixed_nnz.empty()) {
    const std::int64_t first = input.fixed_nnz.front();
    for (const std::int64_t n : input.fixed_nnz)
      if (n != first) return 0;
    return first;
  }
  return input.slot_num <= input.max_feature_num_per_sample ? 1 : 0;
}

}  // namespace ember::data
