#include "ember/core/stream_use_tracker.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>

namespace ember::detail {

StreamUseTracker::StreamUseTracker(DeviceBackend& backend, std::string owner)
    : backend_(backend), owner_(std::move(owner)) {}

StreamUseTracker::~StreamUseTracker() {
  for (const Pending& p : pending_)
    backend_.release_event(p.event);
}

void StreamUseTracker::warn(const char* what, const char* why, std::size_t bytes) const noexcept {
  std::fprintf(stderr,
               "ember: warning: %s could not record an event for %s (%s); its %zu bytes stay "
               "reserved and unused\n",
               owner_.c_str(), what, why, bytes);
}

EventHandle StreamUseTracker::record_new(StreamHandle stream) const {
  EventHandle e = backend_.acquire_event(stream);
  try {
    backend_.record_event(e, stream);
  } catch (...) {
    backend_.release_event(e);
    throw;
  }
  return e;
}

void StreamUseTracker::record_stream(StreamUses& b, StreamHandle stream) {
  if (std::find(b.streams.begin(), b.streams.end(), stream) == b.streams.end()) {
    b.streams.push_back(stream);
  }
}

void StreamUseTracker::record_use(StreamUses& b, StreamHandle stream,
                                  std::size_t bytes) const noexcept {
  if (b.unusable) return;
  try {
    for (StreamUses::Use& u : b.uses) {
      if (u.stream == stream) {
        backend_.record_event(u.event, stream);
        return;
      }
    }
    b.uses.reserve(b.uses.size() + 1);
    b.uses.push_back({stream, record_new(stream)});
  } catch (const std::exception& e) {
    warn("a use of a block", e.what(), bytes);
    b.unusable = true;
  } catch (...) {
    warn("a use of a block", "unknown error", bytes);
    b.unusable = true;
  }
}

bool StreamUseTracker::defer_used_elsewhere(StreamUses& b, std::size_t bytes) noexcept {
  if (!b.unusable && b.used_elsewhere()) {
    const char* why = nullptr;
    try {
      pending_.reserve(pending_.size() + b.streams.size() + b.uses.size());
      // Uses recorded while the block was live: their events are already on their streams.
      for (const StreamUses::Use& u : b.uses) {
        pending_.push_back({u.event, u.stream, &b});
        ++b.pending_events;
      }
      b.uses.clear();
      // record_stream: the work queued on those streams up to now.
      for (StreamHandle s : b.streams) {
        pending_.push_back({record_new(s), s, &b});
        ++b.pending_events;
      }
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "unknown error";
    }
    if (why != nullptr) {
      warn("a freed block", why, bytes);
      b.unusable = true;
    }
    b.streams.clear();
  }
  if (b.unusable) {
    for (const StreamUses::Use& u : b.uses)
      backend_.release_event(u.event);
    b.uses.clear();
    ++b.pending_events;  // never reaches zero: the block does not come back
  }
  if (b.pending_events == 0) return false;
  start_waiting(b);
  return true;
}

void StreamUseTracker::start_waiting(StreamUses& b) noexcept {
  b.prev_waiting = nullptr;
  b.next_waiting = waiting_head_;
  if (waiting_head_ != nullptr) waiting_head_->prev_waiting = &b;
  waiting_head_ = &b;
  ++waiting_;
}

void StreamUseTracker::stop_waiting(StreamUses& b) noexcept {
  if (b.prev_waiting != nullptr) {
    b.prev_waiting->next_waiting = b.next_waiting;
  } else {
    waiting_head_ = b.next_waiting;
  }
  if (b.next_waiting != nullptr) b.next_waiting->prev_waiting = b.prev_waiting;
  b.prev_waiting = b.next_waiting = nullptr;
  --waiting_;
}

void StreamUseTracker::event_done(StreamUses& b, ReadyFn ready, void* context) {
  if (--b.pending_events > 0) return;
  stop_waiting(b);
  ready(context, b);
}

void StreamUseTracker::poll_impl(ReadyFn ready, void* context) {
  // Streams whose first pending event is incomplete: their later events are skipped. Eight
  // are remembered; past that every remaining event waits for the next poll (never less).
  constexpr int kRemembered = 8;
  StreamHandle blocked[kRemembered];
  int n_blocked = 0;
  bool overflow = false;
  std::size_t kept = 0;
  std::size_t i = 0;
  bool released = false;  // entry i's event is released: it must not stay pending
  try {
    for (; i < pending_.size(); ++i) {
      const Pending p = pending_[i];
      const bool skip =
          overflow || std::find(blocked, blocked + n_blocked, p.stream) != blocked + n_blocked;
      if (!skip && backend_.query_event(p.event)) {
        backend_.release_event(p.event);
        released = true;
        event_done(*p.block, ready, context);
        released = false;
        continue;
      }
      if (!skip) {
        if (n_blocked < kRemembered) {
          blocked[n_blocked++] = p.stream;
        } else {
          overflow = true;
        }
      }
      pending_[kept++] = p;
    }
  } catch (...) {
    // The entries after the one that failed stay pending; so does that one if its event is
    // still held.
    if (released) ++i;
    for (; i < pending_.size(); ++i)
      pending_[kept++] = pending_[i];
    pending_.resize(kept);
    throw;
  }
  pending_.resize(kept);
}

std::int64_t StreamUseTracker::wait_all_impl(ReadyFn ready, void* context) {
  std::int64_t waits = 0;
  for (const Pending& p : pending_) {
    backend_.synchronize_event(p.event);
    ++waits;
  }
  // `ready` does not touch the tracker, so the list can be walked in place.
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const Pending p = pending_[i];
    backend_.release_event(p.event);
    try {
      event_done(*p.block, ready, context);
    } catch (...) {
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      throw;
    }
  }
  pending_.clear();
  return waits;
}

void StreamUseTracker::forget(StreamUses& b) noexcept {
  for (const StreamUses::Use& u : b.uses)
    backend_.release_event(u.event);
  b.uses.clear();
}

}  // namespace ember::detail
