// Progress of a long job on stderr: on a terminal one line rewritten in place with the rate and
// the ETA; otherwise (logs, CI) a plain line every few seconds. Quiet for jobs that finish
// within a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ember::data {

class ProgressReporter {
 public:
  // `total` is the amount of work in `unit`s of progress (bytes, here); 0 when unknown.
  ProgressReporter(std::string label, std::uint64_t total, bool enabled = true);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // `done` units of `total` done, `items` (lines) so far. Cheap to call often.
  void update(std::uint64_t done, std::int64_t items);
  // Ends the line (terminal) or prints a last summary, if anything was printed.
  void finish();

  // The text of one progress line, for tests: "label 42.0% 1.23M lines 456k lines/s ETA 0:07".
  static std::string format_line(const std::string& label, std::uint64_t done,
                                 std::uint64_t total, std::int64_t items, double seconds);

 private:
  std::string label_;
  std::uint64_t total_;
  bool enabled_;
  bool terminal_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_, last_print_;
  std::uint64_t done_ = 0;
  std::int64_t items_ = 0;
};

}  // namespace ember::data
