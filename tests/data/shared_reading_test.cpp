// Shared reading (key_exchange.hpp): N "processes" (pipelines in one test, their exchange a
// rendezvous of threads) each parse only their ranks' rows of every batch and swap keys; every
// one of them must hand its devices exactly what one process driving every rank hands the same
// ranks, for Norm (None and Sum, with dropped samples), Raw, Parquet (one-hot and multi-hot,
// SNAPPY and uncompressed, dictionary and PLAIN keys, row groups and pages that the batch does
// not divide), both modes and batches that end short, while parsing only about its share.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include "data/data_test_support.hpp"
#include "data/thread_exchange.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/key_exchange.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;

SampleShape shape_for(bool one_hot) {
  SampleShape shape;
  shape.label_dim = 1;
  shape.dense_dim = 2;
  shape.slots_per_input = {3, 2};
  shape.min_nnz = one_hot ? 1 : 0;
  shape.max_nnz = one_hot ? 1 : 3;
  shape.max_key = 100;
  return shape;
}

// Flips the checksum byte of record `k` of a Sum-mode Norm file: the reader drops that sample.
void break_checksum(const std::string& path, std::int64_t k) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::int64_t pos = 4 + 64 + 1;  // the header record
  for (std::int64_t r = 0;; ++r) {
    std::int32_t length = 0;
    f.seekg(pos);
    f.read(reinterpret_cast<char*>(&length), 4);
    pos += 4 + length;
    if (r == k) break;
    pos += 1;
  }
  f.seekg(pos);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(pos);
  f.write(&c, 1);
}

struct Case {
  std::string name;
  std::function<std::shared_ptr<DataSource>()> source;
  std::int64_t samples = 0;  // delivered per epoch
  std::int64_t dropped = 0;  // per epoch (broken checksums)
};

Case norm_case(const std::filesystem::path& dir, std::mt19937_64& rng, CheckMode check,
               const std::vector<std::int64_t>& counts, bool drops) {
  const SampleShape shape = shape_for(false);
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  std::int64_t total = 0, dropped = 0;
  for (std::size_t f = 0; f < counts.size(); ++f) {
    const std::string path = (dir / ("part" + std::to_string(f) + ".data")).string();
    datatest::write_norm(path, datatest::random_samples(rng, counts[f], shape), shape, check,
                         DType::U32);
    total += counts[f];
    if (drops && counts[f] > 40) {
      for (std::int64_t k : {3, 17, 40}) {
        break_checksum(path, k);
        --total;
        ++dropped;
      }
    }
    files.push_back(path);
  }
  const std::string list = (dir / "list.txt").string();
  write_file_list(list, files);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  return {cat("Norm ", check == CheckMode::Sum ? "Sum" : "None", drops ? " with drops" : ""),
          [=] { return std::make_shared<NormSource>(list, check, layout); }, total, dropped};
}

Case raw_case(const std::filesystem::path& dir, std::mt19937_64& rng, std::int64_t n) {
  const SampleShape shape = shape_for(true);
  std::filesystem::create_directories(dir);
  RawOptions raw = datatest::write_raw_dataset((dir / "raw.bin").string(), rng, shape, n);
  raw.shuffle = true;
  raw.seed = 7;
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  return {"Raw", [=] { return std::make_shared<RawSource>(raw, layout); }, n};
}

struct ParquetShape {
  bool multi_hot = false;
  parquet::Codec codec = parquet::Codec::Uncompressed;
  bool dictionary = true;
  std::int64_t group_rows = 50, page_rows = 7;
};

// Writes `counts` samples per file in HugeCTR's Parquet layout; returns the file list.
std::string write_parquet(const std::filesystem::path& dir, const std::vector<Sample>& samples,
                          const SampleShape& shape, const ParquetShape& pq,
                          const std::vector<std::int64_t>& counts) {
  std::filesystem::create_directories(dir);
  auto options = parquet::ParquetWriterOptions::with_default_names(shape.label_dim, shape.dense_dim,
                                                                   shape.total_slots());
  options.codec = pq.codec;
  options.dictionary = pq.dictionary;
  options.row_group_rows = pq.group_rows;
  options.page_rows = pq.page_rows;
  if (pq.multi_hot)
    options.slot_is_list.assign(static_cast<std::size_t>(shape.total_slots()), true);
  std::vector<parquet::WrittenFile> written;
  std::size_t next = 0;
  for (std::size_t f = 0; f < counts.size(); ++f) {
    const std::string path = (dir / ("part_" + std::to_string(f) + ".parquet")).string();
    parquet::ParquetWriter writer(path, options);
    for (std::int64_t i = 0; i < counts[f]; ++i, ++next) {
      const Sample& s = samples[next];
      std::vector<std::int32_t> nnz;
      std::vector<std::int64_t> keys;
      for (const auto& slot : s.slots) {
        nnz.push_back(static_cast<std::int32_t>(slot.size()));
        keys.insert(keys.end(), slot.begin(), slot.end());
      }
      writer.write(s.label, s.dense, nnz, keys);
    }
    writer.close();
    written.push_back({path, writer.rows()});
  }
  const std::string list = (dir / "_file_list.txt").string();
  parquet::write_parquet_layout(dir.string(), list, written, options);
  return list;
}

