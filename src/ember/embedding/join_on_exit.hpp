// A scope guard for an exchange that runs on a stream of its own: the current stream must join
// it (wait for its transfers) before the buffers they use are released, also when an error
// leaves the exchange early.
#pragma once

#include <utility>

namespace ember::embedding {

// Runs `join` at now(), or on leaving the scope without it (an error).
template <class Join>
class JoinOnExit {
 public:
  explicit JoinOnExit(Join join) : join_(std::move(join)) {}
  ~JoinOnExit() {
    if (!armed_) return;
    try {
      join_();
    } catch (...) {
      // The error that left the exchange reaches the caller; the device's own comes with it.
    }
  }
  JoinOnExit(const JoinOnExit&) = delete;
  JoinOnExit& operator=(const JoinOnExit&) = delete;
  void now() {
    armed_ = false;
    join_();
  }

 private:
  Join join_;
  bool armed_ = true;
};

}  // namespace ember::embedding
