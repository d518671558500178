#include "ember/data/raw_format.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/random_stream.hpp"

namespace ember::data {

RawSource::RawSource(const RawOptions& options, const BatchLayout& layout)
    : options_(options), layout_(layout) {
  layout_.validate("Raw source");
  if (options_.checks) validator_.emplace(*options_.checks, layout_.label_dim, layout_.dense_dim);
  const std::int64_t slots = layout_.total_slots();
  for (std::size_t i = 0; i < layout_.sparse.size(); ++i) {
    const auto& s = layout_.sparse[i];
    for (std::int64_t n : s.fixed_nnz) {
      if (n != 1) {
        EMBER_THROW_AS(ConfigError, "Raw data '", options.path, "': sparse input ", i, " (\"",
                       s.name, "\") is declared is_fixed_length with ", n,
                       " keys in a slot; Raw holds exactly one key per slot");
      }
    }
    if (s.max_feature_num_per_sample < s.slot_num) {
      EMBER_THROW_AS(ConfigError, "Raw data '", options.path, "': sparse input ", i, " (\"", s.name,
                     "\") has ", s.slot_num, " one-hot slots but max_feature_num_per_sample ",
                     s.max_feature_num_per_sample, "; Raw holds exactly one key per slot");
    }
  }
  if (!options_.slot_size_array.empty()) {
    if (static_cast<std::int64_t>(options_.slot_size_array.size()) != slots) {
      EMBER_THROW_AS(ConfigError, "Raw data '", options.path, "': slot_size_array has ",
                     options_.slot_size_array.size(), " entries but there are ", slots, " slots");
    }
    std::int64_t sum = 0;
    for (std::int64_t size : options_.slot_size_array) {
      if (size < 0) EMBER_THROW_AS(ConfigError, "Raw data: negative entry in slot_size_array");
      slot_offset_.push_back(sum);
      sum += size;
    }
    if (layout_.key_type == DType::U32 &&
        sum > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) + 1) {
      EMBER_THROW_AS(ConfigError, "Raw data '", options.path, "': slot_size_array sums to ", sum,
                     " keys, more than I32 (u32) keys can hold; use input_key_type I64");
    }
  } else {
    slot_offset_.assign(static_cast<std::size_t>(slots), 0);
  }
  if (options_.num_samples <= 0) {
    EMBER_THROW_AS(ConfigError, "Raw data '", options.path, "': num_samples must be positive, got ",
                   options_.num_samples);
  }
  file_ = std::make_shared<MappedFile>(options_.path);
  stride_ = 4 * static_cast<std::size_t>(layout_.label_dim + layout_.dense_dim + slots);
  const std::uint64_t needed = static_cast<std::uint64_t>(options_.num_samples) * stride_;
  if (file_->size() < needed) {
    EMBER_THROW_AS(DataError, "Raw file '", options_.path, "' is truncated: ", file_->size(),
                   " bytes hold ", file_->size() / stride_, " whole samples of ", stride_,
                   " bytes, but num_samples is ", options_.num_samples, "; sample ",
                   file_->size() / stride_, " is the first one missing");
  }
  if (file_->size() > needed) {
    log_once(
        "raw extra " + options_.path, spdlog::level::warn,
        cat("Raw file '", options_.path, "' has ", file_->size(), " bytes, more than the ", needed,
            " of num_samples ", options_.num_samples, " samples; the rest is ignored"));
  }
}

std::string RawSource::description() const {
  return cat("Raw file '", options_.path, "' (", options_.num_samples, " samples)");
}

int RawSource::max_workers(std::int64_t batch_size) const {
  const std::int64_t chunks = (options_.num_samples + batch_size - 1) / batch_size;
  return static_cast<int>(std::min<std::int64_t>(chunks, std::numeric_limits<int>::max()));
}

bool RawSource::may_drop() const {
  return validator_ && validator_->policy() == BadSamplePolicy::Drop;
}

std::vector<std::int64_t> RawSource::chunk_order(std::int64_t batch_size) const {
  EMBER_CHECK(batch_size > 0, "Raw chunks need a positive batch size");
  const std::int64_t chunks = (options_.num_samples + batch_size - 1) / batch_size;
  std::vector<std::int64_t> order(static_cast<std::size_t>(chunks));
  for (std::int64_t c = 0; c < chunks; ++c)
    order[static_cast<std::size_t>(c)] = c;
  if (options_.shuffle) {
    RandomStream rng(options_.seed, 0x7261775f63686b73ull /* "raw_chks" */);
    shuffle_range(order.begin(), order.end(), rng);
  }
  return order;
}

void RawSource::fail_key(std::int64_t sample, std::int64_t slot, std::int32_t value) const {
  if (options_.slot_size_array.empty()) {
    EMBER_THROW_AS(DataError, "Raw file '", options_.path, "': sample ", sample, " slot ", slot,
                   " has key ", value, "; keys must not be negative");
  }
  EMBER_THROW_AS(DataError, "Raw file '", options_.path, "': sample ", sample, " slot ", slot,
                 " has key ", value, ", outside the slot's range [0, ",
                 options_.slot_size_array[static_cast<std::size_t>(slot)],
                 ") given by slot_size_array");
}

