// A DeviceBackend over host memory whose events complete at once: lets the quick benchmark run
// the caching policy on machines without a GPU. Segments are never touched, so even large
// ones cost only address space.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "ember/core/device_backend.hpp"

namespace ember::bench {

class HostBackend final : public DeviceBackend {
 public:
  std::string describe() const override { return "host stand-in"; }
  void* malloc(std::size_t bytes) override {
    ++mallocs;
    return std::aligned_alloc(512, (bytes + 511) / 512 * 512);
  }
  void free(void* ptr) noexcept override { std::free(ptr); }
  EventHandle acquire_event(StreamHandle) override {
    return reinterpret_cast<EventHandle>(std::uintptr_t{16});
  }
  void release_event(EventHandle) noexcept override {}
  void record_event(EventHandle, StreamHandle) override {}
  bool query_event(EventHandle) override { return true; }
  void synchronize_event(EventHandle) override {}
  DeviceMemoryInfo memory_info() override { return {std::uint64_t{1} << 40, std::uint64_t{1} << 40}; }
  StreamHandle current_stream() override { return nullptr; }

  std::int64_t mallocs = 0;
};

}  // namespace ember::bench
