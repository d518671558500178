#include "ember/data/data_source.hpp"

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/raw_format.hpp"

namespace ember::data {

void ReadCounters::record_drop(const std::string& file, std::int64_t sample_index) {
  const std::int64_t n = dropped.fetch_add(1) + 1;
  std::lock_guard lock(mutex_);
  if (drops_.size() < kKeptDrops) {
    drops_.push_back({file, sample_index});
    EMBER_LOG_WARN("'{}': sample {} dropped: checksum mismatch", file, sample_index);
  } else if (n == static_cast<std::int64_t>(kKeptDrops) + 1) {
    EMBER_LOG_WARN("more samples dropped by checksum mismatches; only the count is kept now");
  }
}

std::vector<ReadCounters::Drop> ReadCounters::first_drops() const {
  std::lock_guard lock(mutex_);
  return drops_;
}

std::shared_ptr<DataSource> make_data_source(const DataConfig& config, DType key_type,
                                             DataSplit split, std::uint64_t seed) {
  const BatchLayout layout = BatchLayout::from_config(config, key_type);
  const bool eval = split == DataSplit::Eval;
  const std::string& path = eval ? config.eval_source : config.source;
  if (path.empty()) {
    EMBER_THROW_AS(ConfigError, config.name, ": no ", eval ? "eval_source" : "source", " to read");
  }
  switch (config.format) {
    case DataFormat::Norm:
      return std::make_shared<NormSource>(path, config.check, layout);
    case DataFormat::Raw: {
      RawOptions raw;
      raw.path = path;
      raw.num_samples = eval ? config.eval_num_samples : config.num_samples;
      raw.float_label_dense = config.float_label_dense;
      raw.slot_size_array = config.slot_size_array;
      raw.shuffle = !eval;
      raw.seed = seed;
      return std::make_shared<RawSource>(raw, layout);
    }
    case DataFormat::Parquet:
      return std::make_shared<parquet::ParquetSource>(path, layout, config.slot_size_array);
  }
  EMBER_THROW_AS(ConfigError, config.name, ": unknown data format");
}

}  // namespace ember::data
