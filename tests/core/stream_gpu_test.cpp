// Process-wide streams and device state: one compute and one copy stream per device, the peer
// matrix, the device guard, events timing work on a stream, and events ordering a graph's
// replays against another stream.
#include "ember/core/stream.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/cuda_graph.hpp"
#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

TEST(StreamGpu, OneComputeAndOneCopyStreamPerDevice) {
  EMBER_REQUIRE_GPU();
  for (int d = 0; d < cuda_device_count(); ++d) {
    EXPECT_NE(default_stream(d), nullptr);
    EXPECT_NE(copy_stream(d), nullptr);
    EXPECT_NE(default_stream(d), copy_stream(d));
    EXPECT_EQ(default_stream(d), default_stream(d));
    EXPECT_EQ(copy_stream(d), copy_stream(d));
    EXPECT_EQ(current_stream(d), default_stream(d));
  }
  EXPECT_THROW(copy_stream(cuda_device_count()), Error);
  EXPECT_THROW(default_stream(kMaxDevices), Error);
}

// The compute stream runs above new streams (background work, such as batches prepared ahead),
// and collectives' transfers above the compute stream, on a device with that many priorities
// (H100 and H200 have six).
TEST(StreamGpu, PrioritiesPutTransfersAboveTheStepAboveBackgroundWork) {
  EMBER_REQUIRE_GPU();
  static_assert(kTransferPriority < kHostWaitPriority && kHostWaitPriority < kStepPriority &&
                kStepPriority < kBackgroundPriority);
  for (int d = 0; d < cuda_device_count(); ++d) {
    const Stream background = Stream::create(d);
    const Stream transfers = Stream::create(d, kTransferPriority);
    const int step = stream_priority(default_stream(d));
    EXPECT_LT(step, stream_priority(background.handle())) << "device " << d;
    EXPECT_LT(stream_priority(transfers.handle()), step) << "device " << d;
    EXPECT_EQ(stream_priority(copy_stream(d)), stream_priority(background.handle()));
  }
}

TEST(StreamGpu, PeerMatrixHasATrueDiagonal) {
  EMBER_REQUIRE_GPU();
  const int n = cuda_device_count();
  for (int d = 0; d < n; ++d) {
    EXPECT_TRUE(can_access_peer(d, d)) << d;
    for (int e = 0; e < n; ++e) {
      // Symmetric on every machine Ember targets (NVLink or PCIe peers).
      EXPECT_EQ(can_access_peer(d, e), can_access_peer(e, d));
    }
  }
  EXPECT_THROW(can_access_peer(0, n), Error);
}

TEST(StreamGpu, GuardRestoresTheCurrentDevice) {
  EMBER_REQUIRE_GPU();
  const int before = current_device();
  {
    DeviceGuard guard(cuda_device_count() - 1);
    EXPECT_EQ(current_device(), cuda_device_count() - 1);
  }
  EXPECT_EQ(current_device(), before);
}

TEST(StreamGpu, EventsTimeACopyOnTheCopyStream) {
  EMBER_REQUIRE_GPU();
  const std::size_t n = 1 << 20;
  std::vector<float> ones(n, 1.0f), back(n, 0.0f);
  auto device = Allocation::create(Place::cuda(0), n * sizeof(float));
  auto pinned = Allocation::create(Place::pinned(), n * sizeof(float));
  std::copy(ones.begin(), ones.end(), static_cast<float*>(pinned->data()));
  const StreamHandle s = copy_stream(0);
  Event start = Event::create(0, true), end = Event::create(0, true);
  start.record(s);
  copy_bytes(device->data(), Place::cuda(0), pinned->data(), Place::pinned(), n * sizeof(float), s);
  end.record(s);
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(Event::elapsed_ms(start, end), 0.0f);
  copy_bytes(back.data(), Place::host(), device->data(), Place::cuda(0), n * sizeof(float), s);
  EXPECT_EQ(back, ones);
}

// A graph waits, at a node, for work queued on another stream before each launch, and that
// stream waits for a node of each replay (record_across_capture / block_across_capture). Each
// round puts a new value through: side stream -> graph -> side stream, with slow copies before
// each hand-over, so a wait that did not hold would let a stale value through.
TEST(StreamGpu, EventsAcrossACaptureOrderEachReplayAgainstAnotherStream) {
  EMBER_REQUIRE_GPU();
  const Place dev = Place::cuda(0);
  const std::size_t big = std::size_t{64} << 20;
  auto x = Allocation::create(dev, big), y = Allocation::create(dev, big);
  auto g = Allocation::create(dev, sizeof(int)), h = Allocation::create(dev, sizeof(int));
  auto f = Allocation::create(dev, sizeof(int));
  auto in = Allocation::create(Place::pinned(), sizeof(int));
  auto out = Allocation::create(Place::pinned(), sizeof(int));
  zero_bytes(x->data(), dev, big);
  Stream compute = Stream::create(0), side = Stream::create(0);
  Event ready = Event::create(0), done = Event::create(0);
  const StreamHandle s = compute.handle();

  CudaGraph graph;
  graph.begin_capture(s);
  ready.block_across_capture(s);
  copy_bytes(h->data(), dev, g->data(), dev, sizeof(int), s);
  for (int k = 0; k < 4; ++k)
    copy_bytes(y->data(), dev, x->data(), dev, big, s);
  copy_bytes(f->data(), dev, h->data(), dev, sizeof(int), s);
  done.record_across_capture(s);
  ASSERT_EQ(graph.end_capture(), "");

  for (int round = 1; round <= 6; ++round) {
    *static_cast<int*>(in->data()) = round;
    copy_bytes(y->data(), dev, x->data(), dev, big, side.handle());
    copy_bytes(g->data(), dev, in->data(), Place::pinned(), sizeof(int), side.handle());
    ready.record_across_capture(side.handle());
    graph.launch(s);
    done.block_across_capture(side.handle());
    copy_bytes(out->data(), Place::pinned(), f->data(), dev, sizeof(int), side.handle());
    side.synchronize();
    EXPECT_EQ(*static_cast<const int*>(out->data()), round) << "round " << round;
    compute.synchronize();
  }
}

}  // namespace
}  // namespace ember
