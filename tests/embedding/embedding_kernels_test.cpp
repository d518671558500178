// The CPU embedding steps against plain loops: the hoisted row initialisation, the grouping of a
// batch's entries by row, and the kGradientChunk order of gradient sums (the order the GPU
// follows bitwise; embedding_gpu_test.cpp holds the GPU to it).
#include "ember/embedding/embedding_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "embedding_reference_support.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(EmbeddingKernels, OnePlacePicksEveryStep) {
  testing::expect_every_step_set(kernels::on(Place::host()));
  EXPECT_EQ(&kernels::on(Place::host()), &kernels::cpu::table());
#if !EMBER_WITH_CUDA
  EMBER_EXPECT_THROW_WITH(kernels::on(Place::cuda(0)), CudaUnavailableError,
                          "the embedding's CUDA kernels");
#endif
}

TEST(EmbeddingKernels, PoolWithoutOffsetsGathersOneRowPerBag) {
  // Without offsets bag i pools rows[i] alone; without scales each scale is 1. Absent rows give
  // +0, and so does a row of -0 (the sum starts from 0), as with offsets 0, 1, 2, ...
  auto rng = ember::testing::make_rng();
  for (const std::int64_t bags : {0, 1, 7, 1023}) {
    const std::int64_t V = 1 + static_cast<std::int64_t>(rng() % 20), rows = 50;
    std::vector<float> table(rows * V);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& x : table)
      x = dist(rng);
    std::fill(table.begin(), table.begin() + V, -0.0f);  // row 0
    std::vector<std::int64_t> entries(bags), offsets(bags + 1);
    std::vector<float> scale(bags);
    for (std::int64_t b = 0; b < bags; ++b) {
      entries[b] = rng() % 9 == 0 ? -1 : static_cast<std::int64_t>(rng() % rows);
      offsets[b + 1] = b + 1;
      scale[b] = static_cast<float>(rng() % 100) / 40.0f;
    }
    for (const bool scaled : {false, true}) {
      const std::vector<float> ones(bags, 1.0f);
      std::vector<float> with(bags * V, -9.0f), without(bags * V, -7.0f);
      const auto& k = kernels::on(Place::host());
      k.pool(offsets.data(), entries.data(), scaled ? scale.data() : ones.data(), bags, bags,
             kernels::Values{table.data()}, V, with.data(), kernels::ValueType::F32, nullptr);
      k.pool(nullptr, entries.data(), scaled ? scale.data() : nullptr, bags, bags,
             kernels::Values{table.data()}, V, without.data(), kernels::ValueType::F32, nullptr);
      for (std::int64_t b = 0; b < bags; ++b) {
        for (std::int64_t c = 0; c < V; ++c) {
          const float row = entries[b] < 0 ? 0.0f : table[entries[b] * V + c];
          const float want = (0.0f + row) * (scaled ? scale[b] : 1.0f);
          EXPECT_TRUE(same_bits(without[b * V + c], want)) << b << "," << c;
          EXPECT_TRUE(same_bits(without[b * V + c], with[b * V + c])) << b << "," << c;
          if (entries[b] == 0) {
            EXPECT_FALSE(std::signbit(without[b * V + c])) << b;
          }
        }
      }
    }
  }
}

