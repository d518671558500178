// The input pipeline on host "devices": sharding over workers, both modes, the split over D
// devices, determinism, shutdown and error propagation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "data/data_test_support.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "ember/data/file_list.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;

struct Dataset {
  std::string list;
  std::vector<std::string> files;
  std::vector<std::vector<Sample>> per_file;
  std::vector<Sample> all;
};

Dataset write_dataset(const std::filesystem::path& dir, std::mt19937_64& rng,
                      const SampleShape& shape, const std::vector<std::int64_t>& counts,
                      CheckMode check = CheckMode::Sum, DType key_type = DType::U32) {
  Dataset d;
  std::filesystem::create_directories(dir);
  for (std::size_t f = 0; f < counts.size(); ++f) {
    const std::string path = (dir / ("part" + std::to_string(f) + ".data")).string();
    d.per_file.push_back(datatest::random_samples(rng, counts[f], shape));
    datatest::write_norm(path, d.per_file.back(), shape, check, key_type);
    d.files.push_back(path);
    d.all.insert(d.all.end(), d.per_file.back().begin(), d.per_file.back().end());
  }
  d.list = (dir / "list.txt").string();
  write_file_list(d.list, d.files);
  return d;
}

std::shared_ptr<DataSource> norm_source(const Dataset& d, const SampleShape& shape,
                                        CheckMode check = CheckMode::Sum,
                                        DType key_type = DType::U32) {
  return std::make_shared<NormSource>(d.list, check, datatest::layout_for(shape, key_type));
}

std::vector<Sample> sorted(std::vector<Sample> v) {
  std::sort(v.begin(), v.end());
  return v;
}

SampleShape small_shape() {
  SampleShape shape;
  shape.label_dim = 1;
  shape.dense_dim = 2;
  shape.slots_per_input = {3, 2};
  shape.min_nnz = 0;
  shape.max_nnz = 3;
  return shape;
}

TEST(Pipeline, EpochsModeDeliversEverySampleExactlyOncePerEpoch) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {37, 0, 300, 1, 129});
  for (int workers : {1, 2, 3, 5}) {
    for (bool deterministic : {false, true}) {
      PipelineOptions o;
      o.batch_size = 64;
      o.num_workers = workers;
      o.mode = PipelineMode::Epochs;
      o.num_epochs = 2;
      o.deterministic = deterministic;
      Pipeline p(norm_source(d, shape), o);
      EXPECT_EQ(p.num_workers(), workers);
      for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
        std::vector<Sample> seen;
        for (;;) {
          auto b = p.next();
          ASSERT_TRUE(b.has_value());
          EXPECT_EQ(b->epoch, epoch);
          for (auto& s : datatest::samples_of(*b)) seen.push_back(s);
          if (b->end_of_epoch) {
            EXPECT_LE(b->global_size, 64);
            EXPECT_GT(b->global_size, 0);
            break;
          }
          EXPECT_EQ(b->global_size, 64) << "only an epoch's last batch may be partial";
        }
        EXPECT_EQ(seen.size(), d.all.size());
        EXPECT_EQ(sorted(seen), sorted(d.all)) << "workers " << workers;
      }
      EXPECT_FALSE(p.next().has_value());
      EXPECT_FALSE(p.next().has_value());
      EXPECT_EQ(p.stats().samples, 2 * static_cast<std::int64_t>(d.all.size()));
    }
  }
}

TEST(Pipeline, OneWorkerReadsFilesInListOrder) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {5, 8, 3});
  PipelineOptions o;
  o.batch_size = 4;
  o.num_workers = 1;
  o.mode = PipelineMode::Epochs;
  Pipeline p(norm_source(d, shape), o);
  std::vector<Sample> seen;
  std::vector<std::int64_t> sizes;
  while (auto b = p.next()) {
    sizes.push_back(b->global_size);
    for (auto& s : datatest::samples_of(*b)) seen.push_back(s);
  }
  EXPECT_EQ(seen, d.all);
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{4, 4, 4, 4}));
}

