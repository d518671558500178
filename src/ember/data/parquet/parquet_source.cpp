#include "ember/data/parquet/parquet_source.hpp"

#include "ember/core/error.hpp"
#include "ember/data/parquet/parquet_reader.hpp"

namespace ember::data::parquet {

std::vector<ParquetSource::File> resolve_parquet_files(const FileList& list) {
  std::map<std::string, std::shared_ptr<const HugeCtrMetadata>> by_folder;
  std::vector<ParquetSource::File> files;
  for (const auto& path : list.files) {
    const std::string meta_path = metadata_path_for(path);
    auto& metadata = by_folder[meta_path];
    if (!metadata) metadata = std::make_shared<HugeCtrMetadata>(read_hugectr_metadata(meta_path));
    const std::int64_t rows = metadata->rows_of(path);
    if (rows < 0) {
      EMBER_THROW_AS(DataError, "Parquet file list '", list.path, "': '", path,
                     "' has no file_stats entry in '", meta_path, "'");
    }
    files.push_back({path, metadata, rows});
  }
  return files;
}

namespace {

class ParquetShardReader final : public ShardReader {
 public:
  ParquetShardReader(const ParquetSource& source, const ShardSpec& spec)
      : source_(source),
        spec_(spec),
        reader_(source.layout(), source.slot_size_array(), spec.counters, source.checks()) {
    // Repeating, worker w cycles through files (w + k W) mod N: does that cycle hold any row?
    const auto n = static_cast<std::int64_t>(source.files().size());
    for (std::int64_t k = 0; k < n; ++k) {
      const auto f = static_cast<std::size_t>((spec.worker + k * spec.num_workers) % n);
      if (source.files()[f].rows > 0) cycle_has_rows_ = true;
    }
    const auto& checks = source.checks();
    may_drop_ = checks && checks->policy == BadSamplePolicy::Drop;
  }

  // Shared reading: the window's rows are decoded, the others passed over, in a batch that will
  // be filled (every file's rows are known from its footer, so this is known before reading). A
  // batch that will end short (the shard's last) is read whole: the collector merges its rows
  // with others' at rows the reader cannot know. So is every batch where a check may drop rows
  // (bad_sample_policy "drop"), as Raw does.
  std::int64_t fill(HostBatch& batch) override {
    const bool shared = spec_.window && batch.empty() && !may_drop_ && fills(batch.capacity());
    reader_.set_window(shared ? spec_.window : std::nullopt);
    const std::int64_t start = batch.size();
    const auto& files = source_.files();
    const auto n = static_cast<std::int64_t>(files.size());
    while (!batch.full()) {
      if (!reader_.is_open() || reader_.done()) {
        // Worker w reads files w, w+W, w+2W, ...; repeating, the sequence wraps modulo N.
        const std::int64_t position = spec_.worker + next_ * spec_.num_workers;
        if (!spec_.repeat && position >= n) break;
        // Repeating over files without rows would spin forever: report the shard exhausted.
        if (files_without_rows_ > n) break;
        const auto& f = files[static_cast<std::size_t>(position % n)];
        reader_.open(f.path, *f.metadata);
        ++next_;
        ++files_without_rows_;
      }
      if (reader_.read(batch) > 0) files_without_rows_ = 0;
    }
    return batch.size() - start;
  }

  void restart() override {
    reader_.close();
    next_ = 0;
    files_without_rows_ = 0;
  }

 private:
  // Whether the shard holds `rows` more rows from here on.
  bool fills(std::int64_t rows) const {
    if (spec_.repeat) return cycle_has_rows_;
    const auto& files = source_.files();
    const auto n = static_cast<std::int64_t>(files.size());
    std::int64_t left = reader_.is_open() ? reader_.rows_left() : 0;
    for (std::int64_t p = spec_.worker + next_ * spec_.num_workers; p < n && left < rows;
         p += spec_.num_workers) {
      left += files[static_cast<std::size_t>(p)].rows;
    }
    return left >= rows;
  }

  const ParquetSource& source_;
  ShardSpec spec_;
  ParquetFileReader reader_;
  std::int64_t next_ = 0;
  std::int64_t files_without_rows_ = 0;
  bool cycle_has_rows_ = false;
  bool may_drop_ = false;
};

}  // namespace

ParquetSource::ParquetSource(const std::string& file_list, const BatchLayout& layout,
                             std::vector<std::int64_t> slot_size_array,
                             std::optional<SampleChecks> checks)
    : list_(read_file_list(file_list)),
      layout_(layout),
      slot_size_array_(std::move(slot_size_array)),
      checks_(std::move(checks)) {
  layout_.validate("Parquet source");
  files_ = resolve_parquet_files(list_);
  // Open every file once now: a missing column or a disagreeing num_rows is reported before
  // training starts.
  ParquetFileReader probe(layout_, slot_size_array_);
  for (const auto& f : files_) {
    probe.open(f.path, *f.metadata);
    probe.close();
    num_samples_ += f.rows;
  }
}

std::string ParquetSource::description() const {
  return cat("Parquet file list '", list_.path, "' (", files_.size(), " files)");
}

std::unique_ptr<ShardReader> ParquetSource::open_shard(const ShardSpec& spec) const {
  EMBER_CHECK(spec.worker >= 0 && spec.worker < spec.num_workers, "ParquetSource: worker ",
              spec.worker, " of ", spec.num_workers);
  return std::make_unique<ParquetShardReader>(*this, spec);
}

}  // namespace ember::data::parquet
