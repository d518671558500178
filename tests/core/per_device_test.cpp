// PerDevice<T>: one object per device index, made once under concurrent first calls, never moved;
// NeverDestroyed<T>: constructed in place, usable as a static.
#include "ember/core/per_device.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/core/never_destroyed.hpp"

namespace ember {
namespace {

std::atomic<int> g_made{0};

struct Counted {
  explicit Counted(int d) : device(d) { ++g_made; }
  int device;
};

// PerDevice never deletes what it made; in Ember it is a static, so its objects stay reachable.
// These tests make PerDevice locals, so the objects are kept reachable here instead (LeakSanitizer
// reports only unreachable blocks).
std::vector<Counted*>& kept() {
  static NeverDestroyed<std::vector<Counted*>> all;
  return all.get();
}

std::unique_ptr<Counted> make_counted(int d) {
  static std::mutex mutex;  // first calls for different devices run concurrently
  auto c = std::make_unique<Counted>(d);
  const std::lock_guard lock(mutex);
  kept().push_back(c.get());
  return c;
}

TEST(PerDevice, MakesOneObjectPerDeviceOnFirstUse) {
  g_made = 0;
  PerDevice<Counted> per(make_counted);
  EXPECT_EQ(g_made.load(), 0);
  Counted& a = per.get(3);
  Counted& b = per.get(3);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.device, 3);
  EXPECT_EQ(per.get(kMaxDevices - 1).device, kMaxDevices - 1);
  EXPECT_EQ(g_made.load(), 2);
}

TEST(PerDevice, ConcurrentFirstCallsMakeOneObject) {
  g_made = 0;
  PerDevice<Counted> per(make_counted);
  std::vector<std::thread> threads;
  std::vector<Counted*> seen(16, nullptr);
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] { seen[static_cast<std::size_t>(t)] = &per.get(t % 2); });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(g_made.load(), 2);
  for (int t = 0; t < 16; ++t)
    EXPECT_EQ(seen[static_cast<std::size_t>(t)], &per.get(t % 2));
}

TEST(PerDevice, RejectsIndicesOutOfRange) {
  PerDevice<Counted> per(make_counted);
  EXPECT_THROW(per.get(-1), Error);
  EXPECT_THROW(per.get(kMaxDevices), Error);
}

TEST(PerDevice, AFailedMakeIsRetriedOnTheNextCall) {
  static std::atomic<int> attempts{0};
  attempts = 0;
  PerDevice<Counted> per([](int d) {
    if (attempts++ == 0) EMBER_THROW("first attempt fails");
    return make_counted(d);
  });
  EXPECT_THROW(per.get(0), Error);
  EXPECT_EQ(per.get(0).device, 0);
  EXPECT_EQ(attempts.load(), 2);
}

TEST(NeverDestroyed, ConstructsInPlaceWithArguments) {
  static NeverDestroyed<std::vector<int>> v(std::size_t{3}, 7);
  EXPECT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[2], 7);
  v->push_back(1);
  EXPECT_EQ(v.get().back(), 1);
}

}  // namespace
}  // namespace ember
