// Damaged Parquet files, made at random from the fixtures for a few seconds: truncations, byte
// flips and overwritten runs of bytes, in the data and in the footer. Every read must end in a
// valid read or an ember::Error (a DataError in practice): no crash, no other exception, no hang
// (the test is bounded by its own clock and CTest's timeout).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "data/parquet_test_support.hpp"
#include "ember/core/error.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;

std::vector<char> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ParquetFuzz, DamagedFilesReadOrFailCleanly) {
  struct Source {
    std::string fixture;
    std::int64_t dense, slots, budget;
  };
  std::vector<Source> sources;
  for (const Source& s : {Source{"snappy", 2, 4, 4}, Source{"zstd_v2", 2, 4, 4},
                          Source{"plain", 2, 4, 4}, Source{"multihot_gzip", 1, 2, 8}}) {
    if (parquettest::fixture_readable(s.fixture)) sources.push_back(s);
  }
  auto rng = testing::make_rng();
  testing::ScratchDir dir;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int runs = 0, failed = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const Source& src = sources[rng() % sources.size()];
    const fs::path good = parquettest::fixture(src.fixture) / "part_0.parquet";
    const auto metadata =
        parquet::read_hugectr_metadata(parquettest::fixture(src.fixture) / "_metadata.json");
    std::vector<char> b = bytes_of(good);
    const auto size = b.size();
    switch (rng() % 4) {
      case 0:  // truncated anywhere
        b.resize(rng() % size);
        break;
      case 1:  // a few flipped bytes anywhere
        for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k)
          b[rng() % size] ^= static_cast<char>(1 + rng() % 255);
        break;
      case 2: {  // a few flipped bytes in the footer (the last 2 kB)
        const std::size_t tail = std::min<std::size_t>(size, 2048);
        for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
          b[size - 1 - rng() % tail] ^= static_cast<char>(1 + rng() % 255);
        }
        break;
      }
      default: {  // a run of random bytes
        const std::size_t at = rng() % size;
        const std::size_t n = std::min<std::size_t>(size - at, 1 + rng() % 64);
        for (std::size_t k = 0; k < n; ++k)
          b[at + k] = static_cast<char>(rng());
      }
    }
    const fs::path file = dir / "part_0.parquet";
    {
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(b.data(), static_cast<std::streamsize>(b.size()));
    }
    ++runs;
    try {
      const BatchLayout layout =
          parquettest::fixture_layout(src.dense, src.slots, src.budget, DType::I64);
      parquet::ParquetFileReader reader(layout, {});
      HostBatch batch(layout, 997);
      reader.open(file.string(), metadata);
      for (int guard = 0; !reader.done() && guard < 100000; ++guard) {
        batch.clear();
        reader.read(batch);
      }
      EXPECT_TRUE(reader.done());
    } catch (const Error&) {
      ++failed;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "a damaged " << src.fixture << " file threw a non-Ember error: " << e.what();
      return;
    }
  }
  EXPECT_GT(runs, 20);
  EXPECT_GT(failed, 0);
  std::printf("fuzz: %d damaged files, %d rejected with an error, %d read\n", runs, failed,
              runs - failed);
}

}  // namespace
}  // namespace ember::data
