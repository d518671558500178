// PartTimer on CUDA: the parts are intervals between timing events on the stream; their sum is
// the stream's time from the first begin() to end(), and a part's time grows with its work.
#include "ember/core/part_timer.hpp"

#include <gtest/gtest.h>

#include "ember/core/allocation.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/stream.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

TEST(PartTimerGpu, EventsTileTheStreamAndFollowTheWork) {
  EMBER_REQUIRE_GPU();
  const Place gpu = Place::cuda(0);
  const std::size_t bytes = std::size_t{256} << 20;
  auto a = Allocation::create(gpu, bytes);
  auto b = Allocation::create(gpu, bytes);
  const StreamHandle s = current_stream(0);
  auto copy = [&] { copy_bytes(b->data(), gpu, a->data(), gpu, bytes, s); };
  PartTimer t(gpu);
  Event first = Event::create(0, true), last = Event::create(0, true);
  // Warm-up, and ~4 ms of queued work: the host queues the whole loop below before the device
  // reaches it, so the intervals hold the copies' device time and no wait for the host's launches
  // (on the H100 the one-copy part otherwise held a launch gap as long as the copy).
  for (int k = 0; k < 20; ++k)
    copy();
  first.record(s);
  for (int step = 0; step < 4; ++step) {
    t.begin("one copy", s);
    copy();
    t.begin("four copies", s);
    for (int k = 0; k < 4; ++k)
      copy();
    t.end(s);
    t.count_step();
  }
  last.record(s);
  const auto& parts = t.collect();
  const double total = Event::elapsed_ms(first, last);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].intervals, 4);
  EXPECT_EQ(parts[1].intervals, 4);
  EXPECT_EQ(t.steps(), 4);
  const double ratio = parts[1].ms / parts[0].ms;
  EXPECT_GT(ratio, 3.0) << parts[0].ms << " ms against " << parts[1].ms << " ms";
  EXPECT_LT(ratio, 5.5) << parts[0].ms << " ms against " << parts[1].ms << " ms";
  // The parts tile the stream's time (the gaps between steps hold no work).
  EXPECT_LE(parts[0].ms + parts[1].ms, total * 1.001 + 0.01);
  EXPECT_GE(parts[0].ms + parts[1].ms, total * 0.9);
}

}  // namespace
}  // namespace ember
