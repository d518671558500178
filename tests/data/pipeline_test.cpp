// The input pipeline on host "devices": shards and reader threads, both modes, the split over D
// devices, determinism, shutdown and error propagation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "data/data_test_support.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;

// An Int-mode Raw file of 25 random one-hot samples (3 slots, 2 dense values) and its source.
std::shared_ptr<RawSource> int_raw_source(const std::string& path) {
  auto rng = testing::make_rng();
  const SampleShape shape = datatest::one_hot_shape(2, {3});
  auto samples = datatest::random_samples(rng, 25, shape);
  // Int-mode dense values are counts (the reader takes log(v + 1); a negative one is a bad
  // sample).
  for (auto& sample : samples) {
    for (auto& v : sample.dense)
      v = std::abs(v);
  }
  datatest::write_raw(path, samples, shape, false);
  RawOptions raw;
  raw.path = path;
  raw.num_samples = 25;
  return std::make_shared<RawSource>(raw, datatest::layout_for(shape, DType::U32));
}

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
          for (auto& s : datatest::samples_of(*b))
            seen.push_back(s);
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
    for (auto& s : datatest::samples_of(*b))
      seen.push_back(s);
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
    for (auto& s : datatest::samples_of(*b))
      seen.push_back(s);
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
    for (auto& s : datatest::samples_of(*p.next()))
      ++counts[s];
  }
  ASSERT_EQ(counts.size(), d.all.size());
  for (const auto& [s, n] : counts)
    EXPECT_EQ(n, 10);
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
      for (auto& s : datatest::samples_of(*p.next()))
        ++counts[s];
    }
    int total = 0;
    for (const auto& [s, n] : counts)
      total += n;
    EXPECT_EQ(total, 160);
    if (deterministic) {
      EXPECT_EQ(counts.size(), d.all.size());  // strict turns: each live worker's 20 every pass
    } else {
      // Batches come in the order they are ready, so on a loaded machine the first 20 can all
      // be one worker's (seen here on 2 busy cores); the other live worker must still deliver.
      for (int i = 0; i < 2000 && counts.size() < d.all.size(); ++i) {
        for (auto& s : datatest::samples_of(*p.next()))
          ++counts[s];
      }
      EXPECT_EQ(counts.size(), d.all.size());
    }
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
      for (auto& s : datatest::samples_of(*b))
        seen.push_back(s);
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

// A process of a multi-process job (RankSlice) hands its devices exactly the shares that the
// same ranks get in one process driving every rank: 3 processes x 2 ranks against 6 ranks.
TEST(Pipeline, RankSliceGivesTheSharesOfTheSameRanksInOneProcess) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {31, 7});  // partial last batch
  const auto options = [](int local, RankSlice slice) {
    PipelineOptions o;
    o.batch_size = 12;
    o.devices.assign(static_cast<std::size_t>(local), Place::host());
    o.num_workers = 2;
    o.deterministic = true;
    o.mode = PipelineMode::Epochs;
    o.slice = slice;
    return o;
  };
  Pipeline whole(norm_source(d, shape), options(6, {}));
  std::vector<std::unique_ptr<Pipeline>> parts;
  for (int p = 0; p < 3; ++p)
    parts.push_back(std::make_unique<Pipeline>(norm_source(d, shape), options(2, {6, 2 * p})));
  int batches = 0;
  while (auto w = whole.next()) {
    ++batches;
    for (int p = 0; p < 3; ++p) {
      auto b = parts[static_cast<std::size_t>(p)]->next();
      ASSERT_TRUE(b.has_value());
      ASSERT_EQ(b->devices.size(), 2u);
      EXPECT_EQ(b->global_size, w->global_size);
      for (int i = 0; i < 2; ++i) {
        const DeviceBatch& mine = b->devices[static_cast<std::size_t>(i)];
        const DeviceBatch& same = w->devices[static_cast<std::size_t>(2 * p + i)];
        EXPECT_EQ(mine.local_offset, same.local_offset);
        EXPECT_EQ(mine.local_size, same.local_size);
        EXPECT_EQ(mine.label.to_vector<float>(), same.label.to_vector<float>());
        EXPECT_EQ(mine.dense.to_vector<float>(), same.dense.to_vector<float>());
        EXPECT_EQ(mine.sparse[0].values().to_vector<std::uint32_t>(),
                  same.sparse[0].values().to_vector<std::uint32_t>());
      }
    }
  }
  EXPECT_EQ(batches, 4);  // 38 samples: three of 12 and one of 2
  for (auto& p : parts)
    EXPECT_FALSE(p->next().has_value());
  EXPECT_THROW(Pipeline(norm_source(d, shape), options(2, {6, 5})), Error);
  EMBER_EXPECT_THROW_WITH(Pipeline(norm_source(d, shape),
                                   [&] {
                                     auto o = options(2, {5, 0});
                                     o.batch_size = 12;
                                     return o;
                                   }()),
                          ConfigError, "multiple of the 5");
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

