#include "ember/data/device_transfer.hpp"

#include <exception>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "ember/core/copy.hpp"
#include "ember/core/device.hpp"
#include "ember/core/log.hpp"

namespace ember::data {

namespace {

// How often the collector looks whether a batch's copies are done. cudaEventSynchronize would
// spin a core at full load under CUDA's default scheduling (one context, fewer than the cores),
// which takes a core from the reader workers when they use every core; a short sleep between
// queries leaves it to them. The wait is on the collector's critical path (a DLRM batch of 65536
// samples takes about half a millisecond to copy), so the interval is short and the collector
// asks the kernel for a tight timer (Linux's default slack of 50 us would double it).
constexpr std::chrono::microseconds kCopyPollInterval{20};
constexpr unsigned long kCopyThreadTimerSlackNs = 1000;

}  // namespace

DeviceSlot::DeviceSlot(const std::vector<Place>& devices, std::size_t bytes) : devices_(devices) {
  for (const Place& p : devices_) {
    DeviceGuard guard(p.device());
    memory_.push_back(Allocation::create(p, bytes));
    ready_.push_back(Event::create(p.device()));
    released_.push_back(Event::create(p.device()));
    // The memory comes from the pool of this thread's current stream (the compute stream for the
    // slots made up front, the copy stream for those the collector makes late: CopyThread), which
    // hands out a block freed on the host while kernels queued there may still use it; the copy
    // stream writes it. So the slot's first copies wait, like every later one, for a release:
    // the work queued on that stream so far. (A slot made late on the compute stream, while
    // training ran, got a block the step still wrote: garbage CSR offsets in the next batch, at
    // Criteo-Kaggle scale.)
    released_.back().record(current_stream(p.device()));
    release_recorded_.push_back(true);
  }
}

DeviceSlot::~DeviceSlot() {
  for (std::size_t d = 0; d < released_.size(); ++d) {
    if (!release_recorded_[d]) continue;
    try {
      released_[d].synchronize();
    } catch (const std::exception& e) {
      EMBER_LOG_ERROR("input pipeline: waiting for a released batch: {}", e.what());
    }
  }
}

bool DeviceSlot::wait_for_release(std::size_t d, StreamHandle stream) {
  if (!release_recorded_[d]) return false;
  const bool pending = !released_[d].query();
  released_[d].block(stream);
  return pending;
}

void DeviceSlot::mark_released() noexcept {
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    const int device = devices_[d].device();
    try {
      DeviceGuard guard(device);
      released_[d].record(current_stream(device));
      release_recorded_[d] = true;
    } catch (const std::exception& e) {
      EMBER_LOG_ERROR("input pipeline: releasing a device batch: {}", e.what());
      release_recorded_[d] = false;
    }
  }
}

DeviceTransfer::DeviceTransfer(const BatchLayout& layout, std::vector<Place> devices,
                               std::int64_t batch_size, int reserved_slots, RankSlice slice)
    : layout_(layout),
      devices_(std::move(devices)),
      slice_(slice),
      // Label and dense rows of the largest share, the CSRs of the whole batch.
      plan_(layout_,
            local_shares(batch_size, slice_, static_cast<int>(devices_.size())).front().size,
            batch_size),
      slots_(std::make_shared<LeasePool<DeviceSlot>>(
          [devices = devices_, bytes = plan_.total_bytes] {
            return std::make_unique<DeviceSlot>(devices, bytes);
          },
          LeasePool<DeviceSlot>::Reuse::Oldest, [](DeviceSlot& slot) { slot.mark_released(); })) {
  slots_->reserve(reserved_slots);
}

DeviceTransfer::CopyThread::CopyThread(const std::vector<Place>& devices) {
#if defined(__linux__)
  (void)::prctl(PR_SET_TIMERSLACK, kCopyThreadTimerSlackNs);  // best effort
#endif
  for (const Place& p : devices) {
    if (p.is_cuda())
      guards_.push_back(std::make_unique<StreamGuard>(p.device(), copy_stream(p.device())));
  }
}

DeviceTransfer::CopyThread::~CopyThread() {
  while (!guards_.empty())
    guards_.pop_back();
}

Batch DeviceTransfer::copy(HostBatchLease host, const BatchInfo& info) {
  LeasePool<DeviceSlot>::Lease slot = slots_->acquire();
  const auto shares = local_shares(host->size(), slice_, static_cast<int>(devices_.size()));
  try {
    issue_copies(*host, *slot, shares, info.keys_from_ranks);
    // The host batch is free once its copies are done. Waiting here blocks only the collector,
    // while the copies overlap whatever the devices compute.
    wait_for_copies(*slot);
  } catch (...) {
    slot->uniform_offsets().clear();  // what the failed copies left is unknown
    drain_copy_streams();
    throw;
  }
  return views(share_lease<DeviceSlot>(std::move(slot), slots_), *host, info, shares);
}

