#include "ember/train/run_log.hpp"

#include <iomanip>

#include "ember/core/error.hpp"

namespace ember::train {

RunLog::RunLog(const std::filesystem::path& dir, bool append) : path_(dir / "metrics.csv") {
  std::filesystem::create_directories(dir);
  const bool fresh = !append || !std::filesystem::exists(path_);
  out_.open(path_, fresh ? std::ios::trunc : std::ios::app);
  if (!out_) EMBER_THROW_AS(DataError, "cannot write the run log ", path_.string());
  if (fresh) out_ << "iteration,phase,metric,value\n" << std::flush;
  check();
}

void RunLog::check() const {
  if (out_) return;
  EMBER_THROW_AS(DataError, "cannot write the run log ", path_.string(),
                 " (disk full?); the run stops rather than go on with its metrics cut short");
}

void RunLog::add(std::int64_t iteration, const char* phase, const char* metric, double value) {
  if (!out_.is_open()) return;
  out_ << iteration << ',' << phase << ',' << metric << ',' << std::setprecision(9) << value << '\n'
       << std::flush;
  check();
}

}  // namespace ember::train
