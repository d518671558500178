// PartTimer on the CPU (wall clock): parts tile the time between begin() and end(), parts of one
// name add up over steps, an open part survives collect(), host parts stay apart. The CUDA path
// (events) is part_timer_gpu_test.cpp.
#include "ember/core/part_timer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

void busy(std::chrono::milliseconds d) {
  std::this_thread::sleep_for(d);
}

TEST(PartTimer, PartsTileTheStepsAndAddUpByName) {
  PartTimer t(Place::host());
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 3; ++step) {
    t.begin("a", nullptr);
    busy(std::chrono::milliseconds(4));
    t.begin("b", nullptr);
    busy(std::chrono::milliseconds(2));
    t.begin("a", nullptr);  // the same part again within a step
    busy(std::chrono::milliseconds(1));
    t.end(nullptr);
    t.count_step();
    busy(std::chrono::milliseconds(3));  // between steps: no part
  }
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const auto& parts = t.collect();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "a");
  EXPECT_EQ(parts[1].name, "b");
  EXPECT_EQ(parts[0].intervals, 6);
  EXPECT_EQ(parts[1].intervals, 3);
  EXPECT_GE(parts[0].ms, 3 * 5.0);
  EXPECT_GE(parts[1].ms, 3 * 2.0);
  EXPECT_FALSE(parts[0].host);
  EXPECT_EQ(t.steps(), 3);
  // The gaps between steps (9 ms at least) count in no part.
  EXPECT_LE(parts[0].ms + parts[1].ms, wall - 9.0);
}

TEST(PartTimer, AnOpenPartIsCountedAtTheNextCollect) {
  PartTimer t(Place::host());
  t.begin("open", nullptr);
  busy(std::chrono::milliseconds(2));
  EXPECT_EQ(t.collect()[0].intervals, 0);
  busy(std::chrono::milliseconds(2));
  t.end(nullptr);
  const auto& parts = t.collect();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].intervals, 1);
  EXPECT_GE(parts[0].ms, 4.0);
  // Nothing open, nothing new: a further collect changes nothing.
  EXPECT_EQ(t.collect()[0].intervals, 1);
}

TEST(PartTimer, HostPartsStayApartAndResetForgets) {
  PartTimer t(Place::host());
  t.add_host("wait", 1.5);
  t.add_host("wait", 2.5);
  t.end(nullptr);  // nothing open: no effect
  const auto& parts = t.collect();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_TRUE(parts[0].host);
  EXPECT_DOUBLE_EQ(parts[0].ms, 4.0);
  EXPECT_EQ(parts[0].intervals, 2);
  EMBER_EXPECT_THROW_WITH(t.begin("wait", nullptr), Error, "both on the host and on the device");
  t.count_step();
  t.reset();
  EXPECT_TRUE(t.collect().empty());
  EXPECT_EQ(t.steps(), 0);
}

}  // namespace
}  // namespace ember