TEST(Pipeline, RepeatModeWrapsAroundWithFullBatches) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {10, 7});
  PipelineOptions o;
  o.batch_size = 6;
  o.num_workers = 1;
  o.mode = PipelineMode::Repeat;
  Pipeline p(norm_source(d, shape), o);
  // One worker cycles through the files forever: the stream is the dataset repeated.
  std::vector<Sample> seen;
  for (int i = 0; i < 20; ++i) {
    auto b = p.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->global_size, 6);
    EXPECT_FALSE(b->end_of_epoch);
    EXPECT_EQ(b->sequence, i);
    for (auto& s : datatest::samples_of(*b)) seen.push_back(s);
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i], d.all[i % d.all.size()]) << "sample " << i;
  }
}

TEST(Pipeline, RepeatModeWithSeveralWorkersKeepsEveryFileInRotation) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {20, 20, 20, 20});
  PipelineOptions o;
  o.batch_size = 10;
  o.num_workers = 2;
  o.deterministic = true;
  Pipeline p(norm_source(d, shape), o);
  std::map<Sample, int> counts;
  for (int i = 0; i < 80; ++i) {  // 800 samples: ten passes over the 80
    for (auto& s : datatest::samples_of(*p.next())) ++counts[s];
  }
  ASSERT_EQ(counts.size(), d.all.size());
  for (const auto& [s, n] : counts) EXPECT_EQ(n, 10);
}

TEST(Pipeline, RepeatModeRetiresAWorkerWhoseFilesAreEmpty) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {20, 0, 20});
  for (bool deterministic : {true, false}) {
    PipelineOptions o;
    o.batch_size = 8;
    o.num_workers = 3;  // worker 1 only ever gets the empty file
    o.deterministic = deterministic;
    Pipeline p(norm_source(d, shape), o);
    std::map<Sample, int> counts;
    for (int i = 0; i < 20; ++i) {  // 160 samples: four passes over the 40
      for (auto& s : datatest::samples_of(*p.next())) ++counts[s];
    }
    EXPECT_EQ(counts.size(), d.all.size());
    int total = 0;
    for (const auto& [s, n] : counts) total += n;
    EXPECT_EQ(total, 160);
  }
  const Dataset empty = write_dataset(dir / "empty", rng, shape, {0, 0});
  PipelineOptions o;
  o.batch_size = 4;
  o.num_workers = 2;
  Pipeline p(norm_source(empty, shape), o);
  EXPECT_THROW(p.next(), DataError);
  o.mode = PipelineMode::Epochs;
  Pipeline q(norm_source(empty, shape), o);
  EXPECT_THROW(q.next(), DataError);
}

TEST(Pipeline, SplitsEvenlyOverHostDevicesWithTheGlobalCsrEverywhere) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {40, 27});  // 67 = 11 x 6 + 1
  std::vector<Sample> reference;
  for (int D : {1, 2, 3}) {
    PipelineOptions o;
    o.batch_size = 6;
    o.devices.assign(static_cast<std::size_t>(D), Place::host());
    o.num_workers = 2;
    o.deterministic = true;
    o.mode = PipelineMode::Epochs;
    Pipeline p(norm_source(d, shape), o);
    std::vector<Sample> seen;
    while (auto b = p.next()) {
      ASSERT_EQ(b->devices.size(), static_cast<std::size_t>(D));
      const auto shares = split_evenly(b->global_size, D);
      for (int dev = 0; dev < D; ++dev) {
        const DeviceBatch& db = b->devices[static_cast<std::size_t>(dev)];
        EXPECT_EQ(db.place, Place::host());
        EXPECT_EQ(db.local_offset, shares[static_cast<std::size_t>(dev)].offset);
        EXPECT_EQ(db.local_size, shares[static_cast<std::size_t>(dev)].size);
        EXPECT_EQ(db.label.shape(), (Shape{db.local_size, 1}));
        EXPECT_EQ(db.dense.shape(), (Shape{db.local_size, 2}));
        ASSERT_EQ(db.sparse.size(), 2u);
        EXPECT_EQ(db.sparse[0].rows(), b->global_size * 3);
        EXPECT_EQ(db.sparse[1].rows(), b->global_size * 2);
        EXPECT_EQ(db.sparse[0].dtype(), DType::U32);
        if (b->global_size == 6) {
          EXPECT_EQ(db.local_size, 6 / D);
        }
      }
      for (auto& s : datatest::samples_of(*b)) seen.push_back(s);
    }
    EXPECT_EQ(sorted(seen), sorted(d.all));
    if (D == 1) {
      reference = seen;
    } else {
      EXPECT_EQ(seen, reference) << "deterministic batches should not depend on D";
    }
  }
  // Blocks of ceil(n / parts): what an embedding padding the batch to equal blocks computes.
  EXPECT_EQ(split_evenly(4, 3)[0].size, 2);
  EXPECT_EQ(split_evenly(4, 3)[1].size, 2);
  EXPECT_EQ(split_evenly(4, 3)[2].offset, 4);
  EXPECT_EQ(split_evenly(4, 3)[2].size, 0);
  EXPECT_EQ(split_evenly(160, 3)[2].offset, 108);
  EXPECT_EQ(split_evenly(160, 3)[2].size, 52);
  EXPECT_EQ(split_evenly(1, 4)[3].size, 0);
  PipelineOptions bad;
  bad.batch_size = 7;
  bad.devices.assign(2, Place::host());
  EXPECT_THROW(Pipeline(norm_source(d, shape), bad), ConfigError);
}

