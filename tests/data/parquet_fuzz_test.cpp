// Damaged Parquet datasets, made at random from the fixtures for a few seconds
// (EMBER_TEST_FUZZ_SECONDS for longer; fuzz_support.hpp): truncations, byte flips and overwritten
// runs of bytes in the data and in the footer, and now and then a damaged `_metadata.json`. Each
// is read by the file reader (sometimes with a slot_size_array, sometimes with the other key
// width, sometimes dropping rows with NaN or infinite values) or through a whole pipeline. Every
// read must end in a valid read or an ember::Error (a DataError in practice): no crash, no other
// exception, no hang.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/fuzz_support.hpp"
#include "data/parquet_test_support.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/pipeline.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;

constexpr double kDefaultSeconds = 3.0;
constexpr double kHangSeconds = 60.0;

struct ParquetFixture {
  std::string name;
  std::int64_t dense, slots, budget;
  std::vector<char> data, metadata;
};

void read_parquet_file(const ParquetFixture& f, const BatchLayout& layout, const fs::path& dir,
                       std::vector<std::int64_t> slot_size_array, std::int64_t capacity) {
  // Damaged floats are often NaN: half the reads drop such rows (a tile with holes).
  std::optional<SampleChecks> checks;
  if (capacity % 2 == 0) checks = SampleChecks{BadSamplePolicy::Drop, {}};
  parquet::ParquetFileReader reader(layout, std::move(slot_size_array), nullptr, checks);
  HostBatch batch(layout, capacity);
  reader.open((dir / "part_0.parquet").string(),
              parquet::read_hugectr_metadata(dir / "_metadata.json"));
  std::int64_t rows = 0;
  for (int guard = 0; !reader.done(); ++guard) {
    ASSERT_LT(guard, 1 << 20) << "the reader does not advance";
    batch.clear();
    rows += reader.read(batch);
  }
  if (checks) {
    EXPECT_LE(rows, reader.row());  // dropped rows are not delivered
  } else {
    EXPECT_EQ(rows, reader.row());
  }
}

void read_parquet_pipeline(const BatchLayout& layout, const fs::path& dir,
                           std::vector<std::int64_t> slot_size_array) {
  // Two workers over two copies of the file (the same path twice).
  write_file_list(dir / "_file_list.txt", {dir / "part_0.parquet", dir / "part_0.parquet"});
  PipelineOptions o;
  o.batch_size = 7;
  o.num_workers = 2;
  o.mode = PipelineMode::Epochs;
  Pipeline p(std::make_shared<parquet::ParquetSource>((dir / "_file_list.txt").string(), layout,
                                                      std::move(slot_size_array)),
             o);
  for (int guard = 0; p.next(); ++guard)
    ASSERT_LT(guard, 1 << 20);
}

TEST(ParquetFuzz, DamagedFilesReadOrFailCleanly) {
  std::vector<ParquetFixture> fixtures;
  for (const ParquetFixture& f :
       {ParquetFixture{"snappy", 2, 4, 4, {}, {}}, ParquetFixture{"zstd_v2", 2, 4, 4, {}, {}},
        ParquetFixture{"plain", 2, 4, 4, {}, {}},
        ParquetFixture{"multihot_gzip", 1, 2, 8, {}, {}}}) {
    if (!parquettest::fixture_readable(f.name)) continue;  // that codec is not in this build
    fixtures.push_back(f);
    fixtures.back().data = fuzztest::read_bytes(parquettest::fixture(f.name) / "part_0.parquet");
    fixtures.back().metadata =
        fuzztest::read_bytes(parquettest::fixture(f.name) / "_metadata.json");
  }
  ASSERT_FALSE(fixtures.empty());
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto tally = fuzztest::run_fuzz(
      fuzztest::fuzz_seconds(kDefaultSeconds), kHangSeconds,
      [&](std::mt19937_64& r, std::string& what) {
        const ParquetFixture& f = fixtures[r() % fixtures.size()];
        std::string damage;
        const bool metadata_damaged = r() % 8 == 0;
        if (metadata_damaged) {
          fuzztest::write_bytes(dir / "part_0.parquet", f.data);
          fuzztest::write_bytes(
              dir / "_metadata.json",
              fuzztest::damage(f.metadata, r, 64, fuzztest::HotEnd::Head, &damage));
          damage = "_metadata.json " + damage;
        } else {
          fuzztest::write_bytes(dir / "part_0.parquet",
                                fuzztest::damage(f.data, r, 2048, fuzztest::HotEnd::Tail, &damage));
          fuzztest::write_bytes(dir / "_metadata.json", f.metadata);
        }
        const DType key = r() % 2 ? DType::I64 : DType::U32;
        // The fixtures' keys are small; a slot_size_array of 1000 a slot fits them, one of 3
        // usually does not (a key outside its slot's range).
        std::vector<std::int64_t> sizes;
        if (r() % 3 == 0) sizes.assign(static_cast<std::size_t>(f.slots), r() % 2 ? 1000 : 3);
        const bool pipeline = r() % 6 == 0;
        what = f.name + ": " + damage + (key == DType::U32 ? ", u32 keys" : ", i64 keys") +
               (sizes.empty() ? "" : ", slot_size_array " + std::to_string(sizes[0])) +
               (pipeline ? ", through a pipeline" : "");
        const BatchLayout layout = parquettest::fixture_layout(f.dense, f.slots, f.budget, key);
        if (pipeline) {
          read_parquet_pipeline(layout, dir.path(), std::move(sizes));
        } else {
          read_parquet_file(f, layout, dir.path(), std::move(sizes),
                            1 + static_cast<std::int64_t>(r() % 997));
        }
      },
      rng);
  EXPECT_GT(tally.runs, 20);
  EXPECT_GT(tally.rejected, 0);
  EXPECT_LT(tally.rejected, tally.runs);
}

}  // namespace
}  // namespace ember::data
