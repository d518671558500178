// The input pipeline feeding GPUs: the same batches as the host pipeline, whatever the prefetch
// depth, with the split over devices, held batches left intact and clean shutdown.
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "data/data_test_support.hpp"
#include "data/parquet_test_support.hpp"
#include "data/thread_exchange.hpp"
#include "ember/core/allocation.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/cuda_graph.hpp"
#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::Sample;
using datatest::SampleShape;

std::shared_ptr<DataSource> write_norm_dataset(
    const testing::ScratchDir& dir, std::mt19937_64& rng, const SampleShape& shape,
    std::vector<std::int64_t> counts = {300, 7, 1023, 65}, DType key_type = DType::I64) {
  std::vector<std::string> files;
  for (std::int64_t count : counts) {
    const std::string path = (dir / ("g" + std::to_string(files.size()) + ".data")).string();
    datatest::write_norm(path, datatest::random_samples(rng, count, shape), shape, CheckMode::Sum,
                         key_type);
    files.push_back(path);
  }
  write_file_list(dir / "list.txt", files);
  return std::make_shared<NormSource>(dir / "list.txt", CheckMode::Sum,
                                      datatest::layout_for(shape, key_type));
}

SampleShape gpu_shape() {
  SampleShape shape;
  shape.label_dim = 2;
  shape.dense_dim = 5;
  shape.slots_per_input = {4, 2};
  shape.min_nnz = 0;
  shape.max_nnz = 4;
  shape.max_key = std::int64_t{1} << 40;
  return shape;
}

std::vector<std::vector<Sample>> collect(const std::shared_ptr<DataSource>& source,
                                         PipelineOptions o, int max_batches,
                                         std::vector<std::int64_t>* sizes = nullptr) {
  Pipeline p(source, o);
  std::vector<std::vector<Sample>> out;
  for (int i = 0; i < max_batches; ++i) {
    auto b = p.next();
    if (!b) break;
    for (std::size_t d = 0; d < b->devices.size(); ++d) {
      const DeviceBatch& db = b->devices[d];
      EXPECT_EQ(db.place, o.devices[d]);
      EXPECT_EQ(db.label.place(), o.devices[d]);
      EXPECT_EQ(db.dense.place(), o.devices[d]);
      for (const auto& csr : db.sparse)
        EXPECT_EQ(csr.place(), o.devices[d]);
      if (o.devices[d].is_cuda()) {
        EXPECT_TRUE(db.ready != nullptr);
      }
    }
    if (sizes != nullptr) sizes->push_back(b->global_size);
    out.push_back(datatest::samples_of(*b));
  }
  return out;
}

std::vector<Place> two_gpus() {
  // Two devices when there are two; else the same GPU twice, which still exercises the split.
  return {Place::cuda(0), Place::cuda(cuda_device_count() > 1 ? 1 : 0)};
}

// Multi-hot rows, and rows that all hold one or two keys a slot (whose offsets a slot that
// holds them already is not sent again), over epochs whose last batches are partial (shorter,
// merged, then full again), at a prefetch depth that cycles few slots and one that keeps more.
TEST(PipelineGpu, SameBatchesAsTheHostPipelineAtEveryDepth) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (int nnz : {-1, 1, 2}) {
    SCOPED_TRACE(nnz < 0 ? std::string("multi-hot") : cat(nnz, " keys a slot"));
    testing::ScratchDir dir;
    SampleShape shape = gpu_shape();
    if (nnz > 0) shape.min_nnz = shape.max_nnz = nnz;
    const auto source = nnz < 0 ? write_norm_dataset(dir, rng, shape)
                                : write_norm_dataset(dir, rng, shape, {301, 7, 1023}, DType::U32);
    PipelineOptions host;
    host.batch_size = 64;
    host.num_workers = 3;
    host.deterministic = true;
    host.mode = PipelineMode::Epochs;
    host.num_epochs = nnz < 0 ? 2 : 3;
    std::vector<std::int64_t> host_sizes;
    const auto expect = collect(source, host, 1000, &host_sizes);
    ASSERT_GT(expect.size(), 20u);
    for (int depth : {1, 3}) {
      for (const auto& devices : {std::vector<Place>{Place::cuda(0)}, two_gpus()}) {
        PipelineOptions gpu = host;
        gpu.devices = devices;
        gpu.prefetch_depth = depth;
        std::vector<std::int64_t> sizes;
        EXPECT_EQ(collect(source, gpu, 1000, &sizes), expect)
            << "depth " << depth << ", " << devices.size() << " devices";
        EXPECT_EQ(sizes, host_sizes);
      }
    }
  }
}