// Which samples a batch holds depends on the shards alone: one reader thread or one per shard
// read the same batches in the same order, and so does any number between, which takes from
// whichever shard the collector needs next.
TEST(Pipeline, TheBatchesDependOnTheShardsNotOnTheReaderThreads) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {50, 13, 77, 31, 64, 9, 1});
  const auto source = norm_source(d, shape);
  for (PipelineMode mode : {PipelineMode::Epochs, PipelineMode::Repeat}) {
    PipelineOptions o;
    o.batch_size = 16;
    o.num_workers = 7;  // seven shards, one thread each
    o.deterministic = true;
    o.mode = mode;
    o.num_epochs = 3;
    const auto one_per_shard = run_batches(source, o, 60);
    ASSERT_GE(one_per_shard.size(), 30u);
    for (int threads : {1, 2, 3, 6}) {
      o.reader_threads = threads;
      SCOPED_TRACE(::testing::Message()
                   << threads << " reader threads, mode " << static_cast<int>(mode));
      {
        Pipeline p(source, o);
        EXPECT_EQ(p.num_shards(), 7);
        EXPECT_EQ(p.num_workers(), threads);
      }
      EXPECT_EQ(run_batches(source, o, 60), one_per_shard);
    }
    // The default: a shard per file, whatever the machine's cores.
    o.num_workers = 0;
    o.reader_threads = 0;
    Pipeline p(source, o);
    EXPECT_EQ(p.num_shards(), 7);
    EXPECT_EQ(p.num_workers(),
              std::min(7, default_num_workers(static_cast<int>(std::thread::hardware_concurrency()),
                                              false)));
    EXPECT_EQ(run_batches(source, o, 60), one_per_shard);
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
        for (int i = 0; i < taken; ++i)
          kept = p.next();
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
  while (auto b = p.next())
    held.push_back(std::move(*b));
  ASSERT_EQ(held.size(), 16u);
  std::vector<Sample> seen;
  for (const auto& b : held) {
    for (auto& s : datatest::samples_of(b))
      seen.push_back(s);
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
    for (auto& s : datatest::samples_of(*b))
      seen.push_back(s);
  }
  EXPECT_EQ(seen, std::vector<Sample>(d.all.begin() + 1, d.all.end()));
  EXPECT_EQ(p.stats().dropped, 1);
}

TEST(Pipeline, RawEpochsShuffleChunksAndMergeThePartialOne) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = datatest::one_hot_shape(3, {2, 3}, 50);
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
    for (std::size_t k = 0; k < s.slots.size(); ++k)
      s.slots[k][0] += 50 * static_cast<std::int64_t>(k);
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
      for (auto& s : datatest::samples_of(*b))
        seen.push_back(s);
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
  testing::ScratchDir dir;
  const auto source = int_raw_source(dir / "r.bin");
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
    for (auto& s : datatest::samples_of(*b))
      ++seen[s.slots];
  }
  int total = 0;
  for (const auto& [k, n] : seen)
    total += n;
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

