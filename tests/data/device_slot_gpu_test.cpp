// A device slot of the input pipeline takes its memory from the pool of the current (compute)
// stream, which hands out a block freed on the host while kernels queued there still write it;
// the copy stream then fills the slot. Its first copies must wait for that queued work, as every
// later copy waits for the slot's release (a slot made late, mid-training, once got a block the
// step still wrote: garbage CSR offsets in the next batch and a kernel that never ended).
//
// The compute stream is held shut by a gate (a host function on another stream that returns only
// when the test opens it), so the order is the same on every run: fills queued behind the gate
// over blocks freed at once, a slot of their size made (one of those blocks, as the pool reuses
// them), a pattern copied into it on the copy stream, then the gate opened. Without the wait the
// copy lands first and the fills overwrite it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "ember/core/copy.hpp"
#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"
#include "ember/data/device_transfer.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/tensor.hpp"
#include "support/test_support.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ember::data {
namespace {

#if EMBER_WITH_CUDA

// Blocks a stream until open() (the host function runs on CUDA's callback thread and calls no
// CUDA API, as host functions must not).
class StreamGate {
 public:
  explicit StreamGate(int device) : stream_(Stream::create(device)) {
    EXPECT_EQ(cudaLaunchHostFunc(stream_.handle(), &StreamGate::wait, this), cudaSuccess);
  }
  ~StreamGate() { open(); }
  StreamHandle stream() const { return stream_.handle(); }
  void open() { open_.store(true); }

 private:
  static void wait(void* self) {
    const auto* gate = static_cast<const StreamGate*>(self);
    while (!gate->open_.load())
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  Stream stream_;
  std::atomic<bool> open_{false};
};

TEST(DeviceSlotGpu, ASlotMadeWhileTheComputeStreamWritesFreedMemoryWaitsForIt) {
  EMBER_REQUIRE_GPU();
  const Place gpu = Place::cuda(0);
  DeviceGuard guard(0);
  const StreamHandle compute = current_stream(0);
  constexpr std::int64_t kFloats = std::int64_t{1} << 22;  // 16 MiB
  StreamGate gate(0);
  Event gate_passed = Event::create(0);
  gate_passed.record(gate.stream());
  gate_passed.block(compute);
  {
    std::vector<Tensor> blocks;
    for (int i = 0; i < 4; ++i)
      blocks.push_back(Tensor::empty({kFloats}, DType::F32, gpu));
    for (const Tensor& b : blocks)
      ops::fill(b, 0.0, compute);
  }  // freed on the host; the fills wait behind the gate
  DeviceSlot slot({gpu}, kFloats * sizeof(float));
  const StreamHandle copies = copy_stream(0);
  EXPECT_TRUE(slot.wait_for_release(0, copies))
      << "the new slot's copies do not wait for the compute stream's queued work";
  std::vector<float> pattern(static_cast<std::size_t>(kFloats));
  for (std::size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<float>(i % 1000) + 1.0f;
  const Tensor staged = Tensor::empty({kFloats}, DType::F32, Place::pinned());
  std::copy(pattern.begin(), pattern.end(), staged.data<float>());
  copy_bytes(slot.memory(0)->bytes(), gpu, staged.data(), Place::pinned(),
             pattern.size() * sizeof(float), copies);
  // Give an unordered copy time to land before the fills are let through.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.open();
  synchronize_device(0);
  std::vector<float> back(pattern.size());
  copy_bytes(back.data(), Place::host(), slot.memory(0)->bytes(), gpu, back.size() * sizeof(float));
  EXPECT_EQ(back, pattern) << "queued fills overwrote the slot's first copy";
}

#else

TEST(DeviceSlotGpu, ASlotMadeWhileTheComputeStreamWritesFreedMemoryWaitsForIt) {
  EMBER_REQUIRE_GPU();
}

#endif

}  // namespace
}  // namespace ember::data
