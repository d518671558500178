#include "ember/data/criteo.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <unordered_map>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/progress_line.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/norm_writer.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "ember/data/random_stream.hpp"
#include "ember/data/raw_format.hpp"

namespace ember::data {

namespace fs = std::filesystem;

void CriteoConvertOptions::validate() const {
  const auto fail = [](const auto&... parts) {
    EMBER_THROW_AS(ConfigError, "convert criteo: ", parts...);
  };
  if (inputs.empty()) fail("no input files");
  if (out_dir.empty()) fail("an output directory is required");
  if (key_type != DType::U32 && key_type != DType::I64) fail("key type must be u32 or i64");
  if (min_frequency < 1) fail("--min-frequency must be at least 1, got ", min_frequency);
  if (encoding == CategoricalEncoding::Hash) {
    if (hash_buckets.size() != 1 && hash_buckets.size() != kCriteoCategorical) {
      fail("--hash-buckets takes one size or 26, got ", hash_buckets.size());
    }
    for (auto n : hash_buckets) {
      if (n < 2 || n > std::numeric_limits<std::int32_t>::max()) {
        fail("every hash bucket count must be in [2, 2^31), got ", n);
      }
    }
  }
  if (!(eval_fraction >= 0.0 && eval_fraction < 1.0)) {
    fail("--eval-fraction must be in [0, 1), got ", eval_fraction);
  }
  if (samples_per_file < 1) fail("--samples-per-file must be at least 1, got ", samples_per_file);
}

float criteo_dense_transform(std::int64_t x) {
  return static_cast<float>(std::log(static_cast<double>(std::max<std::int64_t>(x, 0)) + 1.0));
}

bool parse_criteo_line(std::string_view line, CriteoRecord& r, std::string& reason) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  constexpr int kFields = 1 + kCriteoDense + kCriteoCategorical;
  const std::size_t tabs = static_cast<std::size_t>(std::count(line.begin(), line.end(), '\t'));
  if (tabs != kFields - 1) {
    reason =
        cat("expected ", kFields, " tab-separated fields, found ", line.empty() ? 0 : tabs + 1);
    return false;
  }
  std::size_t at = 0;
  const auto next_field = [&] {
    const std::size_t end = std::min(line.find('\t', at), line.size());
    std::string_view f = line.substr(at, end - at);
    at = end + 1;
    return f;
  };
  const std::string_view label = next_field();
  if (label == "0" || label == "1") {
    r.label = label[0] - '0';
  } else {
    reason = cat("label '", label, "' is not 0 or 1");
    return false;
  }
  for (int j = 0; j < kCriteoDense; ++j) {
    const std::string_view f = next_field();
    if (f.empty()) {
      r.dense[static_cast<std::size_t>(j)] = 0;
      continue;
    }
    std::int64_t v = 0;
    const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (ec != std::errc() || p != f.data() + f.size()) {
      reason = cat("I", j + 1, " '", f, "' is not an integer");
      return false;
    }
    r.dense[static_cast<std::size_t>(j)] = v;
  }
  for (int j = 0; j < kCriteoCategorical; ++j) {
    const std::string_view f = next_field();
    const auto sj = static_cast<std::size_t>(j);
    if (f.empty()) {
      r.present[sj] = false;
      r.categorical[sj] = 0;
      continue;
    }
    std::uint32_t v = 0;
    const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v, 16);
    if (f.size() > 8 || ec != std::errc() || p != f.data() + f.size()) {
      reason = cat("C", j + 1, " '", f, "' is not a 32-bit hex value");
      return false;
    }
    r.present[sj] = true;
    r.categorical[sj] = v;
  }
  return true;
}

namespace {

// Reads the inputs line by line in big chunks, calling fn(file, line_number (1-based),
// global_line_index, line, bytes_done).
class LineScanner {
 public:
  explicit LineScanner(const std::vector<std::string>& inputs) : inputs_(inputs) {
    for (const auto& f : inputs) {
      std::error_code ec;
      const auto size = fs::file_size(f, ec);
      if (ec) EMBER_THROW_AS(DataError, "convert criteo: cannot read '", f, "': ", ec.message());
      total_bytes_ += size;
    }
  }
  std::uint64_t total_bytes() const { return total_bytes_; }