// ---- memory taken up front, and the counters -------------------------------------------------

// Batches a run of Epochs mode hands out per epoch, from the Norm shards (worker w reads files
// w, w+W, ...; a shard's samples make full batches and one partial one, and the collector
// gathers the partial ones into as few batches as they fill).
struct EpochShape {
  std::int64_t full = 0;    // full batches straight from the workers
  std::int64_t merged = 0;  // batches gathered from partial ones
};
EpochShape expected_epoch(const std::vector<std::int64_t>& counts, int workers, std::int64_t B) {
  EpochShape e;
  std::int64_t remainders = 0;
  for (int w = 0; w < workers; ++w) {
    std::int64_t shard = 0;
    for (std::size_t f = static_cast<std::size_t>(w); f < counts.size();
         f += static_cast<std::size_t>(workers)) {
      shard += counts[f];
    }
    e.full += shard / B;
    remainders += shard % B;
  }
  e.merged = (remainders + B - 1) / B;
  return e;
}

// The timers are sums of waits: never negative, and no thread waits longer than the run.
void expect_timers_within(const PipelineStats& s, double elapsed) {
  for (double t : {s.collector_input_wait_seconds, s.collector_output_wait_seconds, s.merge_seconds,
                   s.consumer_wait_seconds}) {
    EXPECT_GE(t, 0.0);
    EXPECT_LE(t, elapsed);
  }
  EXPECT_GE(s.worker_output_wait_seconds, 0.0);
  EXPECT_LE(s.worker_output_wait_seconds, elapsed * s.workers);
  // Host pipelines make no device copies.
  EXPECT_EQ(s.copy_issue_seconds, 0.0);
  EXPECT_EQ(s.copy_wait_seconds, 0.0);
  EXPECT_EQ(s.device_slots, 0);
  EXPECT_EQ(s.late_device_slots, 0);
  EXPECT_EQ(s.slot_reuse_waits, 0);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(PipelineMemory, SteadyRepeatRunMakesNoLateHostBatches) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {37, 300, 1, 129, 50});
  for (int workers : {1, 3, 5}) {
    for (int depth : {1, 3}) {
      PipelineOptions o;
      o.batch_size = 16;
      o.num_workers = workers;
      o.prefetch_depth = depth;
      o.mode = PipelineMode::Repeat;
      const auto t0 = std::chrono::steady_clock::now();
      Pipeline p(norm_source(d, shape), o);
      const std::int64_t reserved = steady_host_batches(workers, false, depth, o.mode);
      // Made before any thread ran.
      EXPECT_EQ(p.stats().reserved_host_batches, reserved);
      std::int64_t samples = 0;
      for (int i = 0; i < 60; ++i) {
        auto b = p.next();  // held one at a time, like a training loop
        ASSERT_TRUE(b.has_value());
        samples += b->global_size;
      }
      const PipelineStats s = p.stats();
      SCOPED_TRACE(::testing::Message() << workers << " workers, depth " << depth);
      EXPECT_EQ(s.workers, workers);
      EXPECT_EQ(s.batches, 60);
      EXPECT_EQ(s.samples, samples);
      EXPECT_EQ(samples, 60 * 16);
      EXPECT_GE(s.samples_read, s.samples);
      EXPECT_EQ(s.reserved_host_batches, reserved);
      EXPECT_EQ(s.late_host_batches, 0);
      EXPECT_EQ(s.host_batches, reserved);
      EXPECT_EQ(s.host_batch_bytes, BatchBufferPlan(p.layout(), 16, 16).total_bytes);
      EXPECT_GE(s.host_batch_seconds, 0.0);
      EXPECT_EQ(s.merged_batches, 0) << "Norm workers fill every batch when repeating";
      expect_timers_within(s, seconds_since(t0));
    }
  }
}

