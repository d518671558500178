// SyncedMemory's state machine. The device side is a second host buffer standing in for the
// device (the CUDA side runs in synced_memory_gpu_test.cpp).
#include "ember/core/synced_memory.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <vector>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using Head = SyncedMemory::Head;

SyncedMemory stand_in(std::size_t bytes) {
  return SyncedMemory(bytes, Place::host(), Place::host());
}

bool all_equal(const void* p, std::size_t n, unsigned char value) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != value) return false;
  }
  return true;
}

TEST(SyncedMemory, FirstTouchAllocatesAndZeroFillsTheSideTouched) {
  SyncedMemory cpu_first(100, Place::host(), Place::host());
  EXPECT_EQ(cpu_first.head(), Head::Uninitialized);
  const void* c = cpu_first.cpu_data();
  EXPECT_EQ(cpu_first.head(), Head::HeadAtCpu);
  EXPECT_TRUE(all_equal(c, 100, 0));
  EXPECT_TRUE(cpu_first.owns_cpu_data());
  EXPECT_FALSE(cpu_first.owns_gpu_data());  // the other side is not allocated yet

  SyncedMemory gpu_first(100, Place::host(), Place::host());
  const void* g = gpu_first.gpu_data();
  EXPECT_EQ(gpu_first.head(), Head::HeadAtGpu);
  EXPECT_TRUE(all_equal(g, 100, 0));
  EXPECT_FALSE(gpu_first.owns_cpu_data());

  SyncedMemory m1(64, Place::host(), Place::host());
  (void)m1.mutable_cpu_data();
  EXPECT_EQ(m1.head(), Head::HeadAtCpu);
  SyncedMemory m2(64, Place::host(), Place::host());
  EXPECT_TRUE(all_equal(m2.mutable_gpu_data(), 64, 0));
  EXPECT_EQ(m2.head(), Head::HeadAtGpu);
}

TEST(SyncedMemory, ReadsCopyOnlyWhenTheOtherSideIsNewer) {
  SyncedMemory m = stand_in(256);
  std::memset(m.mutable_cpu_data(), 7, 256);
  EXPECT_EQ(m.head(), Head::HeadAtCpu);
  // HEAD_AT_CPU -> gpu_data copies and leaves SYNCED.
  const void* g = m.gpu_data();
  EXPECT_EQ(m.head(), Head::Synced);
  EXPECT_TRUE(all_equal(g, 256, 7));
  // SYNCED: reads on either side copy nothing. Scribble on the device copy behind the
  // buffer's back; if cpu_data copied, the host copy would change.
  std::memset(const_cast<void*>(g), 9, 256);
  EXPECT_TRUE(all_equal(m.cpu_data(), 256, 7));
  EXPECT_EQ(m.head(), Head::Synced);
  EXPECT_TRUE(all_equal(m.gpu_data(), 256, 9));
  EXPECT_EQ(m.head(), Head::Synced);

  // HEAD_AT_GPU -> cpu_data copies back and leaves SYNCED.
  std::memset(m.mutable_gpu_data(), 3, 256);
  EXPECT_EQ(m.head(), Head::HeadAtGpu);
  EXPECT_TRUE(all_equal(m.cpu_data(), 256, 3));
  EXPECT_EQ(m.head(), Head::Synced);
  // HEAD_AT_GPU -> gpu_data: no copy, head stays.
  std::memset(m.mutable_gpu_data(), 4, 256);
  (void)m.gpu_data();
  EXPECT_EQ(m.head(), Head::HeadAtGpu);
  // HEAD_AT_CPU -> cpu_data: no copy, head stays.
  std::memset(m.mutable_cpu_data(), 5, 256);  // syncs (copies the 4s) first, then writes
  EXPECT_EQ(m.head(), Head::HeadAtCpu);
  (void)m.cpu_data();
  EXPECT_EQ(m.head(), Head::HeadAtCpu);
}

TEST(SyncedMemory, WritesSyncThenMoveTheHead) {
  SyncedMemory m = stand_in(32);
  std::memset(m.mutable_gpu_data(), 1, 32);  // HEAD_AT_GPU
  // mutable_cpu_data from HEAD_AT_GPU: copy to the host first, then the head moves.
  void* c = m.mutable_cpu_data();
  EXPECT_TRUE(all_equal(c, 32, 1));
  EXPECT_EQ(m.head(), Head::HeadAtCpu);
  std::memset(c, 2, 32);
  // mutable_gpu_data from HEAD_AT_CPU: copy to the device first.
  void* g = m.mutable_gpu_data();
  EXPECT_TRUE(all_equal(g, 32, 2));
  EXPECT_EQ(m.head(), Head::HeadAtGpu);
  // From SYNCED, each mutable accessor just moves the head.
  (void)m.cpu_data();
  EXPECT_EQ(m.head(), Head::Synced);
  (void)m.mutable_gpu_data();
  EXPECT_EQ(m.head(), Head::HeadAtGpu);
  (void)m.cpu_data();
  (void)m.mutable_cpu_data();
  EXPECT_EQ(m.head(), Head::HeadAtCpu);
}

