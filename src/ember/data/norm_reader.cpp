#include "ember/data/norm_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/path_check.hpp"
#include "ember/data/mapped_file.hpp"
#include "ember/data/norm_diagnosis.hpp"

namespace ember::data {

namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string check_name(std::int64_t error_check) {
  if (error_check == 0) return "0 (None)";
  if (error_check == 1) return "1 (Sum)";
  return std::to_string(error_check);
}

// True the first time a path is asked about in this process: the trailing-bytes diagnosis scans
// the whole file, once, not at every epoch.
bool first_time_for(const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard lock(mutex);
  return seen.insert(path).second;
}

}  // namespace

NormFileReader::NormFileReader(const BatchLayout& layout, CheckMode check, ReadCounters* counters,
                               std::optional<SampleChecks> checks)
    : layout_(layout), check_(check), counters_(counters) {
  layout_.validate("Norm reader");
  if (checks) validator_.emplace(std::move(*checks), layout_.label_dim, layout_.dense_dim);
  std::int64_t base = 0;
  std::size_t budget = 0;
  for (const auto& s : layout_.sparse) {
    slot_base_.push_back(base);
    base += s.slot_num;
    budget += static_cast<std::size_t>(s.max_feature_num_per_sample) * layout_.key_size();
  }
  min_sample_bytes_ = layout_.label_dense_bytes() + static_cast<std::size_t>(base) * 4;
  max_sample_bytes_ = min_sample_bytes_ + budget;
}

NormFileReader::~NormFileReader() = default;

void NormFileReader::close() {
  file_.reset();
  data_ = nullptr;
  size_ = pos_ = 0;
}