std::vector<std::vector<Sample>> run_batches(const std::shared_ptr<DataSource>& source,
                                             PipelineOptions o, int count) {
  Pipeline p(source, o);
  std::vector<std::vector<Sample>> out;
  for (int i = 0; i < count; ++i) {
    auto b = p.next();
    if (!b) break;
    out.push_back(datatest::samples_of(*b));
  }
  return out;
}

TEST(Pipeline, DeterministicModeIsIdenticalAcrossRuns) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {50, 13, 77, 31, 64, 9});
  const auto source = norm_source(d, shape);
  for (PipelineMode mode : {PipelineMode::Epochs, PipelineMode::Repeat}) {
    PipelineOptions o;
    o.batch_size = 16;
    o.num_workers = 4;
    o.deterministic = true;
    o.mode = mode;
    o.num_epochs = 2;
    o.prefetch_depth = 1;
    const auto first = run_batches(source, o, 40);
    for (int run = 0; run < 3; ++run) {
      o.prefetch_depth = 1 + run;
      EXPECT_EQ(run_batches(source, o, 40), first) << "run " << run;
    }
  }
}

TEST(Pipeline, ShutsDownCleanlyMidEpoch) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {500, 500, 500, 500});
  const auto source = norm_source(d, shape);
  const auto start = std::chrono::steady_clock::now();
  for (int taken : {0, 1, 3}) {
    for (PipelineMode mode : {PipelineMode::Epochs, PipelineMode::Repeat}) {
      PipelineOptions o;
      o.batch_size = 8;
      o.num_workers = 4;
      o.mode = mode;
      o.prefetch_depth = 2;
      std::optional<Batch> kept;
      {
        Pipeline p(source, o);
        for (int i = 0; i < taken; ++i) kept = p.next();
      }  // destroyed with workers blocked on full queues
      if (kept) {
        // A batch handed out stays valid after its pipeline is gone.
        EXPECT_EQ(datatest::samples_of(*kept).size(), 8u);
      }
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(Pipeline, HeldBatchesAreNotOverwritten) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {64});
  PipelineOptions o;
  o.batch_size = 4;
  o.num_workers = 1;
  o.mode = PipelineMode::Epochs;
  o.prefetch_depth = 1;
  Pipeline p(norm_source(d, shape), o);
  std::vector<Batch> held;
  while (auto b = p.next()) held.push_back(std::move(*b));
  ASSERT_EQ(held.size(), 16u);
  std::vector<Sample> seen;
  for (const auto& b : held) {
    for (auto& s : datatest::samples_of(b)) seen.push_back(s);
  }
  EXPECT_EQ(seen, d.all);
}

TEST(Pipeline, WorkerErrorReachesTheConsumerNamingFileAndSample) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  Dataset d = write_dataset(dir.path(), rng, shape, {30, 30, 30});
  // Cut the last file in the middle of its samples.
  const auto size = std::filesystem::file_size(d.files[2]);
  std::filesystem::resize_file(d.files[2], size - 7);
  for (bool deterministic : {false, true}) {
    PipelineOptions o;
    o.batch_size = 4;
    o.num_workers = 3;
    o.deterministic = deterministic;
    o.mode = PipelineMode::Epochs;
    Pipeline p(norm_source(d, shape), o);
    std::string message;
    try {
      while (p.next()) {
      }
      FAIL() << "no error";
    } catch (const DataError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(d.files[2]), std::string::npos) << message;
    EXPECT_NE(message.find("truncated: sample 29"), std::string::npos) << message;
    EXPECT_THROW(p.next(), DataError);  // stays failed
  }
}

