// Shared helpers of the data-layer tests: random samples, writing them in each format, and
// reading them back out of batches.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/data/batch.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/data_config.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/dataset_description.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"

namespace ember::data::datatest {

struct Sample {
  std::vector<float> label;
  std::vector<float> dense;
  std::vector<std::vector<std::int64_t>> slots;  // every slot of every input, in order
  friend bool operator==(const Sample&, const Sample&) = default;
  friend bool operator<(const Sample& a, const Sample& b) {
    return std::tie(a.label, a.dense, a.slots) < std::tie(b.label, b.dense, b.slots);
  }
};
std::ostream& operator<<(std::ostream& os, const Sample& s);

struct SampleShape {
  std::int64_t label_dim = 1;
  std::int64_t dense_dim = 3;
  std::vector<std::int64_t> slots_per_input = {4};
  int min_nnz = 0;
  int max_nnz = 3;
  std::int64_t max_key = 1000;  // keys drawn in [0, max_key)
  std::int64_t total_slots() const;
};

// One key in every slot (Raw data, DLRM's inputs): `dense_dim` dense values, the slots of each
// input, keys in [0, max_key).
SampleShape one_hot_shape(std::int64_t dense_dim, std::vector<std::int64_t> slots_per_input,
                          std::int64_t max_key = 1000);

std::vector<Sample> random_samples(std::mt19937_64& rng, std::int64_t n, const SampleShape& shape);

// A layout for `shape` whose key budgets hold any sample random_samples draws.
BatchLayout layout_for(const SampleShape& shape, DType key_type);

// Writes a Norm file / a Raw file (one-hot samples; float or int label/dense).
void write_norm(const std::string& path, const std::vector<Sample>& samples,
                const SampleShape& shape, CheckMode check, DType key_type);
void write_raw(const std::string& path, const std::vector<Sample>& samples,
               const SampleShape& shape, bool float_label_dense);
// `n` random one-hot samples of `shape` in a Raw file at `path` (float label and dense), and the
// options that read them back (no shuffle, no slot offsets).
RawOptions write_raw_dataset(const std::string& path, std::mt19937_64& rng,
                             const SampleShape& shape, std::int64_t n);

// The samples of a host batch / of a pipeline batch (label and dense gathered from every
// device's share; keys from device 0's global CSR, which must equal every other device's).
std::vector<Sample> samples_of(const HostBatch& batch);
std::vector<Sample> samples_of(const Batch& batch);

// Takes `steps` + 1 batches as a trainer that prepares the next batch ahead does: each before it
// drops the one before, so two are held at a time. Fails the test if the pipeline ends first.
void take_two_at_a_time(Pipeline& pipeline, int steps);

// Every sample an open reader has left, read in batches of `batch_rows` (odd sizes cross the
// reader's chunks at other places).
std::vector<Sample> read_remaining(NormFileReader& reader, const BatchLayout& layout,
                                   std::int64_t batch_rows);

// Every sample of a dataset's split, in file order, through the input pipeline (one reader).
std::vector<Sample> read_split(const DatasetDescription& d, DataSplit split, DType key_type);

// Reads every sample of a Norm file through NormFileReader.
std::vector<Sample> read_norm_file(const std::string& path, const SampleShape& shape,
                                   CheckMode check, DType key_type);

}  // namespace ember::data::datatest