Case parquet_case(const std::filesystem::path& dir, std::mt19937_64& rng, const ParquetShape& pq,
                  const std::vector<std::int64_t>& counts) {
  const SampleShape shape = shape_for(!pq.multi_hot);
  std::int64_t total = 0;
  for (std::int64_t n : counts)
    total += n;
  const std::string list =
      write_parquet(dir, datatest::random_samples(rng, total, shape), shape, pq, counts);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  return {cat("Parquet ", pq.multi_hot ? "multi-hot" : "one-hot", " ", parquet::to_string(pq.codec),
              pq.dictionary ? " dictionary" : " PLAIN"),
          [=] {
            return std::make_shared<parquet::ParquetSource>(list, layout,
                                                            std::vector<std::int64_t>{});
          },
          total};
}

parquet::Codec snappy_if_written() {
  return parquet::codec_supported(parquet::Codec::Snappy) ? parquet::Codec::Snappy
                                                          : parquet::Codec::Uncompressed;
}

// `n` random samples of `shape` as one process parses them: written to a Norm file and read
// back into a batch of room for `capacity` samples.
std::unique_ptr<HostBatch> read_norm_batch(std::mt19937_64& rng, const SampleShape& shape,
                                           std::int64_t n, std::int64_t capacity) {
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  auto batch = std::make_unique<HostBatch>(layout, capacity);
  testing::ScratchDir dir;
  datatest::write_norm(dir / "f.data", datatest::random_samples(rng, n, shape), shape,
                       CheckMode::None, DType::U32);
  NormFileReader reader(layout, CheckMode::None);
  reader.open(dir / "f.data");
  EXPECT_EQ(reader.read(*batch), n);
  return batch;
}

PipelineOptions options_for(PipelineMode mode, int ranks, RankSlice slice, int workers) {
  PipelineOptions o;
  o.batch_size = 24;
  o.devices.assign(static_cast<std::size_t>(ranks), Place::host());
  o.num_workers = workers;
  o.deterministic = true;
  o.mode = mode;
  o.num_epochs = 2;
  o.slice = slice;
  o.prefetch_depth = 2;
  return o;
}

// What device `d` of a batch holds, keys included.
void expect_same_device(const DeviceBatch& got, const DeviceBatch& want) {
  EXPECT_EQ(got.local_offset, want.local_offset);
  EXPECT_EQ(got.local_size, want.local_size);
  EXPECT_EQ(got.label.to_vector<float>(), want.label.to_vector<float>());
  EXPECT_EQ(got.dense.to_vector<float>(), want.dense.to_vector<float>());
  ASSERT_EQ(got.sparse.size(), want.sparse.size());
  for (std::size_t i = 0; i < got.sparse.size(); ++i) {
    EXPECT_EQ(got.sparse[i].row_offsets().to_vector<std::int64_t>(),
              want.sparse[i].row_offsets().to_vector<std::int64_t>());
    EXPECT_EQ(got.sparse[i].values().to_vector<std::uint32_t>(),
              want.sparse[i].values().to_vector<std::uint32_t>());
  }
}

// `processes` pipelines of `ranks_each` ranks, made at once (their construction agrees on the
// worker count through the exchange).
std::vector<std::unique_ptr<Pipeline>> shared_pipelines(const Case& c, PipelineMode mode,
                                                        int processes, int ranks_each,
                                                        int workers) {
  return datatest::process_pipelines(processes, c.source, [&](int p) {
    return options_for(mode, ranks_each, {processes * ranks_each, p * ranks_each}, workers);
  });
}

