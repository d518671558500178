// Telling a configuration that does not match a Norm file from a damaged file. A Norm file does
// not say how wide its keys are, and a record that the configured layout cannot parse looks
// broken whether the file is damaged, the key type is wrong (solver.input_key_type) or the key
// budget is too small (max_feature_num_per_sample). These scans read a sample's fields with a
// chosen key width and no key budget, so the reader can say which of the three it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/data/batch_layout.hpp"
#include "ember/data/data_config.hpp"

namespace ember::data {

// One sample's fields read from [p, end) with keys of `key_size` bytes and no key budget.
struct NormSampleScan {
  bool complete = false;           // every field fits in the bytes, every nnz >= 0
  std::size_t bytes = 0;           // the sample's size (when complete)
  std::vector<std::int64_t> keys;  // keys per sparse input (when complete)
  // Label or dense values that no writer produces: NaN, infinities and nonzero denormals (the
  // bits of a small integer read as a float: what a key or a count looks like when the fields
  // are misaligned).
  std::int64_t implausible_values = 0;
};
NormSampleScan scan_norm_sample(const BatchLayout& layout, std::size_t key_size, const std::byte* p,
                                const std::byte* end);

// The first sparse input whose keys exceed its max_feature_num_per_sample, or -1.
int first_input_over_budget(const BatchLayout& layout, const std::vector<std::int64_t>& keys);

// Consecutive samples from `begin` (the first sample, after the header) read with keys of
// `key_size` bytes: with check Sum each record's fields must fill its length exactly.
struct NormFileScan {
  std::int64_t samples = 0;  // samples read before stopping
  bool failed = false;       // stopped at a sample that does not parse (not at max_samples)
  std::size_t end = 0;       // offset from `begin` after the last sample read
  std::int64_t implausible_values = 0;
};
// within_budget: a sample over a sparse input's budget also stops the scan (failed).
NormFileScan scan_norm_samples(const BatchLayout& layout, CheckMode check, std::size_t key_size,
                               const std::byte* begin, const std::byte* end,
                               std::int64_t max_samples, bool within_budget);

// The key width `key_size` bytes as HugeCTR's solver.input_key_type names it: "I32"
// (32-bit keys) or "I64".
const char* key_type_config_name(std::size_t key_size);

// The message of a file whose keys have the other width: "Norm data file 'F' holds 64-bit keys,
// but the configuration reads 32-bit ones (solver.input_key_type "I32"): <evidence>; set ...".
std::string key_width_mismatch(const std::string& path, std::size_t configured_key_size,
                               const std::string& evidence);

}  // namespace ember::data
