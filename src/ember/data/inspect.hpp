// `ember inspect`: a dataset as JSON lines. First the header as one JSON object, then one object
// per sample: {"label":[...],"dense":[...],"slots":[[k,...],...]} (Raw keys with the slot offsets
// applied). Samples dropped by a failed checksum are skipped and counted.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/host_batch.hpp"

namespace ember::data {

struct InspectOptions {
  // A Norm data file or file list, a Parquet file or file list (detected by their magic), or a
  // Raw file.
  std::string path;
  std::int64_t limit = -1;      // samples to print; -1: all
  std::int64_t offset = 0;      // samples to skip first
  DType key_type = DType::U32;  // Norm keys
  bool raw = false;
  // Raw only: the shape (Raw files have no header).
  std::int64_t label_dim = 1;
  std::int64_t dense_dim = 0;
  std::int64_t slot_num = 0;
  std::vector<std::int64_t> slot_size_array;
  bool float_label_dense = false;
};

struct InspectSummary {
  std::int64_t printed = 0;
  std::int64_t dropped = 0;  // checksum mismatches among the samples read
  std::vector<ReadCounters::Drop> first_drops;
};

InspectSummary inspect_dataset(const InspectOptions& options, std::ostream& out);

// Sample `row` of `batch` as one JSON line (no newline).
std::string sample_json_line(const HostBatch& batch, std::int64_t row);

// Appends `v` in the shortest form that reads back as the same float; null when not finite
// (JSON has no NaN or infinity).
void append_json_float(std::string& out, float v);

}  // namespace ember::data