  template <class Fn>
  void scan(Fn&& fn) const {
    std::vector<char> buffer(std::size_t{1} << 22);
    std::uint64_t done_before = 0;
    std::int64_t global = 0;
    for (const auto& file : inputs_) {
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        EMBER_THROW_AS(DataError, "convert criteo: cannot open '", file,
                       "': ", std::strerror(errno));
      struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
      } closer{fd};
      (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      std::string carry;
      std::int64_t line_number = 0;
      std::uint64_t done = 0;
      for (;;) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
          EMBER_THROW_AS(DataError, "convert criteo: error reading '", file,
                         "': ", std::strerror(errno));
        if (n == 0) break;
        done += static_cast<std::uint64_t>(n);
        std::size_t start = 0;
        const std::size_t size = static_cast<std::size_t>(n);
        while (start < size) {
          const void* nl = std::memchr(buffer.data() + start, '\n', size - start);
          if (nl == nullptr) {
            carry.append(buffer.data() + start, size - start);
            break;
          }
          const std::size_t end =
              static_cast<std::size_t>(static_cast<const char*>(nl) - buffer.data());
          std::string_view line(buffer.data() + start, end - start);
          if (!carry.empty()) {
            carry.append(line);
            line = carry;
          }
          fn(file, ++line_number, global++, line, done_before + done);
          carry.clear();
          start = end + 1;
        }
      }
      if (!carry.empty())
        fn(file, ++line_number, global++, std::string_view(carry), done_before + done);
      done_before += done;
    }
  }

  std::int64_t count_lines() const {
    std::int64_t n = 0;
    scan([&](const std::string&, std::int64_t, std::int64_t, std::string_view, std::uint64_t) {
      ++n;
    });
    return n;
  }

 private:
  const std::vector<std::string>& inputs_;
  std::uint64_t total_bytes_ = 0;
};

// A record's dense features as Norm and Parquet store them (criteo_dense_transform).
std::array<float, kCriteoDense> transformed_dense(const CriteoRecord& r) {
  std::array<float, kCriteoDense> dense{};
  for (std::size_t j = 0; j < dense.size(); ++j)
    dense[j] = criteo_dense_transform(r.dense[j]);
  return dense;
}

// Every Criteo slot holds one key.
constexpr std::array<std::int32_t, kCriteoCategorical> kOneKeyPerSlot = [] {
  std::array<std::int32_t, kCriteoCategorical> a{};
  a.fill(1);
  return a;
}();

// Norm or Raw output of one split, rolling Norm files every samples_per_file samples.
class SplitWriter {
 public:
  SplitWriter(const CriteoConvertOptions& o, std::string stem, std::vector<std::int64_t> offsets)
      : o_(o), stem_(std::move(stem)), offsets_(std::move(offsets)) {}

