#include "ember/data/norm_diagnosis.hpp"

#include <cstring>

#include "ember/core/error.hpp"
#include "ember/data/norm_format.hpp"

namespace ember::data {

namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::size_t left(const std::byte* p, const std::byte* end) {
  return static_cast<std::size_t>(end - p);
}

bool implausible(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const std::uint32_t exponent = bits & 0x7f800000u;
  const std::uint32_t mantissa = bits & 0x007fffffu;
  return exponent == 0x7f800000u || (exponent == 0 && mantissa != 0);
}

}  // namespace

NormSampleScan scan_norm_sample(const BatchLayout& layout, std::size_t key_size, const std::byte* p,
                                const std::byte* end) {
  NormSampleScan scan;
  const std::byte* const begin = p;
  const auto values = static_cast<std::size_t>(layout.label_dim + layout.dense_dim);
  if (left(p, end) < values * 4) return scan;
  for (std::size_t j = 0; j < values; ++j)
    scan.implausible_values += implausible(load<float>(p + 4 * j)) ? 1 : 0;
  p += values * 4;
  scan.keys.assign(layout.sparse.size(), 0);
  for (std::size_t i = 0; i < layout.sparse.size(); ++i) {
    for (std::int64_t k = 0; k < layout.sparse[i].slot_num; ++k) {
      if (left(p, end) < 4) return scan;
      const auto nnz = load<std::int32_t>(p);
      p += 4;
      if (nnz < 0 || left(p, end) < static_cast<std::size_t>(nnz) * key_size) return scan;
      p += static_cast<std::size_t>(nnz) * key_size;
      scan.keys[i] += nnz;
    }
  }
  scan.complete = true;
  scan.bytes = static_cast<std::size_t>(p - begin);
  return scan;
}

int first_input_over_budget(const BatchLayout& layout, const std::vector<std::int64_t>& keys) {
  for (std::size_t i = 0; i < layout.sparse.size() && i < keys.size(); ++i) {
    if (keys[i] > layout.sparse[i].max_feature_num_per_sample) return static_cast<int>(i);
  }
  return -1;
}

NormFileScan scan_norm_samples(const BatchLayout& layout, CheckMode check, std::size_t key_size,
                               const std::byte* begin, const std::byte* end,
                               std::int64_t max_samples, bool within_budget) {
  NormFileScan out;
  const std::byte* p = begin;
  while (out.samples < max_samples) {
    NormSampleScan s;
    std::size_t step = 0;
    if (check == CheckMode::Sum) {
      if (left(p, end) < kRecordLengthBytes) break;
      const auto length = load<std::int32_t>(p);
      if (length < 0 || left(p, end) < kRecordLengthBytes + static_cast<std::size_t>(length) +
                                           kRecordChecksumBytes) {
        break;
      }
      const std::byte* payload = p + kRecordLengthBytes;
      s = scan_norm_sample(layout, key_size, payload, payload + length);
      if (s.complete && s.bytes != static_cast<std::size_t>(length)) s.complete = false;
      step = kRecordLengthBytes + static_cast<std::size_t>(length) + kRecordChecksumBytes;
    } else {
      s = scan_norm_sample(layout, key_size, p, end);
      step = s.bytes;
    }
    if (!s.complete || (within_budget && first_input_over_budget(layout, s.keys) >= 0)) break;
    out.implausible_values += s.implausible_values;
    p += step;
    ++out.samples;
  }
  out.failed = out.samples < max_samples;
  out.end = static_cast<std::size_t>(p - begin);
  return out;
}

const char* key_type_config_name(std::size_t key_size) {
  return key_size == 8 ? "I64" : "I32";
}

std::string key_width_mismatch(const std::string& path, std::size_t configured_key_size,
                               const std::string& evidence) {
  const std::size_t other = configured_key_size == 8 ? 4 : 8;
  return cat("Norm data file '", path, "' holds ", other * 8,
             "-bit keys, but the configuration reads ", configured_key_size * 8,
             "-bit ones (solver.input_key_type \"", key_type_config_name(configured_key_size),
             "\"): ", evidence, "; set solver.input_key_type to \"", key_type_config_name(other),
             "\"");
}

}  // namespace ember::data
