// Stream ordering for the caching allocators: which other streams use a block, and when a freed
// block may be handed out again. Both caching allocators (device and pinned) keep their blocks
// through this one component, as RMM writes stream ordering once for all its resources.
//
// A block is reused only by work that stream order makes safe. Work on other streams is tracked
// in two ways:
//   - record_stream: the stream uses the block until it is freed; an event is recorded there
//     at free time, so the stream must still exist then;
//   - record_use: the work queued on the stream so far uses the block; an event is recorded
//     there at once, so the stream may be destroyed at any time after the call. Repeated uses on
//     one stream share one event, recorded anew: a stream runs its work in order, so the latest
//     recording covers the earlier ones.
// A freed block with such events waits until all of them have completed. Waiting blocks are
// polled (never waited for) at allocations; events of one stream complete in order, so the first
// incomplete one stops the scan for its stream. Only the out-of-memory path blocks on them.
//
// A block whose event could not be recorded is never handed out again (there is no telling when
// the other stream is done with it): better a little memory lost than data overwritten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/device_backend.hpp"

namespace ember::detail {

// The stream-use state of one block. Allocators' block types derive from it, so that the tracker
// can hand the block back when it is ready.
struct StreamUses {
  struct Use {
    StreamHandle stream;
    EventHandle event;  // recorded on `stream` after the work that uses the block was queued
  };
  // record_stream: streams that use the block until it is freed (no event yet). Cleared, not
  // shrunk, on reuse.
  std::vector<StreamHandle> streams;
  // record_use: one event per stream, recorded anew at each use.
  std::vector<Use> uses;
  // Events the freed block still waits for.
  int pending_events = 0;
  // An event could not be recorded: the block never comes back.
  bool unusable = false;
  // Membership in the tracker's list of waiting blocks.
  StreamUses* prev_waiting = nullptr;
  StreamUses* next_waiting = nullptr;

  // Any use on another stream recorded so far.
  bool used_elsewhere() const { return !streams.empty() || !uses.empty(); }
  // For a block struct that is recycled: no uses, nothing pending.
  void clear_uses() noexcept {
    streams.clear();
    uses.clear();
    pending_events = 0;
    unusable = false;
    prev_waiting = next_waiting = nullptr;
  }
};

// The freed blocks that wait for other streams, with their events, for one allocator. Not
// thread-safe: the allocator calls it under the lock that guards the blocks.
class StreamUseTracker {
 public:
  // `owner` names the allocator in warnings ("the caching allocator of cuda:0").
  StreamUseTracker(DeviceBackend& backend, std::string owner);
  // Releases the events of the blocks still waiting (the blocks themselves are the owner's).
  ~StreamUseTracker();
  StreamUseTracker(const StreamUseTracker&) = delete;
  StreamUseTracker& operator=(const StreamUseTracker&) = delete;

  // `stream` uses the live block `b` until it is freed (no event now).
  static void record_stream(StreamUses& b, StreamHandle stream);
  // The work queued on `stream` so far uses the live block `b`: an event is recorded now. On
  // failure the block is marked unusable (with a warning naming `bytes`), never thrown out.
  // Both calls change only the block (the tracker is const here): they need the lock that
  // guards the live block, not the tracker's.
  void record_use(StreamUses& b, StreamHandle stream, std::size_t bytes) const noexcept;

  // `b` has just been freed. True when it must wait for other streams (it is then on the
  // waiting list until it comes back through poll() or wait_all(), or for good when unusable);
  // false when it may be reused at once.
  bool defer_free(StreamUses& b, std::size_t bytes) noexcept {
    // Most blocks are used on their own stream only: nothing to wait for.
    if (!b.unusable && !b.used_elsewhere()) return false;
    return defer_used_elsewhere(b, bytes);
  }

  // Hands every waiting block whose events have all completed to `ready(StreamUses&)`. Never
  // blocks. When `ready` or the backend throws, the blocks not yet handed out stay waiting.
  template <typename Ready>
  void poll(Ready&& ready) {
    poll_impl(&call<Ready>, &ready);
  }
  // Blocks until every pending event has completed, then hands their blocks to `ready`
  // (out-of-memory path only). Returns the number of blocking waits.
  template <typename Ready>
  std::int64_t wait_all(Ready&& ready) {
    return wait_all_impl(&call<Ready>, &ready);
  }

  // Releases the events of a live block's uses: the allocator is going away.
  void forget(StreamUses& b) noexcept;

  // Calls `visit(StreamUses&)` for every waiting block, unusable ones included (to give their
  // memory back when the allocator is destroyed).
  template <typename Visit>
  void for_each_waiting(Visit&& visit) {
    for (StreamUses* b = waiting_head_; b != nullptr;) {
      StreamUses* next = b->next_waiting;
      visit(*b);
      b = next;
    }
  }

  bool has_pending_events() const { return !pending_.empty(); }
  // Freed blocks waiting for other streams (unusable ones included).
  std::int64_t waiting() const { return waiting_; }

 private:
  struct Pending {
    EventHandle event;
    StreamHandle stream;
    StreamUses* block;
  };
  using ReadyFn = void (*)(void* context, StreamUses& block);
  template <typename Ready>
  static void call(void* context, StreamUses& block) {
    (*static_cast<std::remove_reference_t<Ready>*>(context))(block);
  }

  // defer_free() of a block used on other streams (or unusable).
  bool defer_used_elsewhere(StreamUses& b, std::size_t bytes) noexcept;
  void poll_impl(ReadyFn ready, void* context);
  std::int64_t wait_all_impl(ReadyFn ready, void* context);
  // One event of `b` completed: hands it to `ready` when it was the last.
  void event_done(StreamUses& b, ReadyFn ready, void* context);
  // An event recorded on `stream` now.
  EventHandle record_new(StreamHandle stream) const;
  void warn(const char* what, const char* why, std::size_t bytes) const noexcept;
  void start_waiting(StreamUses& b) noexcept;
  void stop_waiting(StreamUses& b) noexcept;

  DeviceBackend& backend_;
  std::string owner_;
  std::vector<Pending> pending_;
  StreamUses* waiting_head_ = nullptr;
  std::int64_t waiting_ = 0;
};

}  // namespace ember::detail