NormHeader read_norm_header(const std::string& path, CheckMode check) {
  if (const std::string problem = file_problem(path); !problem.empty()) {
    EMBER_THROW_AS(DataError, "Norm data file '", path, "' ", problem);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    EMBER_THROW_AS(DataError, "cannot open Norm data file '", path, "': ", std::strerror(errno));
  std::byte head[kRecordLengthBytes + kNormHeaderBytes + kRecordChecksumBytes];
  std::size_t got = 0;
  while (got < sizeof(head)) {
    const ssize_t n = ::read(fd, head + got, sizeof(head) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  NormHeader h;
  if (check == CheckMode::Sum) {
    if (got < sizeof(head)) {
      EMBER_THROW_AS(DataError, "Norm data file '", path, "' is truncated: ", got,
                     " bytes, shorter than a Sum-mode header record (69 bytes)");
    }
    std::memcpy(&h, head + 4, kNormHeaderBytes);
  } else {
    if (got < kNormHeaderBytes) {
      EMBER_THROW_AS(DataError, "Norm data file '", path, "' is truncated: ", got,
                     " bytes, shorter than the 64-byte header");
    }
    std::memcpy(&h, head, kNormHeaderBytes);
  }
  return h;
}

void NormFileReader::open(const std::string& path) {
  close();
  path_ = path;
  record_ = 0;
  end_checked_ = false;
  bad_ = 0;
  header_ = NormHeader{};
  // Parsing straight from the page cache: no read() copy (which costs as much as the parsing).
  file_ = std::make_unique<MappedFile>(path);
  data_ = file_->data();
  size_ = file_->size();
  file_->advise_sequential();

  const std::int64_t expected_check = error_check_value(check_);
  const std::byte* p = data_;
  CheckMode written = check_;
  const bool recognised = detect_norm_check(p, size_, &written);
  if (recognised && written != check_) {
    EMBER_THROW_AS(DataError, "Norm data file '", path, "': header error_check is ",
                   check_name(error_check_value(written)), " but the configuration says check ",
                   check_name(expected_check));
  }
  if (check_ == CheckMode::Sum) {
    if (size_ < kRecordLengthBytes + kNormHeaderBytes + kRecordChecksumBytes) {
      EMBER_THROW_AS(DataError, "Norm data file '", path, "' is truncated: ", size_,
                     " bytes, shorter than a Sum-mode header record (69 bytes)");
    }
    const auto length = load<std::int32_t>(p);
    if (length != static_cast<std::int32_t>(kNormHeaderBytes)) {
      EMBER_THROW_AS(DataError, "Norm data file '", path, "': the header record has length ",
                     length, ", expected 64 (is the file written with check Sum?)");
    }
    std::memcpy(&header_, p + 4, kNormHeaderBytes);
    const auto stored = load<std::uint8_t>(p + 4 + kNormHeaderBytes);
    const std::uint8_t computed = norm_checksum(p + 4, kNormHeaderBytes);
    if (stored != computed) {
      EMBER_THROW_AS(DataError, "Norm data file '", path, "': header checksum mismatch (stored ",
                     int{stored}, ", computed ", int{computed}, ")");
    }
    pos_ = kRecordLengthBytes + kNormHeaderBytes + kRecordChecksumBytes;
  } else {
    if (size_ < kNormHeaderBytes) {
      EMBER_THROW_AS(DataError, "Norm data file '", path, "' is truncated: ", size_,
                     " bytes, shorter than the 64-byte header");
    }
    std::memcpy(&header_, p, kNormHeaderBytes);
    pos_ = kNormHeaderBytes;
  }
  if (header_.error_check != expected_check) {
    EMBER_THROW_AS(DataError, "Norm data file '", path, "': header error_check is ",
                   check_name(header_.error_check), " but the configuration says check ",
                   check_name(expected_check));
  }
  if (header_.slot_num != layout_.total_slots()) {
    EMBER_THROW_AS(DataError, "Norm data file '", path, "': header slot_num is ", header_.slot_num,
                   " but the configuration has ", layout_.total_slots(),
                   " slots over its sparse inputs");
  }
  if (header_.label_dim < 0 || header_.dense_dim < 0 ||
      header_.label_dim + header_.dense_dim != layout_.label_dim + layout_.dense_dim) {
    EMBER_THROW_AS(DataError, "Norm data file '", path, "': header label_dim + dense_dim is ",
                   header_.label_dim, " + ", header_.dense_dim, " but the configuration has ",
                   layout_.label_dim, " + ", layout_.dense_dim);
  }
  if (header_.label_dim != layout_.label_dim) {
    // HugeCTR checks only the sum and splits by the configuration; do the same, but say so.
    log_once(
        "norm label split " + path, spdlog::level::warn,
        cat("Norm data file '", path, "': header label_dim ", header_.label_dim, " and dense_dim ",
            header_.dense_dim, " differ from the configuration's ", layout_.label_dim, " and ",
            layout_.dense_dim, "; the sum matches, so samples are split as configured"));
  }
  if (header_.number_of_records < 0) {
    EMBER_THROW_AS(DataError, "Norm data file '", path, "': negative number_of_records ",
                   header_.number_of_records);
  }
  data_begin_ = pos_;
  check_key_width_at_open();
}

void NormFileReader::rewind() {
  EMBER_CHECK(is_open(), "NormFileReader::rewind with no file open");
  pos_ = data_begin_;
  record_ = 0;
  end_checked_ = false;
  bad_ = 0;
}

void NormFileReader::check_key_width_at_open() const {
  // The first samples only: enough to tell the widths apart, cheap at every open.
  constexpr std::int64_t kProbeSamples = 32;
  const std::int64_t n = std::min(header_.number_of_records, kProbeSamples);
  if (n == 0) return;
  const std::size_t mine = layout_.key_size(), other = other_key_size();
  const std::byte* begin = data_ + data_begin_;
  const std::byte* end = data_ + size_;
  const NormFileScan as_other = scan_norm_samples(layout_, check_, other, begin, end, n, true);
  if (as_other.failed || as_other.implausible_values > 0) return;  // no better with the other
  const NormFileScan as_mine = scan_norm_samples(layout_, check_, mine, begin, end, n, false);
  if (as_mine.failed) {
    throw DataError(key_width_mismatch(
        path_, mine,
        cat("sample ", as_mine.samples, " does not parse with ", mine * 8,
            "-bit keys, while its first ", n, " samples all parse with ", other * 8, "-bit keys")));
  }
  if (as_mine.implausible_values > 0) {
    throw DataError(key_width_mismatch(
        path_, mine,
        cat("its first ", n, " samples parse with both widths, but with ", mine * 8,
            "-bit keys their label and dense values hold ", as_mine.implausible_values,
            " values no writer produces (NaN, infinities, denormals: keys and counts read as "
            "floats), with ",
            other * 8, "-bit keys none")));
  }
}

void NormFileReader::check_key_width_of_file(const std::string& symptom) const {
  const NormFileScan as_other =
      scan_norm_samples(layout_, check_, other_key_size(), data_ + data_begin_, data_ + size_,
                        header_.number_of_records, true);
  if (!as_other.failed && data_begin_ + as_other.end == size_) {
    throw DataError(
        key_width_mismatch(path_, layout_.key_size(),
                           cat(symptom, " with ", layout_.key_size() * 8, "-bit keys, but its ",
                               header_.number_of_records, " samples fill it exactly with ",
                               other_key_size() * 8, "-bit keys")));
  }
}

void NormFileReader::check_trailing_bytes() const {
  if (pos_ >= size_) return;
  const std::size_t extra = size_ - pos_;
  if (check_ == CheckMode::None) {
    check_key_width_of_file(
        cat("its ", header_.number_of_records, " samples end ", extra, " bytes before its end"));
  }
  if (!first_time_for(path_)) return;
  const NormFileScan more =
      scan_norm_samples(layout_, check_, layout_.key_size(), data_ + pos_, data_ + size_,
                        std::numeric_limits<std::int64_t>::max(), false);
  std::string what = cat(extra, " more bytes");
  if (more.samples > 0) {
    what += cat(" (", more.samples, " more samples",
                more.end < extra ? ", then bytes that do not parse as a sample" : "", ")");
  }
  log_once("norm extra " + path_, spdlog::level::warn,
           cat("Norm data file '", path_, "': its header says number_of_records ",
               header_.number_of_records, " but the file holds ", what,
               " after them; they are ignored (as HugeCTR ignores them; rewrite the header to read "
               "them)"));
}

void NormFileReader::fail_truncated(const char* what) const {
  if (check_ == CheckMode::None) {
    check_key_width_of_file(cat("sample ", record_, " ", what));
  }
  EMBER_THROW_AS(DataError, "Norm data file '", path_, "' is truncated: sample ", record_,
                 " (0-based) ", what, " at byte ", size_, " (end of file); the header claims ",
                 header_.number_of_records, " samples");
}

void NormFileReader::fail_budget(int input, std::int64_t keys, const std::string& found) const {
  const auto& s = layout_.sparse[static_cast<std::size_t>(input)];
  EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_, " ", found,
                 "; the sample is well formed with ", keys, " keys in sparse input ", input, " (\"",
                 s.name, "\"), more than its max_feature_num_per_sample ",
                 s.max_feature_num_per_sample,
                 ": the configuration's key budget is too small for this data (raise "
                 "max_feature_num_per_sample of sparse input ",
                 input, " to at least ", keys, ")");
}

void NormFileReader::fail_nnz(int input, std::int64_t slot_in_input, std::int64_t nnz,
                              std::int64_t keys_so_far, const std::byte* sample) const {
  const auto& s = layout_.sparse[static_cast<std::size_t>(input)];
  const std::int64_t slot = slot_base_[static_cast<std::size_t>(input)] + slot_in_input;
  if (nnz >= 0) {
    // A sample that parses without the budget is well formed: the budget is what is wrong.
    const NormSampleScan whole =
        scan_norm_sample(layout_, layout_.key_size(), sample, sample_limit_);
    const bool framed = check_ == CheckMode::Sum;
    if (whole.complete && (!framed || sample + whole.bytes == sample_limit_)) {
      fail_budget(
          input, whole.keys[static_cast<std::size_t>(input)],
          cat("slot ", slot, " has nnz ", nnz, ", which brings sparse input ", input, " (\"",
              s.name, "\") to ", keys_so_far + nnz, " keys, above its max_feature_num_per_sample ",
              s.max_feature_num_per_sample));
    }
  }
  if (check_ == CheckMode::None) {
    const NormFileScan as_other =
        scan_norm_samples(layout_, check_, other_key_size(), data_ + data_begin_, data_ + size_,
                          std::min(record_ + 1, header_.number_of_records), true);
    if (!as_other.failed) {
      throw DataError(
          key_width_mismatch(path_, layout_.key_size(),
                             cat("sample ", record_, " slot ", slot, " reads nnz ", nnz, " with ",
                                 layout_.key_size() * 8, "-bit keys, while samples 0 to ", record_,
                                 " parse with ", other_key_size() * 8, "-bit keys")));
    }
  }
  if (nnz < 0) {
    EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_, " slot ", slot,
                   " has a negative nnz ", nnz, " (the file is damaged or not in this layout)");
  }
  EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_, " slot ", slot,
                 " has nnz ", nnz, ", which brings sparse input ", input, " (\"", s.name, "\") to ",
                 keys_so_far + nnz, " keys, above its max_feature_num_per_sample ",
                 s.max_feature_num_per_sample,
                 "; the sample does not parse even without that budget, so the file is damaged "
                 "or not in this layout");
}

