// One logical buffer with a host copy and a device copy (after Caffe's SyncedMemory). The head
// says which copy is current:
//   Uninitialized  nothing allocated yet
//   HeadAtCpu      the host copy is newer (or the only one)
//   HeadAtGpu      the device copy is newer (or the only one)
//   Synced         both hold the same bytes
// Reads (cpu_data, gpu_data) copy only when the other side is newer and leave the state Synced;
// writes (mutable_*) sync first and then move the head to their side. The first touch of an
// Uninitialized buffer allocates and zero-fills the side touched. async_push_to_device() moves
// HeadAtCpu to Synced with a copy queued on a stream, for the data prefetcher.
//
// Either side can adopt memory the buffer does not own (set_cpu_data / set_gpu_data); the buffer
// never frees it. Not thread-safe, like a tensor. Without CUDA (or without the device) every
// device-side call throws CudaUnavailableError and leaves the buffer unchanged.
#pragma once

#include <cstddef>
#include <ostream>

#include "ember/core/allocation.hpp"
#include "ember/core/device.hpp"
#include "ember/core/place.hpp"

namespace ember {

class SyncedMemory {
 public:
  enum class Head { Uninitialized, HeadAtCpu, HeadAtGpu, Synced };

  // Host side: pinned when a CUDA device is present (so copies can be asynchronous), pageable
  // otherwise. Device side: cuda:`device`.
  explicit SyncedMemory(std::size_t bytes = 0, int device = 0);
  // `host_place` must be host or pinned. `device_place` is normally cuda:N; a host-accessible
  // place works too and serves as a stand-in device (the CPU tests drive every transition so).
  SyncedMemory(std::size_t bytes, Place host_place, Place device_place);
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  const void* cpu_data();
  const void* gpu_data();
  void* mutable_cpu_data();
  void* mutable_gpu_data();

  // Adopts `data` (at least size() bytes, not owned) as the host copy and makes it the head.
  // Memory the buffer owned on that side is released.
  void set_cpu_data(void* data);
  // The same for the device copy: `data` must be memory at device_place().
  void set_gpu_data(void* data);

  // HeadAtCpu -> Synced: queues the host-to-device copy on `stream` and returns at once. The
  // host copy must not be written until the stream has reached the copy.
  void async_push_to_device(StreamHandle stream);

  Head head() const { return head_; }
  std::size_t size() const { return size_; }
  int device() const { return device_place_.device(); }
  Place host_place() const { return host_place_; }
  Place device_place() const { return device_place_; }
  bool owns_cpu_data() const { return cpu_ != nullptr && cpu_owned_ != nullptr; }
  bool owns_gpu_data() const { return gpu_ != nullptr && gpu_owned_ != nullptr; }

 private:
  void to_cpu();
  void to_gpu();
  void require_device(const char* what) const;
  void allocate_cpu();
  void allocate_gpu();

  std::size_t size_;
  Place host_place_;
  Place device_place_;
  Head head_ = Head::Uninitialized;
  void* cpu_ = nullptr;
  void* gpu_ = nullptr;
  AllocationPtr cpu_owned_;  // null while the host side is borrowed or absent
  AllocationPtr gpu_owned_;
};

const char* to_string(SyncedMemory::Head head);
std::ostream& operator<<(std::ostream& os, SyncedMemory::Head head);

}  // namespace ember
