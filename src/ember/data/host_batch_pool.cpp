#include "ember/data/host_batch_pool.hpp"

#include <chrono>

#include "ember/core/error.hpp"

namespace ember::data {

HostBatchPool::HostBatchPool(BatchLayout layout, std::int64_t capacity, Allocator& allocator)
    : layout_(std::move(layout)), capacity_(capacity), allocator_(allocator) {
  EMBER_CHECK(capacity > 0, "HostBatchPool: batch capacity must be positive, got ", capacity);
  EMBER_CHECK(allocator.place().host_accessible(),
              "HostBatchPool: host batches need host-accessible memory, not ", allocator.place(),
              " (allocator ", allocator.name(), ")");
}

std::unique_ptr<HostBatch> HostBatchPool::make() {
  // Made outside the lock: pinning takes long, and releases must not wait for it.
  const auto t0 = std::chrono::steady_clock::now();
  auto batch = std::make_unique<HostBatch>(layout_, capacity_, allocator_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lock(mutex_);
  make_seconds_ += seconds;
  return batch;
}

void HostBatchPool::reserve(std::int64_t count) {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (static_cast<std::int64_t>(all_.size()) >= count) return;
    }
    auto batch = make();
    std::lock_guard lock(mutex_);
    free_.push_back(batch.get());
    all_.push_back(std::move(batch));
  }
}

HostBatch* HostBatchPool::acquire() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      HostBatch* b = free_.back();
      free_.pop_back();
      b->clear();
      return b;
    }
  }
  auto fresh = make();
  std::lock_guard lock(mutex_);
  ++late_;
  all_.push_back(std::move(fresh));
  return all_.back().get();
}

void HostBatchPool::release(HostBatch* batch) {
  std::lock_guard lock(mutex_);
  free_.push_back(batch);
}

HostBatchPoolStats HostBatchPool::stats() const {
  std::lock_guard lock(mutex_);
  HostBatchPoolStats s;
  s.batches = static_cast<std::int64_t>(all_.size());
  s.late_batches = late_;
  s.free_batches = static_cast<std::int64_t>(free_.size());
  s.bytes_each = BatchBufferPlan(layout_, capacity_, capacity_).total_bytes;
  s.make_seconds = make_seconds_;
  return s;
}

}  // namespace ember::data
