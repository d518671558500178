// The device calls the caching allocators make, behind an interface, so that their policy can be
// driven without a GPU: CI runs it against a host-memory stand-in whose failures and event
// completions the test controls, the GPU tests and production against the CUDA runtime.
//
// A backend is used by one allocator and only under that allocator's lock, so implementations
// need no locking of their own.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ember/core/device.hpp"

namespace ember {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // The place the memory lives at, for messages ("cuda:0", "pinned").
  virtual std::string describe() const = 0;

  // Returns `bytes` of memory, or nullptr when the device is out of memory. Any other failure
  // throws. The pointer is aligned to at least kAllocationAlignment (256) bytes.
  virtual void* malloc(std::size_t bytes) = 0;
  virtual void free(void* ptr) noexcept = 0;

  // An event that can be recorded on `stream`; the backend may hand out recycled events.
  virtual EventHandle acquire_event(StreamHandle stream) = 0;
  // Gives an event from acquire_event() back once it is no longer waited for.
  virtual void release_event(EventHandle event) noexcept = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  // True once the work queued before the event's recording has completed. Never blocks.
  virtual bool query_event(EventHandle event) = 0;
  // Blocks until the event has completed: the allocators only do this on their out-of-memory
  // path, before giving cached memory back.
  virtual void synchronize_event(EventHandle event) = 0;

  // Free and total bytes of the memory the backend allocates from.
  virtual DeviceMemoryInfo memory_info() = 0;
  // The stream an allocation made without naming one is for.
  virtual StreamHandle current_stream() = 0;
};

// cudaMalloc/cudaFree on `device`, events on its streams. Throws CudaUnavailableError when the
// build has no CUDA or the device does not exist.
std::unique_ptr<DeviceBackend> make_cuda_device_backend(int device);

// cudaHostAlloc/cudaFreeHost (portable pinned memory); events on the device of the stream they
// are recorded on. Throws CudaUnavailableError without CUDA.
std::unique_ptr<DeviceBackend> make_cuda_pinned_backend();

}  // namespace ember
