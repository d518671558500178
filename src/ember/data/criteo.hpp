// `ember convert criteo`: raw Criteo click logs (label, 13 integer counts, 26 hex categoricals,
// tab-separated) to Norm, Raw or Parquet.
//
// Dense x -> log(max(x, 0) + 1), empty -> 0 (Raw stores max(x, 0) as int32 and the reader
// applies log(v + 1), HugeCTR's convention). Categoricals -> per-slot ids: either a vocabulary
// (two passes: values seen at least min_frequency times in the training lines get ids 1..V by
// decreasing frequency; rare, unseen and empty values share id 0) or hash buckets (id 1 + hash
// mod (N - 1), empty -> 0). Norm keys are slot_offset + id, so slots occupy disjoint key ranges;
// Raw and Parquet store ids and the reader adds the offsets from slot_size_array. Malformed lines
// are skipped, counted and reported with their file and line number (the first few), never
// silently.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/dataset_description.hpp"
#include "ember/data/parquet/compression.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"

namespace ember::data {

inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoCategorical = 26;

enum class CategoricalEncoding { Vocabulary, Hash };

struct CriteoConvertOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  DataFormat format = DataFormat::Norm;
  CheckMode check = CheckMode::Sum;
  DType key_type = DType::U32;
  parquet::Codec compression = parquet::default_write_codec();        // Parquet pages
  parquet::PhysicalType parquet_keys = parquet::PhysicalType::Int64;  // or Int32
  CategoricalEncoding encoding = CategoricalEncoding::Vocabulary;
  std::int64_t min_frequency = 2;                      // Vocabulary
  std::vector<std::int64_t> hash_buckets = {1000000};  // Hash: one for all slots, or 26
  // The last fraction of the lines (over all inputs, in order) becomes the evaluation split.
  double eval_fraction = 0.0;
  std::int64_t samples_per_file = 1000000;  // Norm and Parquet output files
  bool progress = true;
  std::size_t report_malformed = 10;  // malformed lines kept with their reason

  void validate() const;
};

// One parsed line.
struct CriteoRecord {
  int label = 0;
  std::array<std::int64_t, kCriteoDense> dense{};  // as written (0 when empty)
  std::array<std::uint32_t, kCriteoCategorical> categorical{};
  std::array<bool, kCriteoCategorical> present{};  // false for an empty categorical
};

// Parses one line (without its newline; a trailing '\r' is ignored). On failure returns false
// and says why in `reason` (e.g. "expected 40 tab-separated fields, found 39").
bool parse_criteo_line(std::string_view line, CriteoRecord& record, std::string& reason);

// log(max(x, 0) + 1) as float.
float criteo_dense_transform(std::int64_t x);

struct MalformedLine {
  std::string file;
  std::int64_t line = 0;  // 1-based
  std::string reason;
};

struct CriteoConvertResult {
  DatasetDescription description;
  std::int64_t lines = 0;
  std::int64_t samples = 0;
  std::int64_t malformed = 0;
  std::vector<MalformedLine> first_malformed;
};

// The text of a pass's progress line, e.g. "convert criteo: pass 1/2 (vocabulary)  42.0% 1.23M
// lines 456.0k lines/s 12.30MB/s ETA 0:07" (`done` and `total` in bytes; total 0 when unknown).
std::string conversion_progress_text(const std::string& label, std::uint64_t done,
                                     std::uint64_t total, std::int64_t lines, double seconds);

// Converts; writes out_dir/dataset.json too.
CriteoConvertResult convert_criteo(const CriteoConvertOptions& options);

}  // namespace ember::data
