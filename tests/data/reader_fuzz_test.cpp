// Damaged Norm and Raw files, made at random for a few seconds (EMBER_TEST_FUZZ_SECONDS for longer;
// fuzz_support.hpp): truncations, flipped bytes (anywhere, or in the header), runs of random
// bytes. Each is read by the file reader (sometimes with the other key width, or the drop
// policy) and now and then through a whole pipeline. Every read must end in a valid read or an
// ember::Error: no crash, no other exception, no hang.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/data_test_support.hpp"
#include "data/fuzz_support.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/raw_format.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

using datatest::SampleShape;

constexpr double kDefaultSeconds = 2.0;
constexpr double kHangSeconds = 60.0;

struct NormFixture {
  SampleShape shape;
  CheckMode check;
  DType key;
  std::vector<char> bytes;
};

std::vector<NormFixture> norm_fixtures(std::mt19937_64& rng, const testing::ScratchDir& dir) {
  SampleShape one_hot;
  one_hot.dense_dim = 13;
  one_hot.slots_per_input = {26};
  one_hot.min_nnz = one_hot.max_nnz = 1;
  SampleShape multi_hot;
  multi_hot.label_dim = 2;
  multi_hot.dense_dim = 3;
  multi_hot.slots_per_input = {2, 5};
  multi_hot.min_nnz = 0;
  multi_hot.max_nnz = 4;
  std::vector<NormFixture> out;
  for (const SampleShape& shape : {one_hot, multi_hot}) {
    for (CheckMode check : {CheckMode::Sum, CheckMode::None}) {
      for (DType key : {DType::U32, DType::I64}) {
        const auto path = dir / "good.data";
        datatest::write_norm(path, datatest::random_samples(rng, 1 + rng() % 60, shape), shape,
                             check, key);
        out.push_back({shape, check, key, fuzztest::read_bytes(path)});
      }
    }
  }
  return out;
}

// Reads a whole file with one reader; a successful read ends at its last record.
void read_norm_file(const NormFixture& f, const BatchLayout& layout, const std::string& path,
                    std::optional<SampleChecks> checks) {
  ReadCounters counters;
  NormFileReader reader(layout, f.check, &counters, std::move(checks));
  reader.open(path);
  HostBatch batch(layout, 1 + static_cast<std::int64_t>(path.size() % 17));
  std::int64_t samples = 0;
  for (int guard = 0; !reader.done(); ++guard) {
    ASSERT_LT(guard, 1 << 20) << "the reader does not advance";
    batch.clear();
    samples += reader.read(batch);
  }
  EXPECT_LE(samples, reader.header().number_of_records);
}

// One epoch through the pipeline (two workers over two copies of the file).
void read_norm_pipeline(const NormFixture& f, const BatchLayout& layout,
                        const testing::ScratchDir& dir, SampleChecks checks) {
  write_file_list(dir / "list.txt", {dir / "a.data", dir / "a.data"});
  PipelineOptions o;
  o.batch_size = 7;
  o.num_workers = 2;
  o.mode = PipelineMode::Epochs;
  Pipeline p(std::make_shared<NormSource>(dir / "list.txt", f.check, layout, checks), o);
  for (int guard = 0; p.next(); ++guard)
    ASSERT_LT(guard, 1 << 20);
}