// gather_codes on each kind of bag: empty, one key, one absent key, several keys, one key under a
// scale other than 1 (and an absent one so), with and without scales. A bag whose code is a row
// of the output is pooled there exactly as pool() pools it; other rows of the output are left
// as they were.
TEST(EmbeddingKernels, GatherCodesNameTheRowOrPoolTheBag) {
  const std::int64_t V = 3, rows = 9;
  std::vector<float> table(rows * V);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = 0.25f * static_cast<float>(i) - 2.0f;
  // Bags: {}, {5}, {-1}, {3, 4}, {7} scaled 0.5, {-1} scaled 0.5, {2, -1, 6}.
  const std::vector<std::int64_t> offsets = {0, 0, 1, 2, 4, 5, 6, 9};
  const std::vector<std::int64_t> entries = {5, -1, 3, 4, 7, -1, 2, -1, 6};
  const std::vector<float> scale = {1.0f, 1.0f, 1.0f, 1.0f, 0.5f, 0.5f, 1.0f};
  const std::int64_t bags = 7;
  const auto& k = kernels::on(Place::host());
  for (const bool scaled : {false, true}) {
    std::vector<std::int32_t> codes(bags, 99);
    std::vector<float> out(bags * V, -9.0f), pooled(bags * V);
    k.gather_codes(offsets.data(), entries.data(), scaled ? scale.data() : nullptr, bags,
                   kernels::Values{table.data()}, V, codes.data(), out.data(),
                   kernels::ValueType::F32, nullptr);
    k.pool(offsets.data(), entries.data(), scaled ? scale.data() : nullptr, bags, 9,
           kernels::Values{table.data()}, V, pooled.data(), kernels::ValueType::F32, nullptr);
    const std::vector<std::int32_t> want = {kGatherZeroRow,
                                            5,
                                            kGatherZeroRow,
                                            gather_dense_code(3),
                                            scaled ? gather_dense_code(4) : 7,
                                            scaled ? gather_dense_code(5) : kGatherZeroRow,
                                            gather_dense_code(6)};
    EXPECT_EQ(codes, want) << (scaled ? "scaled" : "plain");
    for (std::int64_t b = 0; b < bags; ++b) {
      for (std::int64_t c = 0; c < V; ++c) {
        const float got = out[b * V + c];
        if (want[b] <= -2) {
          EXPECT_TRUE(same_bits(got, pooled[b * V + c])) << b << "," << c;
        } else {
          EXPECT_EQ(got, -9.0f) << b << "," << c;
        }
      }
    }
  }
}

TEST(EmbeddingKernels, HoistedRowInitIsInitialValueBitwise) {
  auto rng = ember::testing::make_rng();
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t seed = rng();
    const std::uint64_t key = i % 3 == 0 ? rng() % 100 : rng();
    const std::int64_t c = static_cast<std::int64_t>(rng() % 1025);
    const float bound = i % 2 ? 0.05f : 1.5f;
    const float want = kernels::initial_value(seed, key, c, bound);
    const float got = kernels::initial_value_at(kernels::row_init_stream(seed, key), c, bound);
    ASSERT_TRUE(same_bits(got, want))
        << "seed " << seed << " key " << key << " column " << c << ": " << got << " vs " << want;
  }
}

TEST(EmbeddingKernels, InitNewRowsStartsOnlyTheRange) {
  const std::int64_t V = 7, rows = 20;
  std::vector<std::int64_t> keys(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    keys[r] = 1000 + 37 * r;
  std::vector<float> values(rows * V, 9.0f), s0(rows * V, 9.0f);
  std::vector<std::int64_t> last(rows, -5);
  const std::int64_t range[2] = {3, 11};
  kernels::RowInit init;
  init.seed = 42;
  init.bound = 0.05f;
  init.state0 = 0.25f;
  init.step = 17;
  kernels::on(Place::host())
      .keys<std::int64_t>()
      .init_new_rows(kernels::NewRows{range, rows}, keys.data(), init,
                     kernels::Values{values.data()}, V,
                     kernels::RowStates{s0.data(), nullptr, last.data()}, nullptr);
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool fresh = r >= range[0] && r < range[1];
    EXPECT_EQ(last[r], fresh ? 17 : -5) << r;
    for (std::int64_t c = 0; c < V; ++c) {
      const float want =
          fresh ? kernels::initial_value(42, static_cast<std::uint64_t>(keys[r]), c, 0.05f) : 9.0f;
      EXPECT_TRUE(same_bits(values[r * V + c], want)) << r << "," << c;
      EXPECT_EQ(s0[r * V + c], fresh ? 0.25f : 9.0f) << r << "," << c;
    }
  }
}

// The three arrays of kernels::segments against a map from row to its entries in entry order.
TEST(EmbeddingKernels, SegmentsGroupEntriesByRowInEntryOrder) {
  auto rng = ember::testing::make_rng();
  for (std::int64_t n : {0, 1, 7, 1023, 65537}) {
    std::vector<std::int64_t> rows(n), bags(n);
    for (std::int64_t e = 0; e < n; ++e) {
      rows[e] = static_cast<std::int64_t>(rng() % (n / 3 + 2)) - 1;  // some -1 (absent)
      bags[e] = static_cast<std::int64_t>(rng() % 1000);
    }
    std::map<std::int64_t, std::vector<std::int32_t>> want;
    for (std::int64_t e = 0; e < n; ++e)
      want[rows[e]].push_back(static_cast<std::int32_t>(bags[e]));
    std::vector<std::int32_t> sorted(n);
    std::vector<std::int64_t> unique(n), offsets(n + 1);
    std::int64_t count = -1;
    kernels::on(Place::host())
        .segments(rows.data(), bags.data(), n, n, sorted.data(), unique.data(), offsets.data(),
                  &count, nullptr);
    ASSERT_EQ(count, static_cast<std::int64_t>(want.size())) << n;
    std::int64_t k = 0;
    for (const auto& [row, list] : want) {
      ASSERT_EQ(unique[k], row) << n;
      ASSERT_EQ(offsets[k + 1] - offsets[k], static_cast<std::int64_t>(list.size())) << row;
      for (std::size_t i = 0; i < list.size(); ++i)
        ASSERT_EQ(sorted[offsets[k] + i], list[i]) << "row " << row << " entry " << i;
      ++k;
    }
    EXPECT_EQ(offsets[count], n);
  }
}