TEST(SharedReading, EveryProcessGetsWhatOneProcessGivesItsRanks) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const std::vector<Case> cases = {
      norm_case(dir / "none", rng, CheckMode::None, {61, 0, 200, 7, 33}, false),
      norm_case(dir / "sum", rng, CheckMode::Sum, {130, 45, 9}, true),
      raw_case(dir / "raw", rng, 203),
      parquet_case(dir / "pq1", rng, {false, snappy_if_written(), true, 50, 7}, {130, 45, 9, 77}),
      parquet_case(dir / "pq2", rng, {false, parquet::Codec::Uncompressed, false, 37, 11},
                   {61, 200, 7}),
      parquet_case(dir / "pq3", rng, {true, snappy_if_written(), true, 29, 5}, {100, 33, 71}),
  };
  for (const Case& c : cases) {
    for (PipelineMode mode : {PipelineMode::Epochs, PipelineMode::Repeat}) {
      for (auto [processes, ranks_each, workers] :
           {std::tuple{2, 1, 1}, std::tuple{3, 2, 3}, std::tuple{3, 1, 2}}) {
        SCOPED_TRACE(cat(c.name, mode == PipelineMode::Epochs ? ", epochs" : ", repeat", ", ",
                         processes, " processes of ", ranks_each, " ranks, ", workers, " workers"));
        const int ranks = processes * ranks_each;
        Pipeline whole(c.source(), options_for(mode, ranks, {}, workers));
        auto parts = shared_pipelines(c, mode, processes, ranks_each, workers);
        const int limit = mode == PipelineMode::Repeat ? 25 : 1 << 20;
        std::int64_t delivered = 0;
        int batches = 0;
        for (; batches < limit; ++batches) {
          const std::optional<Batch> w = whole.next();
          for (int p = 0; p < processes; ++p) {
            const std::optional<Batch> b = parts[static_cast<std::size_t>(p)]->next();
            ASSERT_EQ(b.has_value(), w.has_value());
            if (!w) continue;
            ASSERT_EQ(b->global_size, w->global_size);
            EXPECT_EQ(b->end_of_epoch, w->end_of_epoch);
            for (int d = 0; d < ranks_each; ++d) {
              expect_same_device(b->devices[static_cast<std::size_t>(d)],
                                 w->devices[static_cast<std::size_t>(p * ranks_each + d)]);
            }
          }
          if (!w) break;
          delivered += w->global_size;
        }
        if (mode == PipelineMode::Epochs) EXPECT_EQ(delivered, 2 * c.samples);
        // Each process parsed about its share; together they parsed each sample about once.
        std::int64_t parsed = 0;
        for (const auto& p : parts) {
          const PipelineStats s = p->stats();
          parsed += s.samples_read;
          EXPECT_GT(s.samples_skipped, 0);
          EXPECT_LT(s.samples_read, s.samples_read + s.samples_skipped);
          if (mode == PipelineMode::Epochs) {
            EXPECT_EQ(s.samples_read + s.samples_skipped, delivered);
            // Every process verifies every checksum, and counts a drop once (a batch read
            // again whole forgets its first attempt).
            EXPECT_EQ(s.dropped, 2 * c.dropped);
            // Only batches that end short (one per worker and epoch) are read whole.
            EXPECT_LE(s.samples_read, delivered / processes + 2 * workers * 24 + 24);
          }
        }
        if (mode == PipelineMode::Epochs) {
          EXPECT_GE(parsed, delivered);
          EXPECT_LE(parsed, delivered + 2 * processes * (workers + 1) * 24);
        }
      }
    }
  }
}

