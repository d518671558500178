// Time per named part of repeated work (a training step's embedding forward, a layer's
// backward, the wait for data), for profiling passes only: the training path records nothing
// unless it is handed a PartTimer (train::Session::set_part_timer).
//
// On CUDA the parts are intervals between timing events recorded on a stream: begin(part) closes
// the open part and opens the next at the same event, so the parts of a step tile the stream's
// timeline from the first begin() to end(). What the device spends between two marks, idle time
// while the host queues the next kernel included, counts in the part that is open. The events
// are read once, in collect(): recording them costs no host synchronisation. On the CPU the parts
// are wall-clock intervals (the CPU path runs synchronously).
//
// Host-side waits measured by the caller (add_host) are kept apart from the device's parts: on a
// GPU they overlap the device's work of the step before.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/place.hpp"
#include "ember/core/stream.hpp"

namespace ember {

class PartTimer {
 public:
  struct Part {
    std::string name;
    bool host = false;  // measured on the host by the caller (add_host)
    double ms = 0;      // total over every step timed
    std::int64_t intervals = 0;
  };

  explicit PartTimer(Place place);
  PartTimer(const PartTimer&) = delete;
  PartTimer& operator=(const PartTimer&) = delete;

  Place place() const { return place_; }
  // Asks the timed code for its finest parts (the dense network: one part per layer, named
  // after it, instead of one per part of the model). For finding which layer costs what.
  void set_by_layer(bool by_layer) { by_layer_ = by_layer; }
  bool by_layer() const { return by_layer_; }
  // Opens `part` on `stream` (nullptr: the device's current stream; ignored on the CPU), closing
  // the part open before it. Parts of the same name add up.
  void begin(std::string_view part, StreamHandle stream);
  // Closes the open part: the time until the next begin() counts in no part.
  void end(StreamHandle stream);
  // The part open now ("" when none): code that times a piece of another part's work opens its
  // own part and then reopens this one.
  std::string_view open_part() const;
  // Adds `ms` measured on the host to the host part `part`.
  void add_host(std::string_view part, double ms);
  // One more repetition (training step) was timed: totals are divided by this count.
  void count_step() { ++steps_; }
  std::int64_t steps() const { return steps_; }

  // Waits for the events recorded so far, adds their intervals to the totals, and returns every
  // part's total, in the order the parts first appeared.
  const std::vector<Part>& collect();
  // Forgets every total and step.
  void reset();

 private:
  struct Mark {
    int part = -1;  // -1: closes the open part
    std::size_t event = 0;
    std::chrono::steady_clock::time_point time;
  };
  int part_index(std::string_view name, bool host);
  void mark(int part, StreamHandle stream);

  Place place_;
  std::vector<Part> parts_;
  std::map<std::string, int, std::less<>> index_;
  std::vector<Mark> marks_;
  std::vector<Event> events_;  // reused after every collect()
  std::size_t events_used_ = 0;
  std::int64_t steps_ = 0;
  bool by_layer_ = false;
};

}  // namespace ember