// A shard per thread (num_workers), and fewer threads than shards (the default six shards, a
// file each, read by 1, 2 or 4 threads): the readers hold no more than their lookahead, in either
// order, through epochs whose shards end at different times.
TEST(PipelineMemory, EpochsWithPartialBatchesMakeNoLateHostBatches) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const std::vector<std::int64_t> counts = {37, 300, 1, 129, 50, 7};
  const Dataset d = write_dataset(dir.path(), rng, shape, counts);
  constexpr std::int64_t B = 16;
  constexpr int kEpochs = 3;
  struct Readers {
    int num_workers, reader_threads, shards, threads;
  };
  for (const Readers r :
       {Readers{1, 0, 1, 1}, Readers{2, 0, 2, 2}, Readers{3, 0, 3, 3}, Readers{6, 0, 6, 6},
        Readers{0, 1, 6, 1}, Readers{0, 2, 6, 2}, Readers{0, 4, 6, 4}}) {
    for (bool deterministic : {false, true}) {
      PipelineOptions o;
      o.batch_size = B;
      o.num_workers = r.num_workers;
      o.reader_threads = r.reader_threads;
      o.prefetch_depth = 2;
      o.mode = PipelineMode::Epochs;
      o.num_epochs = kEpochs;
      o.deterministic = deterministic;
      const auto t0 = std::chrono::steady_clock::now();
      Pipeline p(norm_source(d, shape), o);
      std::int64_t batches = 0, samples = 0, ends = 0;
      while (auto b = p.next()) {
        ++batches;
        samples += b->global_size;
        ends += b->end_of_epoch ? 1 : 0;
      }
      const EpochShape e = expected_epoch(counts, r.shards, B);
      const PipelineStats s = p.stats();
      SCOPED_TRACE(::testing::Message() << r.shards << " shards, " << r.threads
                                        << " threads, deterministic " << deterministic);
      EXPECT_EQ(s.shards, r.shards);
      EXPECT_EQ(s.workers, r.threads);
      EXPECT_EQ(ends, kEpochs);
      EXPECT_EQ(s.batches, batches);
      EXPECT_EQ(batches, kEpochs * (e.full + e.merged));
      EXPECT_EQ(s.samples, samples);
      EXPECT_EQ(samples, kEpochs * static_cast<std::int64_t>(d.all.size()));
      EXPECT_EQ(s.samples_read, samples) << "Epochs mode reads every sample once per epoch";
      EXPECT_EQ(s.merged_batches, kEpochs * e.merged);
      EXPECT_EQ(s.reserved_host_batches, steady_host_batches(r.threads, false, 2, o.mode));
      EXPECT_EQ(s.late_host_batches, 0);
      EXPECT_EQ(s.host_batches, s.reserved_host_batches);
      expect_timers_within(s, seconds_since(t0));
    }
  }
}

TEST(PipelineMemory, RawPartialChunksWhenRepeatingMakeNoLateHostBatches) {
  testing::ScratchDir dir;
  const auto source = int_raw_source(dir / "r.bin");  // chunks of 8, 8, 8 and 1
  PipelineOptions o;
  o.batch_size = 8;
  o.num_workers = 3;
  o.prefetch_depth = 1;
  Pipeline p(source, o);
  for (int i = 0; i < 50; ++i) {
    auto b = p.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->global_size, 8);
  }
  const PipelineStats s = p.stats();
  EXPECT_GT(s.merged_batches, 0) << "the one-sample chunks must have been gathered";
  EXPECT_EQ(s.late_host_batches, 0);
  EXPECT_EQ(s.host_batches, steady_host_batches(3, false, 1, PipelineMode::Repeat));
}