  void write(const CriteoRecord& r, const std::array<std::int32_t, kCriteoCategorical>& ids) {
    if (o_.format == DataFormat::Raw) {
      if (!raw_) {
        path_ = output_path(o_.out_dir, stem_ + ".bin");
        files_.push_back(path_);
        raw_ = std::make_unique<RawWriter>(path_, 1, kCriteoDense, kCriteoCategorical, false);
      }
      const std::int32_t label = r.label;
      std::array<std::int32_t, kCriteoDense> dense{};
      for (int j = 0; j < kCriteoDense; ++j) {
        dense[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(std::clamp<std::int64_t>(
            r.dense[static_cast<std::size_t>(j)], 0, std::numeric_limits<std::int32_t>::max()));
      }
      raw_->write(std::span<const std::int32_t>(&label, 1), std::span<const std::int32_t>(dense),
                  std::span<const std::int32_t>(ids));
    } else if (o_.format == DataFormat::Parquet) {
      write_parquet(r, ids);
    } else {
      if (!norm_ || norm_->records() >= o_.samples_per_file) {
        if (norm_) norm_->close();
        const std::string path =
            output_path(o_.out_dir, stem_ + "_" + std::to_string(files_.size()) + ".data");
        files_.push_back(path);
        norm_ = std::make_unique<NormWriter>(
            path, NormWriterOptions{o_.check, o_.key_type, 1, kCriteoDense, kCriteoCategorical});
      }
      const float label = static_cast<float>(r.label);
      const auto dense = transformed_dense(r);
      const auto& ones = kOneKeyPerSlot;
      if (o_.key_type == DType::U32) {
        std::array<std::uint32_t, kCriteoCategorical> keys{};
        for (std::size_t s = 0; s < keys.size(); ++s) {
          keys[s] = static_cast<std::uint32_t>(offsets_[s] + ids[s]);
        }
        norm_->write<std::uint32_t>(std::span<const float>(&label, 1), dense, ones, keys);
      } else {
        std::array<std::int64_t, kCriteoCategorical> keys{};
        for (std::size_t s = 0; s < keys.size(); ++s)
          keys[s] = offsets_[s] + ids[s];
        norm_->write<std::int64_t>(std::span<const float>(&label, 1), dense, ones, keys);
      }
    }
    ++samples_;
  }

  void close() {
    if (norm_) norm_->close();
    if (raw_) raw_->close();
    if (parquet_) {
      parquet_->close();
      written_.push_back({parquet_->path(), parquet_->rows()});
      parquet_.reset();
    }
    if (o_.format == DataFormat::Parquet && !written_.empty()) {
      parquet::write_parquet_layout(folder().string(), list_path(), written_, parquet_options());
    }
  }
  // Parquet: the split's folder and its HugeCTR file list.
  std::string list_path() const { return (folder() / "_file_list.txt").string(); }
  const std::vector<std::string>& files() const { return files_; }
  std::int64_t samples() const { return samples_; }

 private:
  fs::path folder() const { return fs::absolute(fs::path(o_.out_dir) / stem_).lexically_normal(); }

  parquet::ParquetWriterOptions parquet_options() const {
    auto options =
        parquet::ParquetWriterOptions::with_default_names(1, kCriteoDense, kCriteoCategorical);
    options.codec = o_.compression;
    options.key_type = o_.parquet_keys;
    return options;
  }

  // Parquet stores the ids; the Data layer's slot_size_array gives the offsets.
  void write_parquet(const CriteoRecord& r,
                     const std::array<std::int32_t, kCriteoCategorical>& ids) {
    if (!parquet_ || parquet_->rows() >= o_.samples_per_file) {
      if (parquet_) {
        parquet_->close();
        written_.push_back({parquet_->path(), parquet_->rows()});
      }
      fs::create_directories(folder());
      const std::string path =
          (folder() / ("part_" + std::to_string(files_.size()) + ".parquet")).string();
      files_.push_back(path);
      parquet_ = std::make_unique<parquet::ParquetWriter>(path, parquet_options());
    }
    const float label = static_cast<float>(r.label);
    const auto dense = transformed_dense(r);
    const auto& ones = kOneKeyPerSlot;
    std::array<std::int64_t, kCriteoCategorical> keys{};
    for (std::size_t s = 0; s < keys.size(); ++s)
      keys[s] = ids[s];
    parquet_->write(std::span<const float>(&label, 1), dense, ones, keys);
  }

  const CriteoConvertOptions& o_;
  std::string stem_;
  std::vector<std::int64_t> offsets_;
  std::unique_ptr<NormWriter> norm_;
  std::unique_ptr<parquet::ParquetWriter> parquet_;
  std::vector<parquet::WrittenFile> written_;
  std::unique_ptr<RawWriter> raw_;
  std::string path_;
  std::vector<std::string> files_;
  std::int64_t samples_ = 0;
};

}  // namespace

std::string conversion_progress_text(const std::string& label, std::uint64_t done,
                                     std::uint64_t total, std::int64_t lines, double seconds) {
  std::string text = label;
  if (total > 0) {
    char percent[16];
    std::snprintf(percent, sizeof percent, " %5.1f%%",
                  100.0 * static_cast<double>(done) / static_cast<double>(total));
    text += percent;
  }
  text.append(" ").append(format_count(static_cast<double>(lines))).append(" lines");
  if (seconds > 0) {
    text.append(" ").append(format_count(static_cast<double>(lines) / seconds)).append(" lines/s");
    text.append(" ").append(format_count(static_cast<double>(done) / seconds)).append("B/s");
    if (total > 0 && done > 0 && done < total) {
      const double eta = seconds * static_cast<double>(total - done) / static_cast<double>(done);
      text.append(" ETA ").append(format_clock(eta));
    }
  }
  return text;
}

namespace {

// The progress of one pass over the inputs: on a terminal a line rewritten in place, otherwise a
// plain line every 10 seconds; nothing for a pass that ends within a second.
class PassProgress {
 public:
  PassProgress(std::string label, std::uint64_t total_bytes, bool enabled)
      : label_(std::move(label)), total_(total_bytes), line_(line_options(enabled)) {}

  // Called for every line; draws only now and then.
  void update(std::uint64_t done, std::int64_t lines) {
    done_ = done;
    lines_ = lines;
    if ((lines & 0x3fff) != 0 || !line_.due()) return;
    line_.show(conversion_progress_text(label_, done, total_, lines, line_.elapsed_seconds()));
  }

  void finish() {
    line_.finish(conversion_progress_text(label_, total_ > 0 ? total_ : done_, total_, lines_,
                                          line_.elapsed_seconds()));
  }

