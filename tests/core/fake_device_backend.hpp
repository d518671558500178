// A host-memory stand-in for the device, for driving the caching allocators' policy without a
// GPU. The test decides when the "device" runs out of memory and when work queued on a stream
// (and so the events recorded there) completes. Its memory is real host memory, so tests can
// write to the blocks they get and detect overlaps.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ember/core/device_backend.hpp"

namespace ember::testing {

// Stand-in stream handles: never dereferenced, only compared.
inline StreamHandle fake_stream(int i) {
  return reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(0x1000 * (i + 1)));
}

class FakeDeviceBackend final : public DeviceBackend {
 public:
  explicit FakeDeviceBackend(std::string name = "cuda:0") : name_(std::move(name)) {}

  ~FakeDeviceBackend() override {
    // The allocator owns the backend and destroys it last: by then it must have given back
    // every segment and every event.
    if (!live_.empty()) ADD_FAILURE() << live_.size() << " fake segments were never freed";
    for (std::size_t i = 0; i < events_.size(); ++i) {
      if (events_[i].acquired) ADD_FAILURE() << "fake event " << i << " was never released";
    }
    for (auto& [p, n] : live_) std::free(p);
  }

  // --- what the test controls ----------------------------------------------------------------
  void set_capacity(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = bytes;
  }
  void fail_next_mallocs(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_next_ = n;
  }
  void set_current_stream(StreamHandle s) {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = s;
  }
  // The work queued on `stream` so far has finished: its events complete.
  void complete_stream(StreamHandle stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Event& e : events_) {
      if (e.recorded && e.stream == stream) e.completed = true;
    }
  }
  void complete_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Event& e : events_) e.completed = true;
  }

  // --- what the test inspects ----------------------------------------------------------------
  std::size_t used() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }
  std::size_t segments() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.size();
  }
  std::int64_t mallocs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return mallocs_;
  }
  std::int64_t failed_mallocs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_mallocs_;
  }
  std::int64_t frees() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return frees_;
  }
  std::int64_t synchronizations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return synchronizations_;
  }
  std::int64_t records() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return records_;
  }
  std::size_t events_acquired() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const Event& e : events_) n += e.acquired ? 1 : 0;
    return n;
  }

  // --- DeviceBackend -------------------------------------------------------------------------
  std::string describe() const override { return name_; }

  void* malloc(std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fail_next_ > 0 || bytes > capacity_ - used_) {
      if (fail_next_ > 0) --fail_next_;
      ++failed_mallocs_;
      return nullptr;
    }
    void* p = std::aligned_alloc(512, (bytes + 511) / 512 * 512);
    if (p == nullptr) return nullptr;
    live_[p] = bytes;
    used_ += bytes;
    ++mallocs_;
    return p;
  }

  void free(void* ptr) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) {
      ADD_FAILURE() << "fake backend: free of " << ptr << ", which is not a segment";
      return;
    }
    used_ -= it->second;
    live_.erase(it);
    std::free(ptr);
    ++frees_;
  }

  EventHandle acquire_event(StreamHandle) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < events_.size(); ++i) {
      if (!events_[i].acquired) {
        events_[i] = Event{};
        events_[i].acquired = true;
        return handle(i);
      }
    }
    events_.push_back(Event{});
    events_.back().acquired = true;
    return handle(events_.size() - 1);
  }
  void release_event(EventHandle event) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    Event& e = at(event);
    if (!e.acquired) ADD_FAILURE() << "fake event released twice";
    e.acquired = false;
  }
  void record_event(EventHandle event, StreamHandle stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    Event& e = at(event);
    if (!e.acquired) ADD_FAILURE() << "recording a fake event that was not acquired";
    e.recorded = true;
    e.completed = false;
    e.stream = stream;
    ++records_;
  }
  bool query_event(EventHandle event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Event& e = at(event);
    return !e.recorded || e.completed;
  }
  void synchronize_event(EventHandle event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    at(event).completed = true;  // waiting lets the device finish the work
    ++synchronizations_;
  }

  DeviceMemoryInfo memory_info() override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t total = capacity_ == SIZE_MAX ? std::size_t{1} << 40 : capacity_;
    return {total - std::min(total, used_), total};
  }
  StreamHandle current_stream() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return current_;
  }

 private:
  struct Event {
    bool acquired = false;
    bool recorded = false;
    bool completed = false;
    StreamHandle stream = nullptr;
  };
  static EventHandle handle(std::size_t i) {
    return reinterpret_cast<EventHandle>(static_cast<std::uintptr_t>((i + 1) * 16));
  }
  Event& at(EventHandle h) {
    const auto i = reinterpret_cast<std::uintptr_t>(h) / 16 - 1;
    return events_.at(i);
  }

  std::string name_;
  mutable std::mutex mutex_;
  std::size_t capacity_ = SIZE_MAX;
  std::size_t used_ = 0;
  int fail_next_ = 0;
  StreamHandle current_ = fake_stream(0);
  std::map<void*, std::size_t> live_;
  std::vector<Event> events_;
  std::int64_t mallocs_ = 0, failed_mallocs_ = 0, frees_ = 0, synchronizations_ = 0, records_ = 0;
};

}  // namespace ember::testing