void NormFileReader::fail_fixed(int input, std::int64_t slot_in_input, std::int64_t nnz) const {
  const auto& s = layout_.sparse[static_cast<std::size_t>(input)];
  const std::int64_t slot = slot_base_[static_cast<std::size_t>(input)] + slot_in_input;
  EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_, " slot ", slot,
                 " has nnz ", nnz, ", but sparse input ", input, " (\"", s.name,
                 "\") is declared is_fixed_length with ",
                 s.fixed_nnz[static_cast<std::size_t>(slot_in_input)],
                 " keys in that slot (its nnz_per_slot, or max_nnz)");
}

void NormFileReader::fail_record(const std::byte* payload, std::int64_t length,
                                 const std::string& why) const {
  // The record's bytes are all in the file here (the caller checked).
  const std::byte* end = payload + length;
  const NormSampleScan mine = scan_norm_sample(layout_, layout_.key_size(), payload, end);
  if (mine.complete && mine.bytes == static_cast<std::size_t>(length)) {
    const int over = first_input_over_budget(layout_, mine.keys);
    if (over >= 0) {
      fail_budget(over, mine.keys[static_cast<std::size_t>(over)],
                  cat("has a record of ", length,
                      " bytes, longer than a sample of this "
                      "configuration can be (",
                      max_sample_bytes_, " bytes with every key budget full)"));
    }
  }
  const NormSampleScan other = scan_norm_sample(layout_, other_key_size(), payload, end);
  if (other.complete && other.bytes == static_cast<std::size_t>(length) &&
      first_input_over_budget(layout_, other.keys) < 0) {
    throw DataError(key_width_mismatch(
        path_, layout_.key_size(),
        cat("sample ", record_, "'s record of ", length, " bytes is filled exactly by ",
            other_key_size() * 8, "-bit keys and not by ", layout_.key_size() * 8, "-bit ones")));
  }
  EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_,
                 " has a broken record: ", why);
}

