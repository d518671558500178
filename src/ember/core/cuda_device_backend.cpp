// The CUDA runtime behind the caching allocators. Compiled in every build: without CUDA the
// factories throw CudaUnavailableError, so callers need no #if of their own.
#include <unistd.h>

#include <unordered_map>
#include <vector>

#include "ember/core/device_backend.hpp"
#include "ember/core/error.hpp"
#include "ember/core/place.hpp"
#include "ember/core/stream.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember {

#if EMBER_WITH_CUDA

namespace {

bool query(EventHandle event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
    return false;
  }
  EMBER_CUDA_CHECK(status);
  return false;
}

EventHandle create_event_on(int device) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  // Timing off: the events only order reuse, and untimed events are cheaper to record.
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

class CudaDeviceBackend final : public DeviceBackend {
 public:
  explicit CudaDeviceBackend(int device) : device_(device) {
    require_cuda_device(device, "the caching device allocator");
  }
  ~CudaDeviceBackend() override {
    for (EventHandle e : free_events_) (void)cudaEventDestroy(e);
  }

  std::string describe() const override { return Place::cuda(device_).to_string(); }

  void* malloc(std::size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    EMBER_CUDA_CHECK(status);
    return p;
  }

  void free(void* ptr) noexcept override {
    int previous = -1;
    (void)cudaGetDevice(&previous);
    if (previous != device_) (void)cudaSetDevice(device_);
    (void)cudaFree(ptr);
    if (previous != device_ && previous >= 0) (void)cudaSetDevice(previous);
  }

  EventHandle acquire_event(StreamHandle) override {
    if (!free_events_.empty()) {
      EventHandle e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    return create_event_on(device_);
  }
  void release_event(EventHandle event) noexcept override {
    try {
      free_events_.push_back(event);
    } catch (...) {
      (void)cudaEventDestroy(event);
    }
  }
  void record_event(EventHandle event, StreamHandle stream) override {
    EMBER_CUDA_CHECK(cudaEventRecord(event, stream));
  }
  bool query_event(EventHandle event) override { return query(event); }
  void synchronize_event(EventHandle event) override {
    EMBER_CUDA_CHECK(cudaEventSynchronize(event));
  }

  DeviceMemoryInfo memory_info() override { return device_memory_info(device_); }
  StreamHandle current_stream() override { return ember::current_stream(device_); }

 private:
  int device_;
  std::vector<EventHandle> free_events_;
};

class CudaPinnedBackend final : public DeviceBackend {
 public:
  CudaPinnedBackend() { require_cuda_device(0, "the caching pinned allocator"); }
  ~CudaPinnedBackend() override {
    for (auto& list : free_events_) {
      for (EventHandle e : list) (void)cudaEventDestroy(e);
    }
  }

  std::string describe() const override { return Place::pinned().to_string(); }

  void* malloc(std::size_t bytes) override {
    void* p = nullptr;
    // Portable: the block may serve copies to any device.
    const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    EMBER_CUDA_CHECK(status);
    return p;
  }
  void free(void* ptr) noexcept override { (void)cudaFreeHost(ptr); }

  EventHandle acquire_event(StreamHandle stream) override {
    // An event can only be recorded on a stream of the device it was created on.
    const int device = stream_device(stream);
    if (static_cast<std::size_t>(device) < free_events_.size() && !free_events_[device].empty()) {
      EventHandle e = free_events_[device].back();
      free_events_[device].pop_back();
      return e;
    }
    EventHandle e = create_event_on(device);
    device_of_[e] = device;
    return e;
  }
  void release_event(EventHandle event) noexcept override {
    try {
      const int device = device_of_.at(event);
      if (free_events_.size() <= static_cast<std::size_t>(device)) free_events_.resize(device + 1);
      free_events_[device].push_back(event);
    } catch (...) {
      device_of_.erase(event);
      (void)cudaEventDestroy(event);
    }
  }
  void record_event(EventHandle event, StreamHandle stream) override {
    EMBER_CUDA_CHECK(cudaEventRecord(event, stream));
  }
  bool query_event(EventHandle event) override { return query(event); }
  void synchronize_event(EventHandle event) override {
    EMBER_CUDA_CHECK(cudaEventSynchronize(event));
  }

  DeviceMemoryInfo memory_info() override {
    const long page = sysconf(_SC_PAGESIZE);
    const long free_pages = sysconf(_SC_AVPHYS_PAGES);
    const long total_pages = sysconf(_SC_PHYS_PAGES);
    return {static_cast<unsigned long long>(free_pages) * static_cast<unsigned long long>(page),
            static_cast<unsigned long long>(total_pages) * static_cast<unsigned long long>(page)};
  }
  StreamHandle current_stream() override { return nullptr; }

 private:
  static int stream_device(StreamHandle stream) {
    int device = -1;
#if CUDART_VERSION >= 12080
    if (stream != nullptr && cudaStreamGetDevice(stream, &device) == cudaSuccess) return device;
    (void)cudaGetLastError();
#endif
    EMBER_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }

  std::vector<std::vector<EventHandle>> free_events_;
  std::unordered_map<EventHandle, int> device_of_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_device_backend(int device) {
  return std::make_unique<CudaDeviceBackend>(device);
}
std::unique_ptr<DeviceBackend> make_cuda_pinned_backend() {
  return std::make_unique<CudaPinnedBackend>();
}

#else

std::unique_ptr<DeviceBackend> make_cuda_device_backend(int) {
  throw_cuda_unavailable("the caching device allocator");
}
std::unique_ptr<DeviceBackend> make_cuda_pinned_backend() {
  throw_cuda_unavailable("the caching pinned allocator");
}

#endif

}  // namespace ember