TEST(SyncedMemory, AsyncPushNeedsTheHeadAtTheCpu) {
  SyncedMemory m = stand_in(48);
  EXPECT_THROW(m.async_push_to_device(nullptr), Error);  // UNINITIALIZED
  std::memset(m.mutable_cpu_data(), 6, 48);
  m.async_push_to_device(nullptr);
  EXPECT_EQ(m.head(), Head::Synced);
  EXPECT_TRUE(all_equal(m.gpu_data(), 48, 6));
  try {
    m.async_push_to_device(nullptr);  // SYNCED
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SYNCED"), std::string::npos) << e.what();
  }
  (void)m.mutable_gpu_data();
  EXPECT_THROW(m.async_push_to_device(nullptr), Error);  // HEAD_AT_GPU
}

TEST(SyncedMemory, AdoptsBorrowedMemoryAndNeverFreesIt) {
  std::vector<unsigned char> host(64, 11), device(64, 22);
  {
    SyncedMemory m = stand_in(64);
    (void)m.cpu_data();  // owned host copy first
    EXPECT_TRUE(m.owns_cpu_data());
    m.set_cpu_data(host.data());  // releases the owned copy, adopts the vector
    EXPECT_FALSE(m.owns_cpu_data());
    EXPECT_EQ(m.head(), Head::HeadAtCpu);
    EXPECT_EQ(m.cpu_data(), host.data());
    EXPECT_TRUE(all_equal(m.gpu_data(), 64, 11));  // copied from the adopted memory
    EXPECT_TRUE(m.owns_gpu_data());

    m.set_gpu_data(device.data());
    EXPECT_EQ(m.head(), Head::HeadAtGpu);
    EXPECT_FALSE(m.owns_gpu_data());
    EXPECT_EQ(m.gpu_data(), device.data());
    EXPECT_TRUE(all_equal(m.cpu_data(), 64, 22));  // into the adopted host memory
    EXPECT_EQ(host[0], 22);
    std::memset(m.mutable_cpu_data(), 33, 64);
    EXPECT_EQ(m.mutable_gpu_data(), device.data());
    EXPECT_EQ(device[63], 33);
  }
  // The buffer is gone; the vectors are intact (ASan would catch a free of them).
  EXPECT_EQ(host[10], 33);
  EXPECT_EQ(device[10], 33);
  SyncedMemory m = stand_in(8);
  EXPECT_THROW(m.set_cpu_data(nullptr), Error);
}

TEST(SyncedMemory, ZeroBytes) {
  SyncedMemory m = stand_in(0);
  EXPECT_EQ(m.cpu_data(), nullptr);
  EXPECT_EQ(m.gpu_data(), nullptr);
  EXPECT_EQ(m.head(), Head::Synced);
  EXPECT_EQ(m.size(), 0u);
}

TEST(SyncedMemory, HeadNames) {
  std::ostringstream os;
  os << Head::Uninitialized << ' ' << Head::HeadAtCpu << ' ' << Head::HeadAtGpu << ' '
     << Head::Synced;
  EXPECT_EQ(os.str(), "UNINITIALIZED HEAD_AT_CPU HEAD_AT_GPU SYNCED");
}

TEST(SyncedMemory, DeviceSideWithoutCudaIsAClearErrorAndChangesNothing) {
  if (cuda_available()) GTEST_SKIP() << "this machine has a CUDA device";
  SyncedMemory m(128, 0);
  EXPECT_EQ(m.host_place(), Place::host());
  EXPECT_EQ(m.device_place(), Place::cuda(0));
  std::memset(m.mutable_cpu_data(), 1, 128);
  for (auto call : {+[](SyncedMemory& s) { (void)s.gpu_data(); },
                    +[](SyncedMemory& s) { (void)s.mutable_gpu_data(); },
                    +[](SyncedMemory& s) { s.async_push_to_device(nullptr); },
                    +[](SyncedMemory& s) { s.set_gpu_data(reinterpret_cast<void*>(0x1000)); }}) {
    try {
      call(m);
      FAIL() << "expected CudaUnavailableError";
    } catch (const CudaUnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find("SyncedMemory"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
    EXPECT_EQ(m.head(), Head::HeadAtCpu);
  }
  EXPECT_TRUE(all_equal(m.cpu_data(), 128, 1));
}

}  // namespace
}  // namespace ember