void NormFileReader::seek(const Position& at) {
  EMBER_CHECK(is_open() && at.byte >= data_begin_ && at.byte <= size_ &&
                  at.record <= header_.number_of_records,
              "NormFileReader::seek to byte ", at.byte, " (sample ", at.record, ") of '", path_,
              "'");
  pos_ = at.byte;
  record_ = at.record;
  dropped_ = at.dropped;
  bad_ = at.bad;
  if (dropped_indices_.size() > static_cast<std::size_t>(dropped_))
    dropped_indices_.resize(static_cast<std::size_t>(dropped_));
}

bool NormFileReader::pass_over(HostBatch& batch, const std::byte* sample) {
  if (validator_ && validator_->policy() == BadSamplePolicy::Drop) {
    const std::int64_t row = batch.size();
    std::memcpy(batch.label() + row * layout_.label_dim, sample,
                static_cast<std::size_t>(layout_.label_dim) * 4);
    std::memcpy(batch.dense() + row * layout_.dense_dim, sample + layout_.label_dim * 4,
                static_cast<std::size_t>(layout_.dense_dim) * 4);
    if (!accept_sample(batch)) return false;
  }
  batch.add_rows_parsed_elsewhere(1);
  ++passed_over_;
  return true;
}

template <class Key>
const std::byte* NormFileReader::frame_sample(const std::byte* p, const std::byte* end) const {
  if (static_cast<std::size_t>(end - p) < min_sample_bytes_) return nullptr;
  p += layout_.label_dense_bytes();
  for (const auto& s : layout_.sparse) {
    const std::int64_t* fixed = s.fixed_nnz.empty() ? nullptr : s.fixed_nnz.data();
    std::int64_t keys = 0;
    for (std::int64_t k = 0; k < s.slot_num; ++k) {
      if (end - p < 4) return nullptr;
      const auto nnz = load<std::int32_t>(p);
      p += 4;
      if (nnz < 0 || nnz > s.max_feature_num_per_sample - keys) return nullptr;
      if (fixed != nullptr && nnz != fixed[k]) return nullptr;
      if (static_cast<std::size_t>(end - p) < static_cast<std::size_t>(nnz) * sizeof(Key))
        return nullptr;
      p += static_cast<std::size_t>(nnz) * sizeof(Key);
      keys += nnz;
    }
  }
  return p;
}

