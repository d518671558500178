// SpinMutex: mutual exclusion under contention, with more threads than cores (the sleeping path).
#include "ember/core/spin_mutex.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace ember {
namespace {

TEST(SpinMutex, ExcludesUnderContention) {
  SpinMutex m;
  // A non-atomic read-modify-write with a window in the middle: lost updates show a broken lock.
  long counter = 0;
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIterations; ++i) {
        std::lock_guard<SpinMutex> lock(m);
        const long seen = counter;
        if (i % 64 == 0) std::this_thread::yield();
        counter = seen + 1;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(counter, static_cast<long>(kThreads) * kIterations);
}

TEST(SpinMutex, TryLockFailsWhileHeld) {
  SpinMutex m;
  EXPECT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  std::thread other([&] { EXPECT_FALSE(m.try_lock()); });
  other.join();
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

}  // namespace
}  // namespace ember
