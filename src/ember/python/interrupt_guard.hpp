// Ctrl-C during a long call that runs with the GIL released (Session.fit): Python's own handler
// only marks the signal for the interpreter, which runs no Python code until the call returns, so
// for the call's length SIGINT sets the session's stop flag instead (the training loop ends after
// the current step, with a snapshot) and the caller raises KeyboardInterrupt afterwards. Only in
// the main thread, where Python handles signals; elsewhere the guard does nothing.
#pragma once

#include <atomic>
#include <csignal>

namespace ember::python {

class InterruptGuard {
 public:
  // Call with the GIL held.
  explicit InterruptGuard(std::atomic<bool>& stop);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  bool installed_ = false;
  struct sigaction previous_ {};
};

}  // namespace ember::python
