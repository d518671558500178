// The staged pageable copies' setup, measured on the real device: the figures it was chosen from
// must be plausible, and the choice must follow from them (staging_pipeline_test.cpp checks the
// choice itself against made-up machines).
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/staged_copy.hpp"
#include "ember/core/staging_pipeline.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

TEST(StagingGpu, TheSetupComesFromTheMachine) {
  EMBER_REQUIRE_GPU();
  const detail::StagingCalibration& c = detail::staging_calibration(0);
  ASSERT_TRUE(c.measured) << c.note;
  EXPECT_GT(c.link_gbs, 1.0) << "a pinned copy slower than 1 GB/s";
  EXPECT_GE(c.threads, 1);
  EXPECT_LE(c.threads, std::max(1, omp_get_num_procs()));
  EXPECT_TRUE(std::has_single_bit(c.slot_bytes));
  EXPECT_EQ(c.slot_bytes, detail::choose_staging_slot_bytes(c.link_gbs));
  if (c.note.empty()) {
    ASSERT_FALSE(c.staged_gbs.empty());
    // The choice is the one the measured figures give.
    auto measured = [&](int threads) {
      for (const auto& [t, gbs] : c.staged_gbs) {
        if (t == threads) return gbs;
      }
      return -1.0;
    };
    EXPECT_EQ(detail::choose_staging_threads(c.link_gbs, measured, omp_get_num_procs() * 3 / 4),
              c.threads);
  }
  const detail::StagingConfig in_force = detail::staging_config(0);
  EXPECT_EQ(in_force.threads, c.threads);
  EXPECT_EQ(in_force.slot_bytes, c.slot_bytes);
  EXPECT_EQ(in_force.slots, c.threads + 4);
  std::printf("[ staging  ] %s\n", detail::describe(c).c_str());

  // And a copy through that setup arrives intact.
  auto rng = testing::make_rng();
  const std::size_t n = 3 * c.slot_bytes * static_cast<std::size_t>(c.threads) + 12345;
  std::vector<std::uint8_t> src(n), back(n, 0);
  for (auto& b : src)
    b = static_cast<std::uint8_t>(rng());
  auto dev = Allocation::create(Place::cuda(0), n);
  copy_bytes(dev->data(), Place::cuda(0), src.data(), Place::host(), n);
  copy_bytes(back.data(), Place::host(), dev->data(), Place::cuda(0), n);
  EXPECT_TRUE(src == back);
}

}  // namespace
}  // namespace ember
