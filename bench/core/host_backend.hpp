// A DeviceBackend over host address space whose events complete at once: lets the quick
// benchmark run the caching policy on machines without a GPU. Segments are never touched, so
// even large ones cost only address space; so do the reservations of expandable segments
// (mapping only changes the protection of pages that are never written). Thread-safe, as
// backends must be: the allocator's streams call it at the same time.
//
// Segments come one after the other from one reserved range (never reused: a backend serves one
// run), not from the heap. Best fit takes the lowest address among free blocks of equal size,
// so the fragmentation a trace shows depends on the order of the segments' addresses; with
// heap memory that order depended on whatever else the process had allocated (the allocator's
// own bookkeeping among it), and a change to that bookkeeping alone moved trace (e)'s figure
// from 1.229 to 1.239. Here the addresses rise with every segment, as they mostly do on a
// fresh device.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "ember/core/device_backend.hpp"

namespace ember::bench {

class HostBackend final : public DeviceBackend {
 public:
  static constexpr std::size_t kGranule = std::size_t{2} << 20;  // as on an H100

  std::string describe() const override { return "host stand-in"; }
  // 1 TiB of address space for segments, as memory_info() reports.
  static constexpr std::size_t kSegmentSpace = std::size_t{1} << 40;

  HostBackend() = default;
  ~HostBackend() override {
    if (segments_ != nullptr) ::munmap(segments_, kSegmentSpace);
  }
  HostBackend(const HostBackend&) = delete;
  HostBackend& operator=(const HostBackend&) = delete;

  void* malloc(std::size_t bytes) override {
    const std::size_t padded = (bytes + 511) / 512 * 512;
    std::lock_guard<std::mutex> lock(mutex_);
    if (segments_ == nullptr) {
      void* p = ::mmap(nullptr, kSegmentSpace, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return nullptr;
      segments_ = static_cast<char*>(p);
    }
    if (padded > kSegmentSpace - used_) return nullptr;
    char* p = segments_ + used_;
    used_ += padded;
    ++mallocs;
    return p;
  }
  void free(void*) noexcept override {}
  EventHandle acquire_event(StreamHandle) override {
    return reinterpret_cast<EventHandle>(std::uintptr_t{16});
  }
  void release_event(EventHandle) noexcept override {}
  void record_event(EventHandle, StreamHandle) override {}
  bool query_event(EventHandle) override { return true; }
  void synchronize_event(EventHandle) override {}

  std::size_t map_granularity() override { return kGranule; }
  void* reserve_address(std::size_t bytes) override {
    const std::size_t padded = bytes + kGranule;
    void* p =
        ::mmap(nullptr, padded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    void* base = reinterpret_cast<void*>((a + kGranule - 1) / kGranule * kGranule);
    std::lock_guard<std::mutex> lock(mutex_);
    reservations_[base] = {p, padded};
    return base;
  }
  void release_address(void* base, std::size_t) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = reservations_.find(base);
    if (it == reservations_.end()) return;
    ::munmap(it->second.first, it->second.second);
    reservations_.erase(it);
  }
  bool map(void*, std::size_t) override { return true; }
  void unmap(void*, std::size_t) noexcept override {}

  DeviceMemoryInfo memory_info() override {
    return {std::uint64_t{1} << 40, std::uint64_t{1} << 40};
  }
  StreamHandle current_stream() override { return nullptr; }

  std::atomic<std::int64_t> mallocs{0};

 private:
  std::mutex mutex_;
  std::map<void*, std::pair<void*, std::size_t>> reservations_;
  char* segments_ = nullptr;  // the range segments come from, reserved at the first malloc
  std::size_t used_ = 0;
};

}  // namespace ember::bench
