#include "data/data_test_support.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <utility>

#include "ember/data/data_source.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/norm_writer.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"

namespace ember::data::datatest {

std::ostream& operator<<(std::ostream& os, const Sample& s) {
  os << "{label [";
  for (float v : s.label)
    os << v << ' ';
  os << "] dense [";
  for (float v : s.dense)
    os << v << ' ';
  os << "] slots";
  for (const auto& slot : s.slots) {
    os << " [";
    for (auto k : slot)
      os << k << ' ';
    os << ']';
  }
  return os << '}';
}

SampleShape one_hot_shape(std::int64_t dense_dim, std::vector<std::int64_t> slots_per_input,
                          std::int64_t max_key) {
  SampleShape shape;
  shape.dense_dim = dense_dim;
  shape.slots_per_input = std::move(slots_per_input);
  shape.min_nnz = shape.max_nnz = 1;
  shape.max_key = max_key;
  return shape;
}

std::int64_t SampleShape::total_slots() const {
  std::int64_t n = 0;
  for (auto s : slots_per_input)
    n += s;
  return n;
}

std::vector<Sample> random_samples(std::mt19937_64& rng, std::int64_t n, const SampleShape& shape) {
  std::uniform_real_distribution<float> value(-2.f, 2.f);
  std::uniform_int_distribution<int> nnz(shape.min_nnz, shape.max_nnz);
  std::uniform_int_distribution<std::int64_t> key(0, shape.max_key - 1);
  std::vector<Sample> out(static_cast<std::size_t>(n));
  for (auto& s : out) {
    for (std::int64_t j = 0; j < shape.label_dim; ++j)
      s.label.push_back(value(rng) > 0 ? 1.f : 0.f);
    for (std::int64_t j = 0; j < shape.dense_dim; ++j)
      s.dense.push_back(value(rng));
    for (std::int64_t k = 0; k < shape.total_slots(); ++k) {
      std::vector<std::int64_t> keys(static_cast<std::size_t>(nnz(rng)));
      for (auto& x : keys)
        x = key(rng);
      s.slots.push_back(std::move(keys));
    }
  }
  return out;
}

BatchLayout layout_for(const SampleShape& shape, DType key_type) {
  BatchLayout layout;
  layout.label_dim = shape.label_dim;
  layout.dense_dim = shape.dense_dim;
  layout.key_type = key_type;
  int i = 0;
  for (auto slots : shape.slots_per_input) {
    layout.sparse.push_back(
        {"input" + std::to_string(i++), slots, slots * shape.max_nnz, shape.max_nnz});
  }
  return layout;
}

namespace {
template <class Key>
void write_norm_typed(NormWriter& w, const std::vector<Sample>& samples) {
  for (const auto& s : samples) {
    std::vector<std::int32_t> nnz;
    std::vector<Key> keys;
    for (const auto& slot : s.slots) {
      nnz.push_back(static_cast<std::int32_t>(slot.size()));
      for (auto k : slot)
        keys.push_back(static_cast<Key>(k));
    }
    w.write<Key>(s.label, s.dense, nnz, keys);
  }
}
}  // namespace

void write_norm(const std::string& path, const std::vector<Sample>& samples,
                const SampleShape& shape, CheckMode check, DType key_type) {
  NormWriter w(path, {check, key_type, shape.label_dim, shape.dense_dim, shape.total_slots()});
  if (key_type == DType::U32) {
    write_norm_typed<std::uint32_t>(w, samples);
  } else {
    write_norm_typed<std::int64_t>(w, samples);
  }
  w.close();
}

void write_raw(const std::string& path, const std::vector<Sample>& samples,
               const SampleShape& shape, bool float_label_dense) {
  RawWriter w(path, shape.label_dim, shape.dense_dim, shape.total_slots(), float_label_dense);
  for (const auto& s : samples) {
    std::vector<std::int32_t> keys;
    for (const auto& slot : s.slots) {
      EXPECT_EQ(slot.size(), 1u) << "Raw samples are one-hot";
      keys.push_back(static_cast<std::int32_t>(slot.at(0)));
    }
    if (float_label_dense) {
      w.write(std::span<const float>(s.label), std::span<const float>(s.dense), keys);
    } else {
      std::vector<std::int32_t> label(s.label.begin(), s.label.end());
      std::vector<std::int32_t> dense(s.dense.begin(), s.dense.end());
      w.write(std::span<const std::int32_t>(label), std::span<const std::int32_t>(dense), keys);
    }
  }
  w.close();
}

RawOptions write_raw_dataset(const std::string& path, std::mt19937_64& rng,
                             const SampleShape& shape, std::int64_t n) {
  write_raw(path, random_samples(rng, n, shape), shape, true);
  RawOptions raw;
  raw.path = path;
  raw.num_samples = n;
  raw.float_label_dense = true;
  return raw;
}

namespace {
template <class Key>
void append_keys(std::vector<Sample>& out, std::size_t first, const std::int64_t* offsets,
                 const Key* values, std::int64_t n, std::int64_t slots) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t k = 0; k < slots; ++k) {
      const std::int64_t r = i * slots + k;
      std::vector<std::int64_t> keys;
      for (std::int64_t j = offsets[r]; j < offsets[r + 1]; ++j) {
        keys.push_back(static_cast<std::int64_t>(values[j]));
      }
      out[first + static_cast<std::size_t>(i)].slots.push_back(std::move(keys));
    }
  }
}
}  // namespace