// SGD with rate 1 from zero weights leaves w = -g exactly, which exposes the gradient sums bit
// for bit; rows far longer than kGradientChunk, at and around its multiples, and absent keys.
TEST(EmbeddingKernels, UpdateSumsGradientsInTheChunkOrder) {
  auto rng = ember::testing::make_rng();
  const std::int64_t C = kernels::kGradientChunk;
  std::vector<std::int64_t> lengths = {1, 2, 7, C - 1, C, C + 1, 2 * C - 1, 2 * C + 1, 1023, 65537};
  for (int i = 0; i < 200; ++i)
    lengths.push_back(1 + static_cast<std::int64_t>(rng() % 40));
  lengths.push_back(0);  // a row of the table the batch does not touch
  for (std::int64_t V : {7, 128}) {
    const testing::UpdateBatch b = testing::random_update_batch(lengths, 100, 3000, V, rng);
    const auto n = static_cast<std::int64_t>(b.rows.size());
    std::vector<std::int32_t> sorted(n);
    std::vector<std::int64_t> unique(n), offsets(n + 1);
    std::int64_t count = 0;
    kernels::on(Place::host())
        .segments(b.rows.data(), b.entry_bag.data(), n, b.rows_in_table, sorted.data(),
                  unique.data(), offsets.data(), &count, nullptr);
    std::vector<float> values(b.rows_in_table * V, 0.0f);
    optim::OptimizerConfig sgd;
    sgd.type = optim::OptimizerType::SGD;
    const optim::UpdateStep u = optim::make_update_step(sgd, 1.0f, 1);
    kernels::on(Place::host())
        .update_rows(kernels::Segments{sorted.data(), unique.data(), offsets.data(), &count, n},
                     b.scale.data(), b.grad.data(), kernels::ValueType::F32,
                     kernels::Values{values.data()}, V, kernels::RowStates{}, 1, u, nullptr,
                     nullptr);
    const std::vector<float> want = testing::chunked_gradient_sums(b);
    std::vector<double> exact, magnitude;
    testing::exact_gradient_sums(b, exact, magnitude);
    for (std::int64_t r = 0; r < b.rows_in_table; ++r) {
      for (std::int64_t c = 0; c < V; ++c) {
        const std::int64_t i = r * V + c;
        ASSERT_EQ(-values[i], want[i])
            << "row " << r << " (" << lengths[r] << " entries) column " << c << ", dim " << V;
        // And the order is a sound one: float32 rounding of a sum of this many terms.
        ASSERT_LE(std::abs(want[i] - exact[i]), 1e-6 * lengths[r] * magnitude[i] + 1e-30)
            << "row " << r << " column " << c;
      }
    }
    // Without a scale every factor is 1: the chunk order's sums of the unscaled gradients.
    testing::UpdateBatch ones = b;
    std::fill(ones.scale.begin(), ones.scale.end(), 1.0f);
    std::fill(values.begin(), values.end(), 0.0f);
    kernels::on(Place::host())
        .update_rows(kernels::Segments{sorted.data(), unique.data(), offsets.data(), &count, n},
                     nullptr, b.grad.data(), kernels::ValueType::F32,
                     kernels::Values{values.data()}, V, kernels::RowStates{}, 1, u, nullptr,
                     nullptr);
    const std::vector<float> unscaled = testing::chunked_gradient_sums(ones);
    for (std::int64_t i = 0; i < b.rows_in_table * V; ++i)
      ASSERT_EQ(-values[i], unscaled[i]) << "no scale: value " << i << ", dim " << V;
  }
}

}  // namespace
}  // namespace ember::embedding
