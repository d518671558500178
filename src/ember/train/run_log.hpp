// A run's metrics as CSV rows "iteration,phase,metric,value" (phase: train or eval), appended as
// they come and flushed, so `ember plot RUN_DIR` can draw a run while it is still going. A row
// that cannot be written (a full disk) is a DataError: a run never ends "successfully" with its
// metrics cut short.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace ember::train {

class RunLog {
 public:
  RunLog() = default;
  // Creates (or, resuming, appends to) DIR/metrics.csv.
  explicit RunLog(const std::filesystem::path& dir, bool append = false);
  bool active() const { return out_.is_open(); }
  void add(std::int64_t iteration, const char* phase, const char* metric, double value);
  const std::filesystem::path& path() const { return path_; }

 private:
  void check() const;
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace ember::train