bool NormFileReader::accept_sample(const HostBatch& batch) {
  if (!validator_) return true;
  const std::int64_t row = batch.size();
  const auto problem = validator_->find(batch.label() + row * layout_.label_dim,
                                        batch.dense() + row * layout_.dense_dim);
  if (!problem) [[likely]]
    return true;
  const std::string what = validator_->describe(*problem);
  if (validator_->policy() == BadSamplePolicy::Error) {
    EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_, ": ", what, " ",
                   bad_sample_hint());
  }
  ++bad_;
  ++bad_in_all_;
  if (counters_ != nullptr) counters_->record_bad(path_, record_, what);
  return false;
}

// Parses one sample from [p, end) into row batch.size() of `batch`. Returns the byte after the
// sample, or nullptr when [p, end) ends inside it. Nothing is committed. With Checked false the
// caller guarantees end - p >= max_sample_bytes_: as every slot's key count is checked against
// the key budget before its keys are touched, no sample can run further, so the per-slot bounds
// checks can go (the hot path: most samples sit well inside the buffer).
template <class Key, bool Checked>
const std::byte* NormFileReader::parse_sample(const std::byte* p, const std::byte* end,
                                              HostBatch& batch) {
  const std::int64_t row = batch.size();
  const std::byte* const sample = p;
  if (Checked && static_cast<std::size_t>(end - p) < min_sample_bytes_) return nullptr;
  const auto ld = layout_.label_dim, dd = layout_.dense_dim;
  // Plain loops rather than memcpy: the widths are small and a library call per field costs more.
  float* label = batch.label() + row * ld;
  for (std::int64_t j = 0; j < ld; ++j)
    label[j] = load<float>(p + 4 * j);
  p += ld * 4;
  float* dense = batch.dense() + row * dd;
  for (std::int64_t j = 0; j < dd; ++j)
    dense[j] = load<float>(p + 4 * j);
  p += dd * 4;
  const int inputs = batch.num_inputs();
  for (int i = 0; i < inputs; ++i) {
    const auto& s = layout_.sparse[static_cast<std::size_t>(i)];
    const std::int64_t slots = s.slot_num;
    std::int64_t* off = batch.row_offsets(i) + row * slots;
    Key* values = batch.values_as<Key>(i);
    const std::int64_t first = off[0];
    const std::int64_t limit = first + s.max_feature_num_per_sample;
    const std::int64_t* fixed = s.fixed_nnz.empty() ? nullptr : s.fixed_nnz.data();
    std::int64_t pos = first;
    for (std::int64_t k = 0; k < slots; ++k) {
      if (Checked && end - p < 4) [[unlikely]]
        return nullptr;
      const auto nnz = load<std::int32_t>(p);
      p += 4;
      if (nnz < 0 || nnz > limit - pos) [[unlikely]]
        fail_nnz(i, k, nnz, pos - first, sample);
      if (fixed != nullptr && nnz != fixed[k]) [[unlikely]]
        fail_fixed(i, k, nnz);
      if (Checked && static_cast<std::size_t>(end - p) <
                         static_cast<std::size_t>(nnz) * sizeof(Key)) [[unlikely]] {
        return nullptr;
      }
      for (std::int32_t j = 0; j < nnz; ++j)
        values[pos + j] = load<Key>(p + j * sizeof(Key));
      p += static_cast<std::size_t>(nnz) * sizeof(Key);
      pos += nnz;
      off[k + 1] = pos;
    }
  }
  return p;
}