// The Parquet reader itself: with a window, the window's rows come out as a whole read gives
// them and the others with room for the exchange's keys; the data pages of a flat column that
// hold only rows passed over are stepped over unopened (list columns walk their levels instead).
TEST(SharedReading, ParquetReaderDecodesTheWindowAndStepsOverPagesOfOtherRows) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const std::int64_t rows = 300, capacity = 40;
  const Share window{17, 9};
  int written = 0;
  for (bool multi_hot : {false, true}) {
    for (parquet::Codec codec : {parquet::Codec::Uncompressed, snappy_if_written()}) {
      for (bool dictionary : {true, false}) {
        SCOPED_TRACE(cat(multi_hot ? "multi-hot " : "one-hot ", parquet::to_string(codec),
                         dictionary ? " dictionary" : " PLAIN"));
        const SampleShape shape = shape_for(!multi_hot);
        const BatchLayout layout = datatest::layout_for(shape, DType::U32);
        std::vector<std::int64_t> reserved;  // per slot of every input
        for (const SparseInputLayout& input : layout.sparse)
          reserved.insert(reserved.end(), static_cast<std::size_t>(input.slot_num),
                          keys_reserved_per_row(input));
        const auto samples = datatest::random_samples(rng, rows, shape);
        const std::string list = write_parquet(dir / std::to_string(written++), samples, shape,
                                               {multi_hot, codec, dictionary, 70, 4}, {rows});
        const parquet::ParquetSource source(list, layout, {});
        const auto& file = source.files().at(0);
        ReadCounters counters;
        parquet::ParquetFileReader reader(layout, {}, &counters);
        reader.open(file.path, *file.metadata);
        std::int64_t row = 0, in_window = 0;
        while (!reader.done()) {
          HostBatch batch(layout, capacity);
          reader.set_window(window);
          ASSERT_EQ(reader.read(batch), std::min(capacity, rows - row));
          const auto got = datatest::samples_of(batch);
          for (std::int64_t r = 0; r < batch.size(); ++r) {
            const Sample& g = got[static_cast<std::size_t>(r)];
            if (r >= window.offset && r < window.offset + window.size) {
              EXPECT_EQ(g, samples[static_cast<std::size_t>(row + r)]) << "row " << row + r;
              ++in_window;
            } else {
              // Passed over: room for the keys the exchange brings (one a slot where the data
              // may be one-hot), their values not yet set.
              ASSERT_EQ(g.slots.size(), reserved.size());
              for (std::size_t k = 0; k < g.slots.size(); ++k)
                EXPECT_EQ(static_cast<std::int64_t>(g.slots[k].size()), reserved[k])
                    << "row " << row + r << " slot " << k;
            }
          }
          row += batch.size();
        }
        EXPECT_EQ(row, rows);
        EXPECT_EQ(in_window, 7 * window.size + 3);  // 7 full batches, then 20 rows
        EXPECT_EQ(counters.samples.load(), in_window);
        EXPECT_EQ(counters.skipped.load(), rows - in_window);
        EXPECT_EQ(reader.passed_over(), rows - in_window);
        // Pages of 4 rows (5 row groups: 80 pages a column), gaps of 31 rows between windows:
        // of the 234 rows passed over, at least half the pages of every flat column (label,
        // dense, and one-hot slots) are stepped over, and no page of a list column.
        const std::int64_t flat = 3 + (multi_hot ? 0 : 5);
        EXPECT_GE(reader.pages_stepped_over(), flat * (rows - in_window) / 4 / 2);
        EXPECT_LE(reader.pages_stepped_over(), flat * 80);
      }
    }
  }
}

// A process that stops early drains the exchanges its queue has room for, as the others do, so
// that destroying the pipelines one after the other in any order ends (no process waits for an
// exchange another one left).
TEST(SharedReading, PipelinesStoppedAfterTheSameBatchesEndInAnyOrder) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const Case c = norm_case(dir.path(), rng, CheckMode::None, {300, 300}, false);
  for (int taken : {0, 1, 5}) {
    auto parts = shared_pipelines(c, PipelineMode::Repeat, 3, 1, 2);
    for (int i = 0; i < taken; ++i) {
      for (auto& p : parts)
        ASSERT_TRUE(p->next().has_value());
    }
    parts[1].reset();
    parts[2].reset();
    parts[0].reset();
  }
}

TEST(SharedReading, ProcessesWithDifferentBatchesAreADataError) {
  auto rng = testing::make_rng();
  const SampleShape shape = shape_for(false);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  auto hub = std::make_shared<ThreadRendezvous>(2);
  std::vector<std::future<void>> done;
  for (int p = 0; p < 2; ++p) {
    done.push_back(std::async(std::launch::async, [&, p] {
      ThreadExchange exchange(hub, p);
      HostBatch batch(layout, 8);
      batch.add_rows_parsed_elsewhere(8);
      // Process 1 thinks the batch came from other readers.
      exchange_batch_keys(batch, {p * 4, 4}, {0, 8, p == 0 ? 2 : 3}, exchange);
    }));
  }
  for (auto& f : done)
    EMBER_EXPECT_THROW_WITH(f.get(), DataError, "the processes read different batches");
}