TEST(ReaderFuzz, DamagedNormFilesReadOrFailCleanly) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto fixtures = norm_fixtures(rng, dir);
  const auto tally = fuzztest::run_fuzz(
      fuzztest::fuzz_seconds(kDefaultSeconds), kHangSeconds,
      [&](std::mt19937_64& r, std::string& what) {
        const NormFixture& f = fixtures[r() % fixtures.size()];
        std::string damage;
        const auto bytes = fuzztest::damage(f.bytes, r, 69 + 64, fuzztest::HotEnd::Head, &damage);
        const bool other_width = r() % 4 == 0;
        const DType key = other_width ? (f.key == DType::U32 ? DType::I64 : DType::U32) : f.key;
        const SampleChecks checks{r() % 2 ? BadSamplePolicy::Drop : BadSamplePolicy::Error, {}};
        const bool pipeline = r() % 6 == 0;
        what = damage + (f.check == CheckMode::Sum ? ", Sum" : ", None") +
               (other_width ? ", read with the other key width" : "") +
               (pipeline ? ", through a pipeline" : "");
        fuzztest::write_bytes(dir / "a.data", bytes);
        const BatchLayout layout = datatest::layout_for(f.shape, key);
        if (pipeline) {
          read_norm_pipeline(f, layout, dir, checks);
        } else {
          read_norm_file(f, layout, dir / "a.data", r() % 3 ? std::optional(checks) : std::nullopt);
        }
      },
      rng);
  EXPECT_GT(tally.runs, 20);
  EXPECT_GT(tally.rejected, 0);
  EXPECT_LT(tally.rejected, tally.runs);
}

TEST(ReaderFuzz, DamagedRawFilesReadOrFailCleanly) {
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  SampleShape shape;
  shape.dense_dim = 4;
  shape.slots_per_input = {5};
  shape.min_nnz = shape.max_nnz = 1;
  shape.max_key = 50;
  struct RawFixture {
    bool floats;
    std::int64_t samples;
    std::vector<char> bytes;
  };
  std::vector<RawFixture> fixtures;
  for (bool floats : {true, false}) {
    auto samples = datatest::random_samples(rng, 1 + rng() % 80, shape);
    for (auto& s : samples) {
      for (auto& v : s.dense)
        v = floats ? v : std::abs(v) * 100;  // int mode: counts
    }
    datatest::write_raw(dir / "good.bin", samples, shape, floats);
    fixtures.push_back({floats, static_cast<std::int64_t>(samples.size()),
                        fuzztest::read_bytes(dir / "good.bin")});
  }
  const BatchLayout layout = datatest::layout_for(shape, DType::U32);
  const auto tally = fuzztest::run_fuzz(
      fuzztest::fuzz_seconds(kDefaultSeconds), kHangSeconds,
      [&](std::mt19937_64& r, std::string& what) {
        const RawFixture& f = fixtures[r() % fixtures.size()];
        std::string damage;
        const auto bytes = fuzztest::damage(f.bytes, r, 64, fuzztest::HotEnd::Head, &damage);
        const bool pipeline = r() % 6 == 0;
        what = damage + (f.floats ? ", float label/dense" : ", int label/dense") +
               (pipeline ? ", through a pipeline" : "");
        fuzztest::write_bytes(dir / "r.bin", bytes);
        RawOptions raw;
        raw.path = dir / "r.bin";
        raw.num_samples = f.samples;
        raw.float_label_dense = f.floats;
        raw.slot_size_array.assign(5, r() % 2 ? 50 : 30);  // sometimes too small for the keys
        raw.checks = SampleChecks{r() % 2 ? BadSamplePolicy::Drop : BadSamplePolicy::Error, {}};
        auto source = std::make_shared<RawSource>(raw, layout);
        if (pipeline) {
          PipelineOptions o;
          o.batch_size = 8;
          o.num_workers = 2;
          o.mode = PipelineMode::Epochs;
          Pipeline p(source, o);
          for (int guard = 0; p.next(); ++guard)
            ASSERT_LT(guard, 1 << 20);
          return;
        }
        HostBatch batch(layout, 9);
        for (std::int64_t first = 0; first < f.samples; first += 9) {
          batch.clear();
          const std::int64_t n = std::min<std::int64_t>(9, f.samples - first);
          EXPECT_LE(source->read_samples(first, n, batch), n);
        }
      },
      rng);
  EXPECT_GT(tally.runs, 20);
  EXPECT_GT(tally.rejected, 0);
  EXPECT_LT(tally.rejected, tally.runs);
}

}  // namespace
}  // namespace ember::data