TEST(PipelineGpu, RepeatModeAndRawMatchTheHost) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = datatest::one_hot_shape(13, {26});
  RawOptions raw = datatest::write_raw_dataset(dir / "r.bin", rng, shape, 5003);
  raw.slot_size_array.assign(26, 1000);
  raw.shuffle = true;
  raw.seed = 3;
  const auto source = std::make_shared<RawSource>(raw, datatest::layout_for(shape, DType::U32));
  PipelineOptions host;
  host.batch_size = 512;
  host.num_workers = 4;
  host.deterministic = true;
  const auto expect = collect(source, host, 25);
  PipelineOptions gpu = host;
  gpu.devices = two_gpus();
  gpu.prefetch_depth = 3;
  EXPECT_EQ(collect(source, gpu, 25), expect);
}

// Shared reading with the ranks gathering one-hot keys (two simulated processes of two GPU
// ranks each, on whatever GPUs there are): each process copies only its own samples' keys to
// its devices, with the whole batch's offsets; the two processes' blocks of keys side by side
// are the keys one host pipeline gives.
TEST(PipelineGpu, SharedReadingCopiesOnlyThisProcesssKeysForTheRanksToGather) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const SampleShape shape = datatest::one_hot_shape(3, {26, 3});
  const std::int64_t n = 4099;
  const RawOptions raw = datatest::write_raw_dataset(dir / "r.bin", rng, shape, n);
  const auto source = std::make_shared<RawSource>(raw, datatest::layout_for(shape, DType::U32));
  PipelineOptions o;
  o.batch_size = 1024;
  o.num_workers = 2;
  o.deterministic = true;
  o.mode = PipelineMode::Epochs;
  PipelineOptions whole_options = o;
  whole_options.devices.assign(4, Place::host());
  Pipeline whole(source, whole_options);
  const auto parts = datatest::process_pipelines(
      2, [&] { return source; },
      [&](int p) {
        PipelineOptions mine = o;
        mine.devices = two_gpus();
        mine.slice = {4, 2 * p};
        mine.ranks_gather_keys = true;
        return mine;
      });
  std::int64_t gathered = 0;
  for (;;) {
    const std::optional<Batch> w = whole.next();
    const std::vector<std::optional<Batch>> b = datatest::next_of_each(parts);
    if (!w) break;
    // 4099 = 4 x 1024 + 3: the last batch does not split over 4 ranks, and is exchanged whole.
    const bool left = w->global_size % 4 == 0;
    for (std::size_t i = 0; i < w->devices.front().sparse.size(); ++i) {
      const CsrTensor& want = w->devices.front().sparse[i];
      const auto want_keys = want.values().to_vector<std::uint32_t>();
      const auto half = static_cast<std::int64_t>(want_keys.size()) / 2;
      std::vector<std::uint32_t> side_by_side;
      for (int p = 0; p < 2; ++p) {
        for (const DeviceBatch& got : b[static_cast<std::size_t>(p)]->devices) {
          ASSERT_EQ(got.keys_from_ranks, left);
          EXPECT_EQ(got.sparse[i].row_offsets().to_vector<std::int64_t>(),
                    want.row_offsets().to_vector<std::int64_t>());
          const auto keys = got.sparse[i].values().to_vector<std::uint32_t>();
          ASSERT_EQ(keys.size(), want_keys.size());
          if (!left) {
            EXPECT_EQ(keys, want_keys);
            continue;
          }
          // Both of the process's devices hold its block (its two ranks' samples).
          EXPECT_EQ(
              std::vector<std::uint32_t>(keys.begin() + p * half, keys.begin() + (p + 1) * half),
              std::vector<std::uint32_t>(want_keys.begin() + p * half,
                                         want_keys.begin() + (p + 1) * half));
        }
      }
    }
    gathered += left ? 1 : 0;
  }
  EXPECT_EQ(gathered, n / 1024);
}

TEST(PipelineGpu, ParquetMatchesTheHost) {
  EMBER_REQUIRE_GPU();
  // The DuckDB-written fixtures: one-hot (two files, SNAPPY) and multi-hot (a list column).
  struct Case {
    const char* fixture;
    std::int64_t dense, slots, budget;
  };
  for (const Case& c : {Case{"snappy", 2, 4, 4}, Case{"multihot_gzip", 1, 2, 4}}) {
    if (!parquettest::fixture_readable(c.fixture)) continue;  // that codec is not in this build
    const auto source = std::make_shared<parquet::ParquetSource>(
        (parquettest::fixture(c.fixture) / "_file_list.txt").string(),
        parquettest::fixture_layout(c.dense, c.slots, c.budget, DType::U32),
        std::vector<std::int64_t>{});
    PipelineOptions host;
    host.batch_size = 96;
    host.num_workers = 2;
    host.deterministic = true;
    host.mode = PipelineMode::Epochs;
    const auto expect = collect(source, host, 1000);
    ASSERT_GT(expect.size(), 3u);
    PipelineOptions gpu = host;
    gpu.devices = two_gpus();
    gpu.prefetch_depth = 2;
    EXPECT_EQ(collect(source, gpu, 1000), expect) << c.fixture;
  }
}