bool RawSource::accept_sample(const HostBatch& batch, std::int64_t sample, const std::byte* stored,
                              ReadCounters* counters) const {
  if (!validator_) return true;
  const std::int64_t row = batch.size();
  const auto problem = validator_->find(batch.label() + row * layout_.label_dim,
                                        batch.dense() + row * layout_.dense_dim);
  if (!problem) [[likely]]
    return true;
  std::string what = validator_->describe(*problem);
  if (!options_.float_label_dense) {
    // Say what is stored: the int32 behind a converted value (dense is log(v + 1)).
    std::int32_t v;
    const std::int64_t field =
        problem->in_label ? problem->column : layout_.label_dim + problem->column;
    std::memcpy(&v, stored + field * 4, 4);
    what +=
        cat(problem->in_label ? " (the stored int32 " : " (log(v + 1) of the stored int32 v = ", v,
            ")");
  }
  if (validator_->policy() == BadSamplePolicy::Error) {
    EMBER_THROW_AS(DataError, "Raw file '", options_.path, "': sample ", sample, ": ", what, " ",
                   bad_sample_hint());
  }
  if (counters != nullptr) counters->record_bad(options_.path, sample, what);
  return false;
}

template <class Key>
std::int64_t RawSource::read_typed(std::int64_t first, std::int64_t count, HostBatch& batch,
                                   ReadCounters* counters) const {
  const std::int64_t start = batch.size();
  const auto ld = layout_.label_dim, dd = layout_.dense_dim;
  const bool floats = options_.float_label_dense;
  const bool bounded = !options_.slot_size_array.empty();
  const std::int64_t* sizes = options_.slot_size_array.data();
  const std::int64_t* offsets = slot_offset_.data();
  for (std::int64_t n = 0; n < count; ++n) {
    const std::int64_t sample = first + n;
    const std::byte* p = file_->data() + static_cast<std::size_t>(sample) * stride_;
    const std::int64_t row = batch.size();
    float* label = batch.label() + row * ld;
    float* dense = batch.dense() + row * dd;
    if (floats) {
      std::memcpy(label, p, static_cast<std::size_t>(ld) * 4);
      std::memcpy(dense, p + ld * 4, static_cast<std::size_t>(dd) * 4);
    } else {
      for (std::int64_t j = 0; j < ld; ++j) {
        std::int32_t v;
        std::memcpy(&v, p + j * 4, 4);
        label[j] = static_cast<float>(v);
      }
      for (std::int64_t j = 0; j < dd; ++j) {
        std::int32_t v;
        std::memcpy(&v, p + (ld + j) * 4, 4);
        // HugeCTR's DLRM-style preprocessing of integer dense features.
        dense[j] = std::log(static_cast<float>(v) + 1.f);
      }
    }
    const std::byte* keys = p + (ld + dd) * 4;
    std::int64_t slot = 0;
    for (int i = 0; i < batch.num_inputs(); ++i) {
      const std::int64_t slots = layout_.sparse[static_cast<std::size_t>(i)].slot_num;
      std::int64_t* off = batch.row_offsets(i) + row * slots;
      Key* values = batch.values_as<Key>(i);
      std::int64_t pos = off[0];
      for (std::int64_t k = 0; k < slots; ++k, ++slot) {
        std::int32_t v;
        std::memcpy(&v, keys + slot * 4, 4);
        if (v < 0 || (bounded && v >= sizes[slot])) [[unlikely]]
          fail_key(sample, slot, v);
        values[pos++] = static_cast<Key>(static_cast<std::int64_t>(v) + offsets[slot]);
        off[k + 1] = pos;
      }
    }
    if (accept_sample(batch, sample, p, counters)) batch.set_size(row + 1);
  }
  return batch.size() - start;
}

std::int64_t RawSource::read_samples(std::int64_t first, std::int64_t count, HostBatch& batch,
                                     ReadCounters* counters) const {
  EMBER_CHECK(first >= 0 && count >= 0 && first + count <= options_.num_samples,
              "Raw read of samples [", first, ", ", first + count, ") of ", options_.num_samples);
  EMBER_CHECK(batch.size() + count <= batch.capacity(), "Raw read of ", count,
              " samples into a batch with room for ", batch.capacity() - batch.size());
  if (layout_.key_type == DType::U32)
    return read_typed<std::uint32_t>(first, count, batch, counters);
  return read_typed<std::int64_t>(first, count, batch, counters);
}

namespace {

class RawShardReader final : public ShardReader {
 public:
  RawShardReader(const RawSource& source, const ShardSpec& spec)
      : source_(source), spec_(spec), order_(source.chunk_order(spec.batch_size)) {}

