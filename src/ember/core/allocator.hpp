// One small allocator interface for every place, the raw allocators behind it, and the default
// allocator of each place (what Allocation::create uses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/core/device.hpp"
#include "ember/core/place.hpp"

namespace ember {

// Every host allocation Ember makes starts on this boundary, like the arena's blocks: wide
// enough for any vector load and for cuBLAS/OpenBLAS.
inline constexpr std::size_t kAllocationAlignment = 256;

class Allocator {
 public:
  virtual ~Allocator() = default;

  virtual Place place() const = 0;
  virtual std::string name() const = 0;

  // Returns memory for `bytes` (nullptr for 0 bytes). Throws OutOfMemoryError naming the place
  // and the size when it cannot.
  virtual void* allocate(std::size_t bytes) = 0;
  // Returns memory from allocate(); `bytes` is the size that was asked for.
  virtual void deallocate(void* ptr, std::size_t bytes) noexcept = 0;

  // Stream-ordered allocators (the caching ones) hand out memory for use on `stream` and reuse it
  // safely in stream order; raw allocators ignore the stream.
  virtual void* allocate(std::size_t bytes, StreamHandle stream) { return allocate(bytes); }
  // Marks `ptr` as in use on `stream` as well, so that it is not reused before the work queued
  // there so far has finished. A no-op for raw allocators.
  virtual void record_stream(void* ptr, StreamHandle stream) {}
};

// Aligned malloc/free.
class HostAllocator final : public Allocator {
 public:
  using Allocator::allocate;
  Place place() const override { return Place::host(); }
  std::string name() const override { return "host"; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
};

// cudaHostAlloc/cudaFreeHost: page-locked host memory, usable for asynchronous copies.
class PinnedHostAllocator final : public Allocator {
 public:
  using Allocator::allocate;
  Place place() const override { return Place::pinned(); }
  std::string name() const override { return "pinned"; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
};

// cudaMallocManaged/cudaFree: unified memory.
class ManagedAllocator final : public Allocator {
 public:
  using Allocator::allocate;
  Place place() const override { return Place::managed(); }
  std::string name() const override { return "managed"; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
};

// cudaMalloc/cudaFree on one device.
class DeviceAllocator final : public Allocator {
 public:
  using Allocator::allocate;
  explicit DeviceAllocator(int device) : device_(device) {}
  Place place() const override { return Place::cuda(device_); }
  std::string name() const override { return "cuda_raw"; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;

 private:
  int device_;
};

// The raw (uncached) allocator of a place; lives for the whole process.
Allocator& raw_allocator(Place place);

// The allocator Ember uses for new memory at `place`: the caching allocators for CUDA devices and
// pinned memory, the raw ones otherwise. EMBER_ALLOCATOR=raw in the environment turns caching
// off (for debugging memory errors with tools that track cudaMalloc).
Allocator& default_allocator(Place place);

// "1536 bytes (1.50 KiB)": exact for the record, readable for people.
std::string format_bytes(std::uint64_t bytes);

}  // namespace ember