void DeviceTransfer::issue_copies(const HostBatch& host, DeviceSlot& slot,
                                  const std::vector<Share>& shares, bool own_keys_only) {
  const auto start = TimeCounter::Clock::now();
  const BatchBufferPlan& hp = host.plan();
  // The keys to copy, per input: all of them, or those of this process's samples (the ranks
  // gather the rest on the devices). The offsets, unless the slot holds them already.
  const auto inputs = static_cast<std::size_t>(host.num_inputs());
  std::vector<std::pair<std::size_t, std::size_t>> keys(inputs);
  std::vector<bool> copy_offsets(inputs, true);
  std::vector<DeviceSlot::UniformOffsets>& there = slot.uniform_offsets();
  there.resize(inputs);
  const std::vector<std::int64_t>* uniform = host.known_uniform_row_keys(0, host.size());
  for (int i = 0; i < host.num_inputs(); ++i) {
    const auto si = static_cast<std::size_t>(i);
    const std::int64_t csr_rows = host.size() * layout_.sparse[si].slot_num;
    const std::int64_t per_row = uniform != nullptr ? (*uniform)[si] : -1;
    copy_offsets[si] = per_row < 0 || there[si].rows < csr_rows || there[si].per_row != per_row;
    // Known again once the copies are queued (a failure forgets it: copy()).
    there[si] = per_row < 0 ? DeviceSlot::UniformOffsets{}
                            : DeviceSlot::UniformOffsets{
                                  copy_offsets[si] ? csr_rows : there[si].rows, per_row};
    const std::int64_t slots = layout_.sparse[si].slot_num;
    const std::int64_t* off = host.row_offsets(i);
    const std::int64_t first = own_keys_only ? off[shares.front().offset * slots] : 0;
    const std::int64_t end =
        own_keys_only ? off[(shares.back().offset + shares.back().size) * slots] : host.nnz(i);
    keys[si] = {static_cast<std::size_t>(first) * layout_.key_size(),
                static_cast<std::size_t>(end - first) * layout_.key_size()};
  }
  const std::byte* src = host.allocation()->bytes();
  const auto label_row = static_cast<std::size_t>(layout_.label_dim) * sizeof(float);
  const auto dense_row = static_cast<std::size_t>(layout_.dense_dim) * sizeof(float);
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    const Place place = devices_[d];
    DeviceGuard guard(place.device());
    const StreamHandle stream = copy_stream(place.device());
    if (slot.wait_for_release(d, stream)) slot_reuse_waits_.fetch_add(1, std::memory_order_relaxed);
    std::byte* dst = slot.memory(d)->bytes();
    const auto copy = [&](std::size_t dst_offset, std::size_t src_offset, std::size_t bytes) {
      copy_bytes(dst + dst_offset, place, src + src_offset, host.place(), bytes, stream);
    };
    const auto first = static_cast<std::size_t>(shares[d].offset);
    const auto rows = static_cast<std::size_t>(shares[d].size);
    copy(plan_.label, hp.label + first * label_row, rows * label_row);
    copy(plan_.dense, hp.dense + first * dense_row, rows * dense_row);
    for (int i = 0; i < host.num_inputs(); ++i) {
      const auto si = static_cast<std::size_t>(i);
      const auto csr_rows = static_cast<std::size_t>(host.size() * layout_.sparse[si].slot_num);
      if (copy_offsets[si]) {
        copy(plan_.row_offsets[si], hp.row_offsets[si], (csr_rows + 1) * sizeof(std::int64_t));
      }
      copy(plan_.values[si] + keys[si].first, hp.values[si] + keys[si].first, keys[si].second);
    }
    slot.ready(d).record(stream);
  }
  copy_issue_.add_since(start);
}

void DeviceTransfer::wait_for_copies(DeviceSlot& slot) {
  const auto start = TimeCounter::Clock::now();
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    while (!slot.ready(d).query())
      std::this_thread::sleep_for(kCopyPollInterval);
    slot.ready(d).synchronize();  // done already; reports any error of the copies
  }
  copy_wait_.add_since(start);
}

void DeviceTransfer::drain_copy_streams() noexcept {
  for (const Place& place : devices_) {
    try {
      synchronize_stream(copy_stream(place.device()));
    } catch (const std::exception& e) {
      EMBER_LOG_ERROR("input pipeline: after a failed copy: {}", e.what());
    }
  }
}

Batch DeviceTransfer::views(const std::shared_ptr<DeviceSlot>& slot, const HostBatch& host,
                            const BatchInfo& info, const std::vector<Share>& shares) const {
  const std::int64_t n = host.size();
  Batch batch = empty_batch(info, n);
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    const AllocationPtr& owned = slot->memory(d);
    const AllocationPtr memory =
        Allocation::borrow(owned->data(), owned->size(), devices_[d], slot);
    BatchViews v = view_buffers(memory, plan_, layout_, shares[d].size, host);
    DeviceBatch db = device_share(std::move(v.label), std::move(v.dense), std::move(v.sparse),
                                  shares[d], n, info.sequence, devices_[d]);
    db.ready = std::shared_ptr<const Event>(slot, &slot->ready(d));
    db.keys_from_ranks = info.keys_from_ranks;
    batch.devices.push_back(std::move(db));
  }
  return batch;
}

DeviceTransferStats DeviceTransfer::stats() const {
  const auto pool = slots_->stats();
  DeviceTransferStats s;
  s.slots = pool.objects;
  s.late_slots = pool.late;
  s.slot_reuse_waits = slot_reuse_waits_.load();
  s.copy_issue_seconds = copy_issue_.seconds();
  s.copy_wait_seconds = copy_wait_.seconds();
  return s;
}

}  // namespace ember::data