TEST(PipelineMemory, AConsumerThatSaysItHoldsTwoGetsThemUpFront) {
  // A trainer that takes the next batch before it drops the one it trains on holds two.
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {37, 300, 1, 129, 50});
  for (int depth : {1, 3}) {
    PipelineOptions o;
    o.batch_size = 16;
    o.num_workers = 2;
    o.prefetch_depth = depth;
    o.consumer_holds = 2;
    Pipeline p(norm_source(d, shape), o);
    const std::int64_t reserved = steady_host_batches(2, false, depth, o.mode, 2);
    EXPECT_EQ(reserved, steady_host_batches(2, false, depth, o.mode) + 1);
    datatest::take_two_at_a_time(p, 60);
    // The queue refills while the two are held.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const PipelineStats s = p.stats();
    SCOPED_TRACE(::testing::Message() << "depth " << depth);
    EXPECT_EQ(s.reserved_host_batches, reserved);
    EXPECT_EQ(s.late_host_batches, 0);
    EXPECT_EQ(s.host_batches, reserved);
  }
  PipelineOptions bad;
  bad.batch_size = 16;
  bad.consumer_holds = 0;
  try {
    Pipeline p(norm_source(d, shape), bad);
    ADD_FAILURE() << "a consumer holding no batch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("consumer holds at least 1 batch at a time, got 0"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineMemory, AConsumerHoldingBatchesMakesLateOnesAndTheyAreReused) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {40, 40});
  PipelineOptions o;
  o.batch_size = 8;
  o.num_workers = 2;
  o.prefetch_depth = 2;
  o.deterministic = true;  // batch i from shard i mod 2: each file read equally often
  const auto t0 = std::chrono::steady_clock::now();
  Pipeline p(norm_source(d, shape), o);
  constexpr std::int64_t kHeld = 6;
  std::vector<Batch> held;
  for (std::int64_t i = 0; i < kHeld; ++i)
    held.push_back(*p.next());
  // Every stage fills up behind the held batches: the readers' lookahead (two per thread), the
  // collector's one, the prefetch queue's two. The reservation foresaw one batch at the
  // consumer, one gathering partial ones and one of the shard the collector waits for (both
  // unused here: the collector waits for room, and each shard has its two queued): kHeld - 3
  // more are made, late, and not one more.
  const std::int64_t expected_late = kHeld - 3;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p.stats().late_host_batches < expected_late &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Settled: the workers are blocked, nothing more can be asked of the pool.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  PipelineStats s = p.stats();
  EXPECT_EQ(s.late_host_batches, expected_late);
  EXPECT_EQ(s.host_batches, s.reserved_host_batches + s.late_host_batches);
  // They stayed valid while the pipeline ran ahead.
  std::vector<Sample> seen;
  for (const Batch& b : held) {
    for (auto& smp : datatest::samples_of(b))
      seen.push_back(smp);
  }
  held.clear();
  for (int i = 0; i < 40; ++i) {
    auto b = p.next();
    ASSERT_TRUE(b);
    for (auto& smp : datatest::samples_of(*b))
      seen.push_back(smp);
  }
  // 46 batches of 8, 23 from each worker's 40-sample file: each sample 4 or 5 times.
  std::map<Sample, int> counts;
  for (const auto& smp : seen)
    ++counts[smp];
  EXPECT_EQ(counts.size(), d.all.size());
  for (const auto& [smp, n] : counts) {
    EXPECT_GE(n, 4);
    EXPECT_LE(n, 5);
  }
  s = p.stats();
  EXPECT_EQ(s.late_host_batches, expected_late) << "released late batches are reused";
  EXPECT_EQ(s.batches, kHeld + 40);
  expect_timers_within(s, seconds_since(t0));
}

TEST(PipelineMemory, WaitTimersSeeABlockedPipeline) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = small_shape();
  const Dataset d = write_dataset(dir.path(), rng, shape, {100, 100, 100});
  PipelineOptions o;
  o.batch_size = 10;
  o.num_workers = 3;
  o.prefetch_depth = 1;
  const auto t0 = std::chrono::steady_clock::now();
  Pipeline p(norm_source(d, shape), o);
  // Wait until the readers have stopped (every queue full): then the workers and the collector
  // are waiting for room.
  std::int64_t read = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::int64_t now = p.stats().samples_read;
    if (now == read && now > 0) break;
    read = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(p.next());
  const PipelineStats s = p.stats();
  EXPECT_GT(s.collector_output_wait_seconds, 0.0) << "the prefetch queue was full";
  EXPECT_GT(s.worker_output_wait_seconds, 0.0) << "the workers' queues were full";
  EXPECT_EQ(s.late_host_batches, 0);
  expect_timers_within(s, seconds_since(t0));
}