std::vector<Sample> samples_of(const HostBatch& b) {
  const auto& layout = b.layout();
  std::vector<Sample> out(static_cast<std::size_t>(b.size()));
  for (std::int64_t i = 0; i < b.size(); ++i) {
    auto& s = out[static_cast<std::size_t>(i)];
    s.label.assign(b.label() + i * layout.label_dim, b.label() + (i + 1) * layout.label_dim);
    s.dense.assign(b.dense() + i * layout.dense_dim, b.dense() + (i + 1) * layout.dense_dim);
  }
  for (int input = 0; input < b.num_inputs(); ++input) {
    const auto slots = layout.sparse[static_cast<std::size_t>(input)].slot_num;
    if (layout.key_type == DType::U32) {
      append_keys(out, 0, b.row_offsets(input), b.values_as<std::uint32_t>(input), b.size(), slots);
    } else {
      append_keys(out, 0, b.row_offsets(input), b.values_as<std::int64_t>(input), b.size(), slots);
    }
  }
  return out;
}

void take_two_at_a_time(Pipeline& pipeline, int steps) {
  std::optional<Batch> current = pipeline.next();
  ASSERT_TRUE(current) << "the pipeline gave no batch";
  for (int i = 0; i < steps; ++i) {
    std::optional<Batch> upcoming = pipeline.next();
    ASSERT_TRUE(upcoming) << "the pipeline ended after " << i + 1 << " batches";
    current = std::move(upcoming);
  }
}

std::vector<Sample> samples_of(const Batch& batch) {
  std::vector<Sample> out(static_cast<std::size_t>(batch.global_size));
  EXPECT_FALSE(batch.devices.empty());
  std::int64_t expect_offset = 0;
  for (const DeviceBatch& db : batch.devices) {
    EXPECT_EQ(db.global_size, batch.global_size);
    EXPECT_EQ(db.local_offset, expect_offset);
    EXPECT_EQ(db.sequence, batch.sequence);
    expect_offset += db.local_size;
    const Tensor label = db.label.to(Place::host());
    const Tensor dense = db.dense.to(Place::host());
    EXPECT_EQ(label.size(0), db.local_size);
    EXPECT_EQ(dense.size(0), db.local_size);
    const auto lv = label.to_vector<float>();
    const auto dv = dense.to_vector<float>();
    const auto ld = label.size(1), dd = dense.size(1);
    for (std::int64_t i = 0; i < db.local_size; ++i) {
      auto& s = out[static_cast<std::size_t>(db.local_offset + i)];
      s.label.assign(lv.begin() + i * ld, lv.begin() + (i + 1) * ld);
      s.dense.assign(dv.begin() + i * dd, dv.begin() + (i + 1) * dd);
    }
  }
  EXPECT_EQ(expect_offset, batch.global_size);
  // Keys: every device holds the same global CSR.
  const DeviceBatch& first = batch.devices.front();
  for (std::size_t input = 0; input < first.sparse.size(); ++input) {
    const CsrTensor csr = first.sparse[input].to(Place::host());
    EXPECT_EQ(csr.rows() % std::max<std::int64_t>(batch.global_size, 1), 0);
    const std::int64_t slots = batch.global_size == 0 ? 0 : csr.rows() / batch.global_size;
    const auto offsets = csr.row_offsets().to_vector<std::int64_t>();
    if (csr.dtype() == DType::U32) {
      const auto v = csr.values().to_vector<std::uint32_t>();
      append_keys(out, 0, offsets.data(), v.data(), batch.global_size, slots);
    } else {
      const auto v = csr.values().to_vector<std::int64_t>();
      append_keys(out, 0, offsets.data(), v.data(), batch.global_size, slots);
    }
    for (std::size_t d = 1; d < batch.devices.size(); ++d) {
      const CsrTensor other = batch.devices[d].sparse[input].to(Place::host());
      EXPECT_EQ(other.row_offsets().to_vector<std::int64_t>(), offsets) << "device " << d;
      EXPECT_EQ(other.nnz(), csr.nnz());
    }
  }
  return out;
}

std::vector<Sample> read_remaining(NormFileReader& reader, const BatchLayout& layout,
                                   std::int64_t batch_rows) {
  std::vector<Sample> out;
  HostBatch batch(layout, batch_rows);
  while (!reader.done()) {
    batch.clear();
    reader.read(batch);
    for (auto& s : samples_of(batch))
      out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> read_norm_file(const std::string& path, const SampleShape& shape,
                                   CheckMode check, DType key_type) {
  const BatchLayout layout = layout_for(shape, key_type);
  NormFileReader reader(layout, check);
  reader.open(path);
  return read_remaining(reader, layout, 7);
}

std::vector<Sample> read_split(const DatasetDescription& d, DataSplit split, DType key_type) {
  PipelineOptions o;
  o.batch_size = 64;
  o.num_workers = 1;
  o.mode = PipelineMode::Epochs;
  Pipeline p(make_data_source(d.data_config(), key_type, split), o);
  std::vector<Sample> out;
  while (auto b = p.next()) {
    for (auto& s : samples_of(*b))
      out.push_back(s);
  }
  return out;
}

}  // namespace ember::data::datatest