// Windows whose rows hold any key count (a count per row in the message), one key each
// (one-hot: one count for the window), two each, and none at all; with 1, 2 and 4 processes,
// and with buffers kept from batch to batch.
// Rows another process parses get room for one key a slot where the data may be one-hot, the
// fixed count where every slot of a fixed-length input has the same, and none otherwise; the
// rows after them follow on, so a one-hot window's keys are parsed where the whole batch has
// them (the key exchange then rewrites no offsets and moves no keys).
TEST(SharedReading, RowsParsedElsewhereGetRoomForTheKeysTheyWillHold) {
  EXPECT_EQ(keys_reserved_per_row({"a", 3, 3, 1, {}}), 1);
  EXPECT_EQ(keys_reserved_per_row({"a", 3, 40, 40, {}}), 1);
  EXPECT_EQ(keys_reserved_per_row({"a", 2, 4, 2, {2, 2}}), 2);
  EXPECT_EQ(keys_reserved_per_row({"a", 2, 3, 2, {1, 2}}), 0);
  EXPECT_EQ(keys_reserved_per_row({"a", 5, 2, 1, {}}), 0);  // fewer keys a sample than slots

  BatchLayout layout;
  layout.dense_dim = 1;
  layout.sparse = {{"a", 3, 6, 2, {}}, {"b", 2, 4, 2, {2, 2}}};
  HostBatch batch(layout, 4);
  batch.add_rows_parsed_elsewhere(1);
  // One sample parsed here: 2 + 0 + 1 keys in "a", 2 + 2 in "b".
  const std::int64_t n = batch.size();
  std::int64_t* a = batch.row_offsets(0);
  std::int64_t* b = batch.row_offsets(1);
  a[n * 3 + 1] = a[n * 3] + 2;
  a[n * 3 + 2] = a[n * 3 + 1];
  a[n * 3 + 3] = a[n * 3 + 2] + 1;
  b[n * 2 + 1] = b[n * 2] + 2;
  b[n * 2 + 2] = b[n * 2 + 1] + 2;
  batch.set_size(n + 1);
  batch.add_rows_parsed_elsewhere(2);
  EXPECT_EQ(std::vector<std::int64_t>(a, a + 13),
            (std::vector<std::int64_t>{0, 1, 2, 3, 5, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(std::vector<std::int64_t>(b, b + 9),
            (std::vector<std::int64_t>{0, 2, 4, 6, 8, 10, 12, 14, 16}));
  EXPECT_EQ(batch.nnz(0), 12);
  EXPECT_EQ(batch.nnz(1), 16);
}

// The pass that says whether every row holds the same key count: right for one-hot, fixed and
// multi-hot rows and for any window, kept until the batch changes.
TEST(SharedReading, UniformRowKeysAreFoundOnceAndForgottenWhenTheBatchChanges) {
  auto rng = testing::make_rng();
  for (const auto& [min_nnz, max_nnz] : {std::pair{1, 1}, {2, 2}, {0, 3}, {0, 0}}) {
    SampleShape shape = shape_for(false);
    shape.min_nnz = min_nnz;
    shape.max_nnz = max_nnz;
    const BatchLayout layout = datatest::layout_for(shape, DType::U32);
    for (std::int64_t n : {1, 7, 1023}) {
      SCOPED_TRACE(cat("nnz ", min_nnz, "..", max_nnz, ", ", n, " samples"));
      const auto read = read_norm_batch(rng, shape, n, 2 * n);
      HostBatch& batch = *read;
      Share last{-1, -1};
      for (const Share w : {Share{0, n}, Share{n / 2, n - n / 2}, Share{n - 1, 1}, Share{0, 0}}) {
        // Only the last window's answer is kept.
        if (w.offset != last.offset || w.size != last.size) {
          EXPECT_EQ(batch.known_uniform_row_keys(w.offset, w.size), nullptr);
        }
        last = w;
        const std::vector<std::int64_t> got = batch.uniform_row_keys(w.offset, w.size);
        ASSERT_EQ(got.size(), 2u);
        for (int i = 0; i < 2; ++i) {
          // A plain reference: the counts of the window's rows.
          const std::int64_t slots = layout.sparse[static_cast<std::size_t>(i)].slot_num;
          const std::int64_t* off = batch.row_offsets(i);
          std::set<std::int64_t> counts;
          for (std::int64_t r = w.offset * slots; r < (w.offset + w.size) * slots; ++r)
            counts.insert(off[r + 1] - off[r]);
          const std::int64_t want =
              counts.empty() ? 0 : (counts.size() == 1 ? *counts.begin() : -1);
          EXPECT_EQ(got[static_cast<std::size_t>(i)], want) << "input " << i;
          if (min_nnz == max_nnz && w.size > 0) {
            EXPECT_EQ(want, min_nnz);
          }
        }
        ASSERT_NE(batch.known_uniform_row_keys(w.offset, w.size), nullptr);
        EXPECT_EQ(*batch.known_uniform_row_keys(w.offset, w.size), got);
      }
      batch.uniform_row_keys(0, n);
      batch.append(batch, 0, 1);
      EXPECT_EQ(batch.known_uniform_row_keys(0, n), nullptr);
      batch.uniform_row_keys(0, n);
      batch.set_size(n);
      EXPECT_EQ(batch.known_uniform_row_keys(0, n), nullptr);
      batch.uniform_row_keys(0, n);
      batch.add_rows_parsed_elsewhere(1);
      EXPECT_EQ(batch.known_uniform_row_keys(0, n), nullptr);
      batch.note_uniform_row_keys(0, n, {5, 6});
      EXPECT_EQ(*batch.known_uniform_row_keys(0, n), (std::vector<std::int64_t>{5, 6}));
      batch.forget_row_keys();
      EXPECT_EQ(batch.known_uniform_row_keys(0, n), nullptr);
      batch.uniform_row_keys(0, 1);
      batch.clear();
      EXPECT_EQ(batch.known_uniform_row_keys(0, 1), nullptr);
    }
  }
}

TEST(SharedReading, KeysOfEveryWindowComeBackInSampleOrder) {
  auto rng = testing::make_rng();
  for (const auto& [min_nnz, max_nnz] : {std::pair{0, 3}, {1, 1}, {2, 2}, {0, 0}}) {
    SampleShape shape = shape_for(false);
    shape.min_nnz = min_nnz;
    shape.max_nnz = max_nnz;
    const BatchLayout layout = datatest::layout_for(shape, DType::U32);
    for (std::int64_t n : {1, 7, 30}) {
      // The whole batch, as one process would parse it.
      const auto read = read_norm_batch(rng, shape, n, n);
      const HostBatch& whole = *read;
      for (int processes : {1, 2, 4}) {
        auto hub = std::make_shared<ThreadRendezvous>(processes);
        std::vector<std::future<std::vector<Sample>>> got;
        for (int p = 0; p < processes; ++p) {
          got.push_back(std::async(std::launch::async, [&, p] {
            const Share w = process_window(n, {processes, p}, 1);
            HostBatch mine(layout, n);
            mine.add_rows_parsed_elsewhere(w.offset);
            mine.append(whole, w.offset, w.offset + w.size);
            mine.add_rows_parsed_elsewhere(n - w.offset - w.size);
            ThreadExchange exchange(hub, p);
            KeyExchangeBuffers buffers;
            exchange_batch_keys(mine, w, {0, n, 1}, exchange, &buffers);
            // Again over the same buffers (the collector's next batch): the same keys.
            exchange_batch_keys(mine, w, {1, n, 1}, exchange, &buffers);
            return datatest::samples_of(mine);
          }));
        }
        const std::vector<Sample> want = datatest::samples_of(whole);
        for (int p = 0; p < processes; ++p) {
          std::vector<Sample> g = got[static_cast<std::size_t>(p)].get();
          ASSERT_EQ(g.size(), want.size());
          const Share w = process_window(n, {processes, p}, 1);
          for (std::int64_t r = 0; r < n; ++r) {
            // Keys everywhere; label and dense in this process's rows only.
            EXPECT_EQ(g[static_cast<std::size_t>(r)].slots,
                      want[static_cast<std::size_t>(r)].slots);
            if (r >= w.offset && r < w.offset + w.size)
              EXPECT_EQ(g[static_cast<std::size_t>(r)], want[static_cast<std::size_t>(r)]);
          }
        }
      }
    }
  }
}

// With the ranks gathering the keys (one rank a process here), a one-hot batch that splits
// evenly stops after the counts: the offsets are the whole batch's and each process's own block
// of keys is in place, so the blocks of every process, side by side, are the whole batch's keys.
// Anything else (multi-hot rows, a batch that does not split) is exchanged whole as before.
TEST(SharedReading, RanksGatherOneHotKeysInEqualBlocks) {
  auto rng = testing::make_rng();
  for (const auto& [min_nnz, max_nnz] : {std::pair{1, 1}, {0, 3}, {2, 2}}) {
    SampleShape shape = shape_for(false);
    shape.min_nnz = min_nnz;
    shape.max_nnz = max_nnz;
    const BatchLayout layout = datatest::layout_for(shape, DType::U32);
    const bool one_hot = min_nnz == 1 && max_nnz == 1;
    for (std::int64_t n : {1, 7, 24, 30}) {
      const auto read = read_norm_batch(rng, shape, n, n);
      const HostBatch& whole = *read;
      for (int processes : {2, 3, 4}) {
        SCOPED_TRACE(
            cat("nnz ", min_nnz, "..", max_nnz, ", ", n, " samples, ", processes, " processes"));
        auto hub = std::make_shared<ThreadRendezvous>(processes);
        std::vector<std::unique_ptr<HostBatch>> mine;
        for (int p = 0; p < processes; ++p)
          mine.push_back(std::make_unique<HostBatch>(layout, n));
        std::vector<std::future<bool>> left;
        for (int p = 0; p < processes; ++p) {
          left.push_back(std::async(std::launch::async, [&, p] {
            HostBatch& b = *mine[static_cast<std::size_t>(p)];
            const Share w = process_window(n, {processes, p}, 1);
            b.add_rows_parsed_elsewhere(w.offset);
            b.append(whole, w.offset, w.offset + w.size);
            b.add_rows_parsed_elsewhere(n - w.offset - w.size);
            ThreadExchange exchange(hub, p);
            return exchange_batch_keys(b, w, {0, n, 1}, exchange, nullptr, processes);
          }));
        }
        const bool want_left = one_hot && n % processes == 0;
        for (int p = 0; p < processes; ++p)
          EXPECT_EQ(left[static_cast<std::size_t>(p)].get(), want_left);
        for (int i = 0; i < whole.num_inputs(); ++i) {
          const std::int64_t rows = n * layout.sparse[static_cast<std::size_t>(i)].slot_num;
          const std::vector<std::int64_t> want_offsets(whole.row_offsets(i),
                                                       whole.row_offsets(i) + rows + 1);
          const auto* want_keys = whole.values_as<std::uint32_t>(i);
          std::vector<std::uint32_t> side_by_side;
          for (int p = 0; p < processes; ++p) {
            const HostBatch& b = *mine[static_cast<std::size_t>(p)];
            EXPECT_EQ(std::vector<std::int64_t>(b.row_offsets(i), b.row_offsets(i) + rows + 1),
                      want_offsets);
            const auto* keys = b.values_as<std::uint32_t>(i);
            if (!want_left) {
              EXPECT_EQ(std::vector<std::uint32_t>(keys, keys + whole.nnz(i)),
                        std::vector<std::uint32_t>(want_keys, want_keys + whole.nnz(i)));
              continue;
            }
            const std::int64_t block = whole.nnz(i) / processes;
            side_by_side.insert(side_by_side.end(), keys + p * block, keys + (p + 1) * block);
          }
          if (want_left) {
            EXPECT_EQ(side_by_side,
                      std::vector<std::uint32_t>(want_keys, want_keys + whole.nnz(i)));
          }
        }
      }
    }
  }
}

// The same through pipelines: every batch a process hands out with keys_from_ranks holds the
// whole batch's offsets and its own block of keys, which with the other processes' blocks make
// the keys one process gives; its other batches are whole. Only host ranks one to a process.
TEST(SharedReading, PipelinesLeaveOneHotKeysToTheRanks) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const std::vector<Case> cases = {
      raw_case(dir / "raw", rng, 203),
      parquet_case(dir / "pq1", rng, {false, parquet::Codec::Uncompressed, true, 50, 7},
                   {130, 45, 9, 77}),
      parquet_case(dir / "pq3", rng, {true, parquet::Codec::Uncompressed, true, 29, 5},
                   {100, 33, 71}),
  };
  for (const Case& c : cases) {
    for (int processes : {2, 3}) {
      SCOPED_TRACE(cat(c.name, ", ", processes, " processes"));
      Pipeline whole(c.source(), options_for(PipelineMode::Epochs, processes, {}, 2));
      const auto parts = datatest::process_pipelines(processes, c.source, [&](int p) {
        PipelineOptions o = options_for(PipelineMode::Epochs, 1, {processes, p}, 2);
        o.ranks_gather_keys = true;
        return o;
      });
      std::int64_t left_to_ranks = 0, whole_batches = 0;
      for (;;) {
        const std::optional<Batch> w = whole.next();
        const std::vector<std::optional<Batch>> b = datatest::next_of_each(parts);
        if (!w) break;
        const bool left = b.front()->devices.front().keys_from_ranks;
        for (int p = 0; p < processes; ++p) {
          const DeviceBatch& got = b[static_cast<std::size_t>(p)]->devices.front();
          const DeviceBatch& want = w->devices[static_cast<std::size_t>(p)];
          EXPECT_EQ(got.keys_from_ranks, left);
          EXPECT_EQ(got.label.to_vector<float>(), want.label.to_vector<float>());
          if (!left) expect_same_device(got, want);
        }
        const bool one_hot = c.name.find("multi-hot") == std::string::npos;
        if (!left) {
          // One-hot batches are exchanged whole only where they do not split.
          if (one_hot) {
            EXPECT_NE(w->global_size % processes, 0);
          }
          ++whole_batches;
          continue;
        }
        ++left_to_ranks;
        EXPECT_EQ(w->global_size % processes, 0);
        for (std::size_t i = 0; i < w->devices.front().sparse.size(); ++i) {
          const CsrTensor& want = w->devices.front().sparse[i];
          const auto want_keys = want.values().to_vector<std::uint32_t>();
          const auto block = static_cast<std::int64_t>(want_keys.size()) / processes;
          std::vector<std::uint32_t> side_by_side;
          for (int p = 0; p < processes; ++p) {
            const CsrTensor& got = b[static_cast<std::size_t>(p)]->devices.front().sparse[i];
            EXPECT_EQ(got.row_offsets().to_vector<std::int64_t>(),
                      want.row_offsets().to_vector<std::int64_t>());
            const auto keys = got.values().to_vector<std::uint32_t>();
            ASSERT_EQ(keys.size(), want_keys.size());
            side_by_side.insert(side_by_side.end(), keys.begin() + p * block,
                                keys.begin() + (p + 1) * block);
          }
          EXPECT_EQ(side_by_side, want_keys);
        }
      }
      const bool one_hot = c.name.find("multi-hot") == std::string::npos;
      EXPECT_EQ(left_to_ranks > 0, one_hot);
      EXPECT_EQ(whole_batches > 0, !one_hot || c.samples % 24 % processes != 0);
    }
  }
  // Host ranks sharing one process's batch cannot each gather into it.
  PipelineOptions o = options_for(PipelineMode::Epochs, 2, {4, 0}, 1);
  o.exchange = std::make_shared<ThreadExchange>(std::make_shared<ThreadRendezvous>(2), 0);
  o.ranks_gather_keys = true;
  EXPECT_THROW(Pipeline(cases.front().source(), o), Error);
}

// A message whose one-count-for-the-window disagrees with its keys is a DataError, not a
// batch with wrong offsets.
TEST(SharedReading, AMessageWhoseUniformCountLiesIsADataError) {
  SampleShape shape = shape_for(true);
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  auto rng = testing::make_rng();
  const std::int64_t n = 8;
  const auto read = read_norm_batch(rng, shape, n, n);
  HostBatch& whole = *read;
  // Both processes receive process 1's message with its count for every row (after the 5
  // header values and the key count) raised from 1: to 2 (more keys than sent), or far past the
  // keys. Every process reads the same messages, so each one stops at the same check, before
  // any key moves (none is left waiting in the keys' exchange).
  class Tampering final : public ProcessExchange {
   public:
    Tampering(ProcessExchange& inner, std::int64_t count) : inner_(inner), count_(count) {}
    int process() const override { return inner_.process(); }
    int processes() const override { return inner_.processes(); }
    std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine) override {
      auto all = inner_.all_gather(mine);
      std::memcpy(all[1].data() + 6 * sizeof(std::int64_t), &count_, sizeof count_);
      return all;
    }

   private:
    ProcessExchange& inner_;
    std::int64_t count_;
  };
  for (const auto& [count, says] :
       {std::pair<std::int64_t, const char*>{
            2, "key counts of sparse input 0 add up to 24, not its 12"},
        {std::int64_t{1} << 40, "says every row of sparse input 0 holds 1099511627776 keys"}}) {
    auto hub = std::make_shared<ThreadRendezvous>(2);
    std::vector<std::future<void>> done;
    for (int p = 0; p < 2; ++p) {
      done.push_back(std::async(std::launch::async, [&, p] {
        const Share w = process_window(n, {2, p}, 1);
        HostBatch mine(layout, n);
        mine.add_rows_parsed_elsewhere(w.offset);
        mine.append(whole, w.offset, w.offset + w.size);
        mine.add_rows_parsed_elsewhere(n - w.offset - w.size);
        ThreadExchange plain(hub, p);
        Tampering tampering(plain, count);
        exchange_batch_keys(mine, w, {0, n, 1}, tampering);
      }));
    }
    EMBER_EXPECT_THROW_WITH(done[0].get(), DataError, says);
    EMBER_EXPECT_THROW_WITH(done[1].get(), DataError, says);
  }
}

}  // namespace
}  // namespace ember::data