TEST(PipelineGpu, HeldBatchesStayIntactWhileTheSlotsCycle) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto source = write_norm_dataset(dir, rng, gpu_shape());
  PipelineOptions o;
  o.batch_size = 32;
  o.num_workers = 2;
  o.deterministic = true;
  o.mode = PipelineMode::Epochs;
  const auto expect = collect(source, o, 1000);
  o.devices = {Place::cuda(0)};
  o.prefetch_depth = 1;
  Pipeline p(source, o);
  std::vector<Batch> held;
  while (auto b = p.next())
    held.push_back(std::move(*b));
  ASSERT_EQ(held.size(), expect.size());
  for (std::size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(datatest::samples_of(held[i]), expect[i]) << "batch " << i;
  }
}

TEST(PipelineGpu, ShutsDownMidEpochAndBatchesOutliveThePipeline) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto source = write_norm_dataset(dir, rng, gpu_shape());
  for (int taken : {0, 1, 5}) {
    PipelineOptions o;
    o.batch_size = 16;
    o.num_workers = 4;
    o.devices = {Place::cuda(0)};
    o.prefetch_depth = 3;
    std::optional<Batch> kept;
    {
      Pipeline p(source, o);
      for (int i = 0; i < taken; ++i)
        kept = p.next();
    }
    if (kept) {
      EXPECT_EQ(datatest::samples_of(*kept).size(), 16u);
    }
  }
}

TEST(PipelineGpu, WorkerErrorsReachTheConsumer) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape = gpu_shape();
  const std::string path = (dir / "cut.data").string();
  datatest::write_norm(path, datatest::random_samples(rng, 200, shape), shape, CheckMode::None,
                       DType::I64);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  write_file_list(dir / "list.txt", {path});
  PipelineOptions o;
  o.batch_size = 16;
  o.devices = {Place::cuda(0)};
  o.mode = PipelineMode::Epochs;
  Pipeline p(std::make_shared<NormSource>(dir / "list.txt", CheckMode::None,
                                          datatest::layout_for(shape, DType::I64)),
             o);
  EXPECT_THROW(
      {
        while (p.next()) {
        }
      },
      DataError);
}

TEST(PipelineGpu, MemoryIsTakenUpFrontAndLateOnlyForHeldBatches) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto source = write_norm_dataset(dir, rng, gpu_shape());
  for (PipelineMode mode : {PipelineMode::Repeat, PipelineMode::Epochs}) {
    PipelineOptions o;
    o.batch_size = 64;
    o.num_workers = 3;
    o.devices = {Place::cuda(0)};
    o.prefetch_depth = 2;
    o.mode = mode;
    o.num_epochs = 2;
    Pipeline p(source, o);
    const std::int64_t reserved = steady_host_batches(3, true, 2, mode);
    EXPECT_EQ(p.stats().host_batches, reserved);
    EXPECT_EQ(p.stats().device_slots, 2 + 2);
    // One batch at a time: nothing made later.
    for (int i = 0; i < 30; ++i) {
      auto b = p.next();
      ASSERT_TRUE(b);
    }
    PipelineStats s = p.stats();
    EXPECT_EQ(s.late_host_batches, 0);
    EXPECT_EQ(s.host_batches, reserved);
    EXPECT_EQ(s.late_device_slots, 0);
    EXPECT_EQ(s.device_slots, 4);
    EXPECT_GE(s.copy_issue_seconds, 0.0);
    EXPECT_GE(s.copy_wait_seconds, 0.0);
    if (mode == PipelineMode::Epochs) continue;
    // Held device batches take device slots, never host batches (those go back after the
    // copies): with 5 held, the queue's 2 and the collector's 1, 4 slots beyond the 4 reserved.
    std::vector<Batch> held;
    for (int i = 0; i < 5; ++i)
      held.push_back(*p.next());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (p.stats().late_device_slots < 4 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = p.stats();
    EXPECT_EQ(s.late_device_slots, 4);
    EXPECT_EQ(s.device_slots, 8);
    EXPECT_EQ(s.late_host_batches, 0);
  }
}