TEST(PipelineMemory, GpuPipelinesLeaveTwoCoresByDefault) {
  EXPECT_EQ(default_num_workers(16, false), 16);
  EXPECT_EQ(default_num_workers(16, true), 14);
  EXPECT_EQ(default_num_workers(3, true), 1);
  EXPECT_EQ(default_num_workers(2, true), 1);
  EXPECT_EQ(default_num_workers(1, true), 1);
  EXPECT_EQ(default_num_workers(0, false), 1) << "hardware_concurrency() may report 0";
  EXPECT_EQ(default_num_workers(0, true), 1);
}

TEST(PipelineMemory, DefaultShardsAreEveryFileUpToACap) {
  EXPECT_EQ(default_num_shards(1), 1);
  EXPECT_EQ(default_num_shards(16), 16);
  EXPECT_EQ(default_num_shards(kMaxDefaultShards), kMaxDefaultShards);
  EXPECT_EQ(default_num_shards(kMaxDefaultShards + 1), kMaxDefaultShards);
  EXPECT_EQ(default_num_shards(0), 1) << "a source with no files still has one (empty) shard";
}

TEST(PipelineMemory, SteadyHostBatchesGrowWithWorkersAndDepth) {
  // Two per reader thread (its lookahead) whatever else; the prefetch queue counts only for
  // host pipelines; Epochs mode holds one more back.
  for (PipelineMode mode : {PipelineMode::Repeat, PipelineMode::Epochs}) {
    for (bool gpu : {false, true}) {
      EXPECT_EQ(steady_host_batches(5, gpu, 3, mode) - steady_host_batches(4, gpu, 3, mode), 2);
      EXPECT_EQ(steady_host_batches(4, gpu, 4, mode) - steady_host_batches(4, gpu, 3, mode),
                gpu ? 0 : 1);
    }
    EXPECT_EQ(steady_host_batches(4, false, 3, mode) - steady_host_batches(4, true, 3, mode), 4);
  }
  EXPECT_EQ(steady_host_batches(4, true, 3, PipelineMode::Epochs) -
                steady_host_batches(4, true, 3, PipelineMode::Repeat),
            1);
  EXPECT_THROW(steady_host_batches(0, true, 3, PipelineMode::Repeat), Error);
  EXPECT_THROW(steady_host_batches(2, true, 0, PipelineMode::Repeat), Error);
  // Each batch the consumer holds: a host batch for host pipelines, a device slot for GPUs.
  for (PipelineMode mode : {PipelineMode::Repeat, PipelineMode::Epochs}) {
    EXPECT_EQ(steady_host_batches(4, false, 3, mode, 3) - steady_host_batches(4, false, 3, mode),
              2);
    EXPECT_EQ(steady_host_batches(4, true, 3, mode, 3), steady_host_batches(4, true, 3, mode));
  }
  EXPECT_THROW(steady_host_batches(2, false, 3, PipelineMode::Repeat, 0), Error);
}

TEST(PipelineMemory, DeviceSlotsCoverTheQueueTheCollectorAndTheConsumer) {
  EXPECT_EQ(steady_device_slots(1, 1), 3);
  EXPECT_EQ(steady_device_slots(3, 1), 5);
  EXPECT_EQ(steady_device_slots(3, 2), 6);
  EXPECT_EQ(steady_device_slots(7, 4), 12);
  EXPECT_THROW(steady_device_slots(0, 1), Error);
  EXPECT_THROW(steady_device_slots(2, 0), Error);
}

}  // namespace
}  // namespace ember::data