template <class Key>
std::int64_t NormFileReader::read_typed(HostBatch& batch) {
  const std::int64_t start = batch.size();
  const std::int64_t passed_before = passed_over_;
  std::size_t parsed_bytes = 0;
  const std::byte* const end = data_ + size_;
  const auto parse = [&](const std::byte* p, const std::byte* sample_end) {
    if (static_cast<std::size_t>(end - p) >= max_sample_bytes_) {
      return parse_sample<Key, false>(p, end, batch);
    }
    return parse_sample<Key, true>(p, sample_end, batch);
  };
  while (!batch.full() && record_ < header_.number_of_records) {
    const std::byte* p = data_ + pos_;
    const std::size_t left = size_ - pos_;
    if (check_ == CheckMode::Sum) {
      if (left < kRecordLengthBytes) fail_truncated("has no record length");
      const auto length = load<std::int32_t>(p);
      const std::byte* payload = p + kRecordLengthBytes;
      if (length < static_cast<std::int64_t>(min_sample_bytes_) ||
          static_cast<std::size_t>(length) > max_sample_bytes_) {
        const std::string why =
            cat("length ", length, " bytes, outside what a sample of this configuration can take (",
                min_sample_bytes_, " to ", max_sample_bytes_, ")");
        if (length < 0 ||
            left < kRecordLengthBytes + static_cast<std::size_t>(length) + kRecordChecksumBytes) {
          EMBER_THROW_AS(DataError, "Norm data file '", path_, "': sample ", record_,
                         " has a broken record: ", why);
        }
        fail_record(payload, length, why);
      }
      const std::size_t record_bytes =
          kRecordLengthBytes + static_cast<std::size_t>(length) + kRecordChecksumBytes;
      if (left < record_bytes) fail_truncated("ends past the end of the file");
      sample_limit_ = payload + length;
      const auto stored = load<std::uint8_t>(payload + length);
      if (norm_checksum(payload, static_cast<std::size_t>(length)) != stored) {
        ++dropped_;
        ++dropped_in_all_;
        if (dropped_indices_.size() < ReadCounters::kKeptDrops) dropped_indices_.push_back(record_);
        if (counters_ != nullptr) counters_->record_drop(path_, record_);
      } else if (passes_over(batch)) {
        // The checksum is verified all the same: a drop moves every sample behind it.
        pass_over(batch, payload);
      } else {
        const std::byte* after = parse(payload, payload + length);
        if (after != payload + length) {
          fail_record(payload, length,
                      cat("its fields ",
                          after == nullptr || after > payload + length ? "run past" : "end before",
                          " the record length ", length));
        }
        parsed_bytes += record_bytes;
        if (accept_sample(batch)) batch.set_size(batch.size() + 1);
      }
      pos_ += record_bytes;
    } else {
      sample_limit_ = end;
      const std::byte* after = passes_over(batch) ? frame_sample<Key>(p, end) : nullptr;
      if (after != nullptr) {
        pass_over(batch, p);
      } else {
        after = parse(p, end);
        if (after == nullptr) fail_truncated("ends past the end of the file");
        parsed_bytes += static_cast<std::size_t>(after - p);
        if (accept_sample(batch)) batch.set_size(batch.size() + 1);
      }
      pos_ += static_cast<std::size_t>(after - p);
    }
    ++record_;
  }
  if (record_ >= header_.number_of_records && !end_checked_) {
    end_checked_ = true;
    check_trailing_bytes();
  }
  const std::int64_t added = batch.size() - start;
  if (counters_ != nullptr) {
    const std::int64_t passed = passed_over_ - passed_before;
    counters_->samples.fetch_add(added - passed, std::memory_order_relaxed);
    if (passed > 0) counters_->skipped.fetch_add(passed, std::memory_order_relaxed);
    counters_->bytes.fetch_add(static_cast<std::int64_t>(parsed_bytes), std::memory_order_relaxed);
  }
  return added;
}

std::int64_t NormFileReader::read(HostBatch& batch) {
  EMBER_CHECK(is_open(), "NormFileReader::read with no file open");
  EMBER_CHECK(batch.layout().key_type == layout_.key_type, "NormFileReader: batch of ",
              dtype_name(batch.layout().key_type), " keys for a reader of ",
              dtype_name(layout_.key_type), " keys");
  if (layout_.key_type == DType::U32) return read_typed<std::uint32_t>(batch);
  return read_typed<std::int64_t>(batch);
}

// ---- NormSource ------------------------------------------------------------------------------

namespace {

class NormShardReader final : public ShardReader {
 public:
  NormShardReader(const NormSource& source, const ShardSpec& spec)
      : source_(source),
        spec_(spec),
        reader_(source.layout(), source.check(), spec.counters, source.checks()) {}

  void restart() override {
    reader_.close();
    next_ = 0;
    files_without_samples_ = 0;
  }

