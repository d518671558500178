// GPU pipelines: the device memory batches are copied into, and the copies.
//
// A device slot is the memory of one batch on every training GPU, with the capacity of a full
// batch with every key budget (so a multi-hot batch of any size fits and no slot is ever grown),
// and two events per device: `ready` (recorded on the copy stream after the copies) and
// `released` (recorded on the device's current stream when the consumer dropped the batch).
// Slots are made up front and lent by a LeasePool, the longest released first (its consumer is
// the most likely done). A batch's views hold its slot; when the last view goes the slot marks
// its release and goes back, and the next copies into it wait on the device, never on the host,
// for the kernels that read it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/place.hpp"
#include "ember/core/stream.hpp"
#include "ember/data/batch.hpp"
#include "ember/data/batch_assembly.hpp"
#include "ember/data/batch_layout.hpp"
#include "ember/data/host_batch_pool.hpp"
#include "ember/data/lease_pool.hpp"
#include "ember/data/time_counter.hpp"

namespace ember::data {

class DeviceSlot {
 public:
  DeviceSlot(const std::vector<Place>& devices, std::size_t bytes);
  // Waits for the work queued before the last release: kernels reading the memory may still be
  // queued, and it must not go back to an allocator that could hand it out again before they end.
  ~DeviceSlot();
  DeviceSlot(const DeviceSlot&) = delete;
  DeviceSlot& operator=(const DeviceSlot&) = delete;

  const AllocationPtr& memory(std::size_t d) const { return memory_[d]; }
  Event& ready(std::size_t d) { return ready_[d]; }
  // Makes `stream` wait for the release of the slot's previous batch on device d; true when that
  // release had not completed yet (the copies then wait for it on the device).
  bool wait_for_release(std::size_t d, StreamHandle stream);
  // Marks, on each device's current stream, the point the slot's reuse must wait for.
  void mark_released() noexcept;

  // What an input's row offsets hold on every device, when the copies wrote offsets of rows
  // that all hold `per_row` keys: r * per_row for r <= rows. A later batch whose rows do the
  // same (one-hot data) is copied without them: at DLRM-Kaggle size they are two thirds of a
  // batch's bytes (54 MB of 82 on each GPU for 4 x 65536 samples).
  struct UniformOffsets {
    std::int64_t rows = -1;  // -1: not known to hold such offsets
    std::int64_t per_row = 0;
  };
  std::vector<UniformOffsets>& uniform_offsets() { return uniform_offsets_; }

 private:
  std::vector<Place> devices_;
  std::vector<AllocationPtr> memory_;
  std::vector<Event> ready_;
  std::vector<Event> released_;
  std::vector<bool> release_recorded_;
  std::vector<UniformOffsets> uniform_offsets_;
};

struct DeviceTransferStats {
  std::int64_t slots = 0;       // made, in all
  std::int64_t late_slots = 0;  // made because the consumer held more batches than foreseen
  std::int64_t slot_reuse_waits = 0;
  double copy_issue_seconds = 0;  // queuing the copies (host side)
  double copy_wait_seconds = 0;   // waiting for them to finish
};

class DeviceTransfer {
 public:
  // Slots for batches of up to `batch_size` samples of `layout` on the GPUs `devices`;
  // `reserved_slots` of them made now.
  // `slice`: which shares of the batch these devices take (batch.hpp).
  DeviceTransfer(const BatchLayout& layout, std::vector<Place> devices, std::int64_t batch_size,
                 int reserved_slots, RankSlice slice = {});

  // Makes the calling thread the one that calls copy(), while it lives: the thread polls the
  // copies' events, so on Linux it asks for a tight timer; and the devices' copy streams become
  // its current streams, so that nothing it queues (a slot made late: its memory and first
  // event; a batch it drops undelivered: its release) lands on the compute stream, which the
  // training thread may be capturing into a CUDA graph: work from another thread would join the
  // capture, and the slot's event, recorded inside it, could not be queried after.
  class CopyThread {
   public:
    explicit CopyThread(const std::vector<Place>& devices);
    ~CopyThread();
    CopyThread(const CopyThread&) = delete;
    CopyThread& operator=(const CopyThread&) = delete;

   private:
    std::vector<std::unique_ptr<StreamGuard>> guards_;  // undone last to first
  };

  // Copies a filled host batch into a slot on every device (each device's share of label and
  // dense, the whole CSR) on the devices' copy streams, waits until the copies are done, and
  // returns the batch viewing the slot. The host batch goes back to its pool on return.
  Batch copy(HostBatchLease host, const BatchInfo& info);

  DeviceTransferStats stats() const;

 private:
  // `own_keys_only`: the keys of this process's samples alone (BatchInfo::keys_from_ranks).
  void issue_copies(const HostBatch& host, DeviceSlot& slot, const std::vector<Share>& shares,
                    bool own_keys_only);
  void wait_for_copies(DeviceSlot& slot);
  // After a failed copy: lets whatever was queued finish before the slot can be reused.
  void drain_copy_streams() noexcept;
  Batch views(const std::shared_ptr<DeviceSlot>& slot, const HostBatch& host, const BatchInfo& info,
              const std::vector<Share>& shares) const;

  BatchLayout layout_;
  std::vector<Place> devices_;
  RankSlice slice_;
  BatchBufferPlan plan_;
  // Shared with the batches handed out, which may outlive the transfer.
  std::shared_ptr<LeasePool<DeviceSlot>> slots_;
  TimeCounter copy_issue_, copy_wait_;
  std::atomic<std::int64_t> slot_reuse_waits_{0};
};

}  // namespace ember::data