  std::int64_t fill(HostBatch& batch) override {
    const auto chunks = static_cast<std::int64_t>(order_.size());
    // A chunk whose samples were all dropped gives nothing: go on to the next one, but not
    // forever (repeating over a shard that holds no good sample).
    for (std::int64_t tried = 0; tried <= chunks; ++tried) {
      // Worker w reads chunk positions w, w+W, ... of the (shuffled) order, wrapping when
      // repeating, as HugeCTR's Raw workers do.
      const std::int64_t position = spec_.worker + next_ * spec_.num_workers;
      if (!spec_.repeat && position >= chunks) return 0;
      const std::int64_t chunk = order_[static_cast<std::size_t>(position % chunks)];
      const std::int64_t first = chunk * spec_.batch_size;
      const std::int64_t count = std::min(spec_.batch_size, source_.num_samples() - first);
      EMBER_CHECK(count <= batch.capacity() - batch.size(), "Raw chunk of ", count,
                  " samples does not fit the batch");
      const std::int64_t added = read_chunk(first, count, batch);
      ++next_;
      if (added > 0) return added;
    }
    return 0;
  }

  void restart() override { next_ = 0; }

 private:
  // Samples [first, first + count) into `batch`. Shared reading: a full chunk is one batch, so
  // only the window's samples are parsed (fixed-size records: no other sample is touched). A
  // short chunk, or a chunk whose checks may drop samples (which moves the samples behind them),
  // is read whole.
  std::int64_t read_chunk(std::int64_t first, std::int64_t count, HostBatch& batch) {
    ReadCounters* counters = spec_.counters;
    const auto stride = static_cast<std::int64_t>(source_.stride());
    if (!spec_.window || count < spec_.batch_size || !batch.empty() || source_.may_drop()) {
      const std::int64_t added = source_.read_samples(first, count, batch, counters);
      if (counters != nullptr) {
        counters->samples.fetch_add(added, std::memory_order_relaxed);
        counters->bytes.fetch_add(count * stride, std::memory_order_relaxed);
      }
      return added;
    }
    const Share w = *spec_.window;
    batch.add_rows_parsed_elsewhere(w.offset);
    const std::int64_t parsed = source_.read_samples(first + w.offset, w.size, batch, counters);
    EMBER_CHECK(parsed == w.size, "Raw read of ", w.size, " samples gave ", parsed);
    batch.add_rows_parsed_elsewhere(count - w.offset - w.size);
    if (counters != nullptr) {
      counters->samples.fetch_add(parsed, std::memory_order_relaxed);
      counters->skipped.fetch_add(count - parsed, std::memory_order_relaxed);
      counters->bytes.fetch_add(parsed * stride, std::memory_order_relaxed);
    }
    return count;
  }

  const RawSource& source_;
  ShardSpec spec_;
  std::vector<std::int64_t> order_;
  std::int64_t next_ = 0;
};

}  // namespace

std::unique_ptr<ShardReader> RawSource::open_shard(const ShardSpec& spec) const {
  EMBER_CHECK(spec.worker >= 0 && spec.worker < spec.num_workers, "RawSource: worker ", spec.worker,
              " of ", spec.num_workers);
  return std::make_unique<RawShardReader>(*this, spec);
}

// ---- writer -----------------------------------------------------------------------------------

RawWriter::RawWriter(const std::string& path, std::int64_t label_dim, std::int64_t dense_dim,
                     std::int64_t slot_num, bool float_label_dense)
    : label_dim_(label_dim),
      dense_dim_(dense_dim),
      slot_num_(slot_num),
      float_label_dense_(float_label_dense),
      file_(path) {}

template <class LabelDense>
void RawWriter::write_sample(std::span<const LabelDense> label, std::span<const LabelDense> dense,
                             std::span<const std::int32_t> keys) {
  constexpr bool floats = std::is_same_v<LabelDense, float>;
  EMBER_CHECK(floats == float_label_dense_, "RawWriter '", path(),
              "': ", floats ? "float" : "int32", " label/dense given to a file of ",
              float_label_dense_ ? "float" : "int32", " label/dense");
  EMBER_CHECK(static_cast<std::int64_t>(label.size()) == label_dim_ &&
                  static_cast<std::int64_t>(dense.size()) == dense_dim_ &&
                  static_cast<std::int64_t>(keys.size()) == slot_num_,
              "RawWriter '", path(), "': sample ", records_, " has ", label.size(), " labels, ",
              dense.size(), " dense values and ", keys.size(), " keys; the file has ", label_dim_,
              ", ", dense_dim_, " and ", slot_num_);
  file_.write(label.data(), label.size_bytes());
  file_.write(dense.data(), dense.size_bytes());
  file_.write(keys.data(), keys.size_bytes());
  ++records_;
}

void RawWriter::write(std::span<const float> label, std::span<const float> dense,
                      std::span<const std::int32_t> keys) {
  write_sample(label, dense, keys);
}

void RawWriter::write(std::span<const std::int32_t> label, std::span<const std::int32_t> dense,
                      std::span<const std::int32_t> keys) {
  write_sample(label, dense, keys);
}

}  // namespace ember::data