 private:
  static ProgressLine::Options line_options(bool enabled) {
    ProgressLine::Options o;
    o.enabled = enabled;
    o.plain_every = std::chrono::seconds(10);
    o.quiet_for = std::chrono::seconds(1);
    return o;
  }

  std::string label_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  std::int64_t lines_ = 0;
  ProgressLine line_;
};

// The first line (over all inputs, in order) of the evaluation split: the last eval_fraction.
std::int64_t eval_start_line(const LineScanner& scanner, double eval_fraction) {
  if (eval_fraction <= 0) return std::numeric_limits<std::int64_t>::max();
  const std::int64_t lines = scanner.count_lines();
  return lines -
         static_cast<std::int64_t>(std::llround(static_cast<double>(lines) * eval_fraction));
}

// How each slot's categorical values become ids: a vocabulary or hash buckets.
struct SlotIds {
  bool vocabulary = true;
  std::vector<std::unordered_map<std::uint32_t, std::int32_t>> ids;  // vocabulary, per slot
  std::vector<std::int64_t> sizes;                                   // ids per slot

  std::int32_t id(const CriteoRecord& r, std::size_t slot) const {
    if (!r.present[slot]) return 0;
    if (vocabulary) {
      const auto it = ids[slot].find(r.categorical[slot]);
      return it == ids[slot].end() ? 0 : it->second;
    }
    const auto buckets = static_cast<std::uint64_t>(sizes[slot]);
    return static_cast<std::int32_t>(1 + hash_words(0x63726974656full, slot, r.categorical[slot]) %
                                             (buckets - 1));
  }
};

// Values seen at least `min_frequency` times get ids 1..V by decreasing count (then value).
std::unordered_map<std::uint32_t, std::int32_t> ids_by_frequency(
    const std::unordered_map<std::uint32_t, std::int64_t>& counts, std::int64_t min_frequency,
    std::size_t slot) {
  std::vector<std::pair<std::int64_t, std::uint32_t>> kept;  // (count, value)
  for (const auto& [value, n] : counts) {
    if (n >= min_frequency) kept.emplace_back(n, value);
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (kept.size() + 1 > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    EMBER_THROW_AS(DataError, "convert criteo: slot C", slot + 1, " has ", kept.size(),
                   " values above the frequency threshold, more than int32 ids hold");
  }
  std::unordered_map<std::uint32_t, std::int32_t> ids;
  ids.reserve(kept.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    ids.emplace(kept[i].second, static_cast<std::int32_t>(i + 1));
  }
  return ids;
}

// Pass 1 of the vocabulary encoding: value frequencies per slot over the training lines.
SlotIds count_vocabulary(const CriteoConvertOptions& o, const LineScanner& scanner,
                         std::int64_t eval_start) {
  std::vector<std::unordered_map<std::uint32_t, std::int64_t>> counts(kCriteoCategorical);
  PassProgress progress("convert criteo: pass 1/2 (vocabulary)", scanner.total_bytes(), o.progress);
  CriteoRecord r;
  std::string reason;
  std::int64_t seen = 0;
  scanner.scan([&](const std::string&, std::int64_t, std::int64_t global, std::string_view line,
                   std::uint64_t done) {
    progress.update(done, ++seen);
    if (global >= eval_start || !parse_criteo_line(line, r, reason)) return;
    for (std::size_t s = 0; s < kCriteoCategorical; ++s) {
      if (r.present[s]) ++counts[s][r.categorical[s]];
    }
  });
  progress.finish();
  SlotIds slots;
  for (std::size_t s = 0; s < kCriteoCategorical; ++s) {
    slots.ids.push_back(ids_by_frequency(counts[s], o.min_frequency, s));
    slots.sizes.push_back(static_cast<std::int64_t>(slots.ids[s].size()) + 1);  // id 0: shared
  }
  return slots;
}

SlotIds hash_buckets(const CriteoConvertOptions& o) {
  SlotIds slots;
  slots.vocabulary = false;
  for (std::size_t s = 0; s < kCriteoCategorical; ++s) {
    slots.sizes.push_back(o.hash_buckets.size() == 1 ? o.hash_buckets[0] : o.hash_buckets[s]);
  }
  return slots;
}

// Norm keys are slot_offset + id: the prefix sums of the slot sizes, which the key type must hold.
std::vector<std::int64_t> slot_offsets(const std::vector<std::int64_t>& sizes, DType key_type) {
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
  for (auto size : sizes) {
    offsets.push_back(total);
    total += size;
  }
  if (key_type == DType::U32 &&
      total > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) + 1) {
    EMBER_THROW_AS(ConfigError, "convert criteo: the slots need ", total,
                   " keys in all, more than u32 (I32) keys hold; use --key-type i64");
  }
  return offsets;
}

// The last pass: every line parsed, its categoricals mapped to ids, written to its split.
void write_splits(const CriteoConvertOptions& o, const LineScanner& scanner,
                  std::int64_t eval_start, const SlotIds& slots, SplitWriter& train,
                  SplitWriter& eval, CriteoConvertResult& result) {
  const int passes = slots.vocabulary ? 2 : 1;
  PassProgress progress(cat("convert criteo: pass ", passes, "/", passes, " (writing)"),
                        scanner.total_bytes(), o.progress);
  CriteoRecord r;
  std::string reason;
  std::array<std::int32_t, kCriteoCategorical> ids{};
  scanner.scan([&](const std::string& file, std::int64_t line_number, std::int64_t global,
                   std::string_view line, std::uint64_t done) {
    progress.update(done, ++result.lines);
    if (!parse_criteo_line(line, r, reason)) {
      ++result.malformed;
      if (result.first_malformed.size() < o.report_malformed) {
        result.first_malformed.push_back({file, line_number, reason});
      }
      return;
    }
    for (std::size_t s = 0; s < kCriteoCategorical; ++s)
      ids[s] = slots.id(r, s);
    (global >= eval_start ? eval : train).write(r, ids);
    ++result.samples;
  });
  progress.finish();
  train.close();
  eval.close();
}

DatasetDescription describe(const CriteoConvertOptions& o, const CriteoConvertResult& result,
                            const SlotIds& slots, const SplitWriter& train,
                            const SplitWriter& eval) {
  DatasetDescription d;
  d.generator = "ember convert criteo";
  d.format = o.format;
  d.check = o.format == DataFormat::Norm ? o.check : CheckMode::None;
  d.key_type = o.key_type;
  d.label_dim = 1;
  d.dense_dim = kCriteoDense;
  d.sparse.push_back({"data1", kCriteoCategorical, 1, kCriteoCategorical});
  d.slot_size_array = slots.sizes;
  d.float_label_dense = false;
  d.train.files = train.files();
  d.train.samples = train.samples();
  d.eval.files = eval.files();
  d.eval.samples = eval.samples();
  if (o.format == DataFormat::Parquet) {
    if (!d.train.files.empty()) d.train.file_list = train.list_path();
    if (!d.eval.files.empty()) d.eval.file_list = eval.list_path();
    d.extra["parquet_compression"] = std::string(parquet::to_string(o.compression));
  }
  if (o.format == DataFormat::Norm) d.write_file_lists(o.out_dir);
  nlohmann::json malformed = {{"count", result.malformed}, {"first", nlohmann::json::array()}};
  for (const auto& m : result.first_malformed) {
    malformed["first"].push_back({{"file", m.file}, {"line", m.line}, {"reason", m.reason}});
  }
  d.extra["malformed"] = malformed;
  d.extra["inputs"] = o.inputs;
  d.extra["lines"] = result.lines;
  d.extra["parameters"] = {{"encoding", slots.vocabulary ? "vocabulary" : "hash"},
                           {"min_frequency", o.min_frequency},
                           {"hash_buckets", o.hash_buckets},
                           {"eval_fraction", o.eval_fraction},
                           {"dense_transform", "log(max(x, 0) + 1), empty -> 0"},
                           {"shared_id", "0: empty, rare and unseen values of each slot"}};
  return d;
}

}  // namespace

CriteoConvertResult convert_criteo(const CriteoConvertOptions& o) {
  o.validate();
  create_output_directory(o.out_dir, "convert criteo");
  const LineScanner scanner(o.inputs);
  const std::int64_t eval_start = eval_start_line(scanner, o.eval_fraction);
  const SlotIds slots = o.encoding == CategoricalEncoding::Vocabulary
                            ? count_vocabulary(o, scanner, eval_start)
                            : hash_buckets(o);
  const std::vector<std::int64_t> offsets = slot_offsets(slots.sizes, o.key_type);
  CriteoConvertResult result;
  SplitWriter train(o, "train", offsets), eval(o, "eval", offsets);
  write_splits(o, scanner, eval_start, slots, train, eval, result);
  result.description = describe(o, result, slots, train, eval);
  result.description.write((fs::path(o.out_dir) / "dataset.json").string());
  return result;
}

}  // namespace ember::data
