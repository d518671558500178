// CUDA streams and events as owning values, and the "current stream" of each device.
//
// Work Ember launches without naming a stream goes to current_stream(device): by default one
// non-blocking stream per device that lives for the whole process (never the legacy default
// stream, which would serialise everything), of kStepPriority; StreamGuard switches it for the
// current thread.
#pragma once

#include <utility>

#include "ember/core/device.hpp"

namespace ember {

// Stream priorities. CUDA hands free multiprocessors to the waiting blocks of the highest-priority
// stream first (lower numbers first; 0, the default, is the lowest; values beyond the device's
// range are clamped), so a kernel of many blocks on a low-priority stream no longer holds up a
// small kernel that the step waits for. From the highest:
//   kTransferPriority: collectives' kernels. An NCCL kernel that waits for free multiprocessors
//     holds up every rank; queued behind the pooling of the next batch's 1.7 M rows it started
//     only when that pooling ended (docs/performance.md, "A kernel timeline of the 2-GPU step").
//   kHostWaitPriority: small kernels the host waits for (a host-backed table's distinct rows).
//   kStepPriority: the training step's own streams, each device's process stream (the compute
//     stream) and, in a team of several ranks, the embeddings' stream beside it: the step's path
//     goes through both.
//   kBackgroundPriority: work with slack, such as the next batch prepared ahead during a step
//     (it has the whole step to finish), copies, and a lone rank's embeddings' stream.
inline constexpr int kTransferPriority = -3;
inline constexpr int kHostWaitPriority = -2;
inline constexpr int kStepPriority = -1;
inline constexpr int kBackgroundPriority = 0;

class Stream {
 public:
  Stream() = default;
  // A new non-blocking stream on `device` (priorities above).
  static Stream create(int device, int priority = kBackgroundPriority);
  ~Stream();
  Stream(Stream&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  StreamHandle handle() const { return handle_; }
  int device() const { return device_; }
  explicit operator bool() const { return handle_ != nullptr; }
  void synchronize() const;

 private:
  StreamHandle handle_ = nullptr;
  int device_ = 0;
};

class Event {
 public:
  Event() = default;
  // With timing off the event is cheaper to record and to wait on; benchmarks ask for timing.
  static Event create(int device, bool timing = false);
  ~Event();
  Event(Event&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  EventHandle handle() const { return handle_; }
  int device() const { return device_; }
  explicit operator bool() const { return handle_ != nullptr; }

  void record(StreamHandle stream);
  // True once all work recorded before the event has completed.
  bool query() const;
  void synchronize() const;
  // Makes `stream` wait (on the device, without blocking the host) for this event.
  void block(StreamHandle stream) const;
  // record() and block() for work that a CUDA graph may capture: where `stream` is being
  // captured, the record (the wait) becomes a node that each replay of the graph performs
  // against streams outside it. A plain record inside a capture only orders work within the
  // graph, and a plain wait there on an event recorded outside it is an error. Outside a capture
  // they are record() and block().
  void record_across_capture(StreamHandle stream);
  void block_across_capture(StreamHandle stream) const;
  // Milliseconds between two recorded timing events.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  EventHandle handle_ = nullptr;
  int device_ = 0;
};

// The stream Ember uses on `device` when none is named (see the file comment).
StreamHandle current_stream(int device);
// The process-wide compute stream of `device`, whatever the thread's current stream is.
StreamHandle default_stream(int device);
// The process-wide copy stream of `device`: host<->device transfers queued here overlap the
// compute stream's kernels (the input pipeline's batch copies go here).
StreamHandle copy_stream(int device);
void synchronize_stream(StreamHandle stream);
// The priority `stream` runs at: the one it was created with, clamped to the device's range.
int stream_priority(StreamHandle stream);
// Makes `waiter` wait, on the device, for the work queued on `first` so far (nothing when either
// is null or they are the same stream). What a stream needs before it touches memory just
// allocated from another stream's pool: the caching device allocator gives a block freed on
// `first` to `first`'s next request at once, while kernels queued there may still use it.
void wait_for_stream(StreamHandle waiter, StreamHandle first, int device);

// Sets the current thread's current stream for `device` until the guard goes.
class StreamGuard {
 public:
  StreamGuard(int device, StreamHandle stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  StreamHandle previous_;
};

}  // namespace ember