// A trainer that prepares the next batch ahead holds two at once; said up front, both have their
// slots from the start.
TEST(PipelineGpu, AConsumerThatSaysItHoldsTwoGetsTheirSlotsUpFront) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto source = write_norm_dataset(dir, rng, gpu_shape());
  PipelineOptions o;
  o.batch_size = 64;
  o.num_workers = 2;
  o.devices = {Place::cuda(0)};
  o.prefetch_depth = 2;
  o.consumer_holds = 2;
  Pipeline p(source, o);
  EXPECT_EQ(p.stats().device_slots, steady_device_slots(2, 2));
  EXPECT_EQ(steady_device_slots(2, 2), 5);
  datatest::take_two_at_a_time(p, 30);
  // Room for the queue to refill while the two are held.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const PipelineStats s = p.stats();
  EXPECT_EQ(s.late_device_slots, 0);
  EXPECT_EQ(s.device_slots, 5);
}

// The training thread captures its dense step on the compute stream while the collector keeps
// copying. The collector's device work goes on the copy stream, never into the capture: a slot
// it makes late (the consumer holds more than it said) and the first release that slot's
// copies wait for. (Recorded on the compute stream, that release joined the capture, and the
// collector's query of it failed with cudaErrorCapturedEvent, breaking the capture too.)
TEST(PipelineGpu, TheCollectorQueuesNothingIntoACaptureOfTheComputeStream) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto source = write_norm_dataset(dir, rng, gpu_shape());
  PipelineOptions o;
  o.batch_size = 32;
  o.num_workers = 2;
  o.deterministic = true;
  constexpr int kHeld = 6;
  constexpr int kMore = 4;
  const auto expect = collect(source, o, kHeld + kMore);
  ASSERT_EQ(expect.size(), static_cast<std::size_t>(kHeld + kMore));
  o.devices = {Place::cuda(0)};
  o.prefetch_depth = 1;
  Pipeline p(source, o);
  ASSERT_EQ(p.stats().device_slots, 3);

  // The captured work: a copy between two device buffers.
  const Place gpu = Place::cuda(0);
  std::vector<float> values(1023);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  const std::size_t bytes = values.size() * sizeof(float);
  const AllocationPtr from = Allocation::create(gpu, bytes);
  const AllocationPtr to = Allocation::create(gpu, bytes);
  const StreamHandle compute = current_stream(0);
  copy_bytes(from->data(), gpu, values.data(), Place::host(), bytes, compute);
  synchronize_stream(compute);

  CudaGraph graph;
  graph.begin_capture(compute);
  copy_bytes(to->data(), gpu, from->data(), gpu, bytes, compute);
  // Meanwhile a consumer on a stream of its own holds more batches than the slots made up front
  // (the collector makes the rest now), then drops them and takes more (reusing the slots).
  std::vector<std::vector<datatest::Sample>> got;
  std::int64_t late_during_capture = 0;
  std::exception_ptr consumer_error;
  std::thread consumer([&] {
    try {
      const Stream own = Stream::create(0);
      StreamGuard on_own(0, own.handle());
      std::vector<Batch> held;
      for (int i = 0; i < kHeld; ++i)
        held.push_back(p.next().value());
      // 6 held, 1 queued and 1 being filled: 5 beyond the 3 made up front.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (p.stats().late_device_slots < 5 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      late_during_capture = p.stats().late_device_slots;
      for (const Batch& b : held)
        got.push_back(datatest::samples_of(b));
      held.clear();
      for (int i = 0; i < kMore; ++i)
        got.push_back(datatest::samples_of(p.next().value()));
      own.synchronize();
    } catch (...) {
      consumer_error = std::current_exception();
    }
  });
  consumer.join();
  const std::string why = graph.end_capture();
  EXPECT_EQ(why, "") << "the capture took the collector's work";
  if (consumer_error) {
    try {
      std::rethrow_exception(consumer_error);
    } catch (const std::exception& e) {
      FAIL() << "the consumer failed while the compute stream was captured: " << e.what();
    }
  }
  EXPECT_EQ(late_during_capture, 5);
  ASSERT_EQ(got.size(), expect.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], expect[i]) << "batch " << i;
  // The graph holds the one copy, and replays it.
  ASSERT_TRUE(graph.ready());
  graph.launch(compute);
  std::vector<float> back(values.size(), 0.0f);
  copy_bytes(back.data(), Place::host(), to->data(), gpu, bytes, compute);
  synchronize_stream(compute);
  EXPECT_EQ(back, values);
}

}  // namespace
}  // namespace ember::data