TEST(Pipeline, ChecksumDropsAreCountedNotDelivered) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  Dataset d = write_dataset(dir.path(), rng, shape, {10});
  // Flip a byte inside the payload of sample 0 (header record is 69 bytes, then length 4).
  {
    std::fstream f(d.files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(69 + 4);
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(69 + 4);
    f.write(&c, 1);
  }
  PipelineOptions o;
  o.batch_size = 3;
  o.mode = PipelineMode::Epochs;
  Pipeline p(norm_source(d, shape), o);
  std::vector<Sample> seen;
  while (auto b = p.next()) {
    for (auto& s : datatest::samples_of(*b)) seen.push_back(s);
  }
  EXPECT_EQ(seen, std::vector<Sample>(d.all.begin() + 1, d.all.end()));
  EXPECT_EQ(p.stats().dropped, 1);
}

TEST(Pipeline, RawEpochsShuffleChunksAndMergeThePartialOne) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.label_dim = 1;
  shape.dense_dim = 3;
  shape.slots_per_input = {2, 3};
  shape.min_nnz = shape.max_nnz = 1;
  shape.max_key = 50;
  const auto samples = datatest::random_samples(rng, 103, shape);
  const std::string path = dir / "train.bin";
  datatest::write_raw(path, samples, shape, true);
  RawOptions raw;
  raw.path = path;
  raw.num_samples = 103;
  raw.float_label_dense = true;
  raw.slot_size_array = {50, 50, 50, 50, 50};
  raw.shuffle = true;
  raw.seed = 42;
  const auto source = std::make_shared<RawSource>(raw, datatest::layout_for(shape, DType::I64));
  // Expected keys: value + 50 * slot.
  std::vector<Sample> expect = samples;
  for (auto& s : expect) {
    for (std::size_t k = 0; k < s.slots.size(); ++k) s.slots[k][0] += 50 * static_cast<std::int64_t>(k);
  }
  PipelineOptions o;
  o.batch_size = 10;
  o.num_workers = 3;
  o.mode = PipelineMode::Epochs;
  o.num_epochs = 2;
  o.deterministic = true;
  Pipeline p(source, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<Sample> seen;
    std::vector<std::int64_t> sizes;
    for (;;) {
      auto b = p.next();
      ASSERT_TRUE(b);
      sizes.push_back(b->global_size);
      for (auto& s : datatest::samples_of(*b)) seen.push_back(s);
      if (b->end_of_epoch) break;
    }
    EXPECT_EQ(sizes.back(), 3);
    EXPECT_EQ(sizes.size(), 11u);
    EXPECT_EQ(sorted(seen), sorted(expect));
    EXPECT_NE(seen, expect) << "chunks should come shuffled";
  }
  EXPECT_FALSE(p.next());
}

TEST(Pipeline, RawRepeatModeGivesOnlyFullBatches) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.dense_dim = 2;
  shape.slots_per_input = {3};
  shape.min_nnz = shape.max_nnz = 1;
  const auto samples = datatest::random_samples(rng, 25, shape);
  datatest::write_raw(dir / "r.bin", samples, shape, false);
  RawOptions raw;
  raw.path = dir / "r.bin";
  raw.num_samples = 25;
  const auto source = std::make_shared<RawSource>(raw, datatest::layout_for(shape, DType::U32));
  PipelineOptions o;
  o.batch_size = 8;
  o.num_workers = 2;
  o.deterministic = true;
  Pipeline p(source, o);
  std::map<std::vector<std::vector<std::int64_t>>, int> seen;
  for (int i = 0; i < 25; ++i) {  // 200 samples = 8 passes
    auto b = p.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->global_size, 8);
    for (auto& s : datatest::samples_of(*b)) ++seen[s.slots];
  }
  int total = 0;
  for (const auto& [k, n] : seen) total += n;
  EXPECT_EQ(total, 200);
}

TEST(Pipeline, DefaultWorkersAreBoundedByTheFiles) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {5});
  PipelineOptions o;
  o.batch_size = 2;
  o.num_workers = 0;
  Pipeline p(norm_source(d, shape), o);
  EXPECT_EQ(p.num_workers(), 1);
  o.num_workers = 8;
  Pipeline q(norm_source(d, shape), o);
  EXPECT_EQ(q.num_workers(), 1);
}

}  // namespace
}  // namespace ember::data