  // Shared reading: the window's rows are parsed, the others passed over. A batch that ends
  // short is read again whole, from where it began (its rows land where the collector merges
  // them), and the counters forget the first attempt.
  std::int64_t fill(HostBatch& batch) override {
    if (!spec_.window || !batch.empty()) return fill_rows(batch);
    const Saved saved = save();
    reader_.set_window(spec_.window);
    std::int64_t n = 0;
    try {
      n = fill_rows(batch);
    } catch (...) {
      reader_.set_window(std::nullopt);
      throw;
    }
    reader_.set_window(std::nullopt);
    if (n == 0 || batch.full()) return n;
    if (ReadCounters* c = spec_.counters) {
      const std::int64_t passed = reader_.passed_over() - saved.passed_over;
      c->samples.fetch_sub(n - passed, std::memory_order_relaxed);
      c->skipped.fetch_sub(passed, std::memory_order_relaxed);
      c->dropped.fetch_sub(reader_.dropped_in_all() - saved.dropped, std::memory_order_relaxed);
      c->bad.fetch_sub(reader_.bad_in_all() - saved.bad, std::memory_order_relaxed);
    }
    batch.clear();
    restore(saved);
    return fill_rows(batch);
  }

 private:
  struct Saved {
    std::int64_t next = 0;
    std::int64_t files_without_samples = 0;
    std::string path;  // empty: no file open
    NormFileReader::Position position;
    std::int64_t passed_over = 0;
    std::int64_t dropped = 0;  // the reader's drops so far (checksum, checks)
    std::int64_t bad = 0;
  };

  Saved save() const {
    Saved s{next_,
            files_without_samples_,
            {},
            {},
            reader_.passed_over(),
            reader_.dropped_in_all(),
            reader_.bad_in_all()};
    if (reader_.is_open()) {
      s.path = reader_.path();
      s.position = reader_.position();
    }
    return s;
  }

  void restore(const Saved& s) {
    next_ = s.next;
    files_without_samples_ = s.files_without_samples;
    if (s.path.empty()) {
      reader_.close();
      return;
    }
    if (!reader_.is_open() || reader_.path() != s.path) reader_.open(s.path);
    reader_.seek(s.position);
  }

  std::int64_t fill_rows(HostBatch& batch) {
    const std::int64_t start = batch.size();
    const auto& files = source_.file_list().files;
    const auto n = static_cast<std::int64_t>(files.size());
    while (!batch.full()) {
      if (!reader_.is_open() || reader_.done()) {
        // Shard w reads files w, w+W, w+2W, ...; repeating, the sequence wraps modulo N.
        const std::int64_t position = spec_.worker + next_ * spec_.num_workers;
        if (!spec_.repeat && position >= n) break;
        // Repeating, a shard whose files hold no samples (after checksum drops) would spin
        // forever: report it exhausted instead; the pipeline retires the worker.
        if (files_without_samples_ > n) break;
        const std::string& file = files[static_cast<std::size_t>(position % n)];
        if (reader_.is_open() && reader_.path() == file)
          reader_.rewind();
        else
          reader_.open(file);
        ++next_;
        ++files_without_samples_;
      }
      if (reader_.read(batch) > 0) files_without_samples_ = 0;
    }
    return batch.size() - start;
  }

  const NormSource& source_;
  ShardSpec spec_;
  NormFileReader reader_;
  std::int64_t next_ = 0;
  std::int64_t files_without_samples_ = 0;
};

}  // namespace

NormSource::NormSource(const std::string& file_list, CheckMode check, const BatchLayout& layout,
                       SampleChecks checks)
    : list_(read_file_list(file_list)), check_(check), layout_(layout), checks_(std::move(checks)) {
  layout_.validate("Norm source");
  // Open every file once now: a header mismatch is reported before training starts.
  NormFileReader probe(layout_, check_);
  for (const auto& f : list_.files) {
    probe.open(f);
    num_samples_ += probe.header().number_of_records;
    probe.close();
  }
}

std::string NormSource::description() const {
  return cat("Norm file list '", list_.path, "' (", list_.files.size(), " files)");
}

std::unique_ptr<ShardReader> NormSource::open_shard(const ShardSpec& spec) const {
  EMBER_CHECK(spec.worker >= 0 && spec.worker < spec.num_workers, "NormSource: worker ",
              spec.worker, " of ", spec.num_workers);
  return std::make_unique<NormShardReader>(*this, spec);
}

}  // namespace ember::data
