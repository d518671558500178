#include "ember/data/progress.hpp"

#include <unistd.h>

#include <cstdio>

#include "ember/core/error.hpp"

namespace ember::data {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kQuietFor = std::chrono::seconds(1);
constexpr auto kTerminalEvery = std::chrono::milliseconds(200);
constexpr auto kPlainEvery = std::chrono::seconds(10);

std::string human(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}
}  // namespace

ProgressReporter::ProgressReporter(std::string label, std::uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled),
      terminal_(::isatty(STDERR_FILENO) == 1), start_(Clock::now()), last_print_(start_) {}

ProgressReporter::~ProgressReporter() { finish(); }

std::string ProgressReporter::format_line(const std::string& label, std::uint64_t done,
                                          std::uint64_t total, std::int64_t items,
                                          double seconds) {
  std::string line = label;
  if (total > 0) {
    char pct[16];
    std::snprintf(pct, sizeof pct, " %5.1f%%", 100.0 * static_cast<double>(done) / static_cast<double>(total));
    line += pct;
  }
  line.append(" ").append(human(static_cast<double>(items))).append(" lines");
  if (seconds > 0) {
    line.append(" ").append(human(static_cast<double>(items) / seconds)).append(" lines/s");
    line.append(" ").append(human(static_cast<double>(done) / seconds)).append("B/s");
    if (total > 0 && done > 0 && done < total) {
      const double eta = seconds * static_cast<double>(total - done) / static_cast<double>(done);
      line.append(" ETA ").append(clock_text(eta));
    }
  }
  return line;
}

void ProgressReporter::update(std::uint64_t done, std::int64_t items) {
  done_ = done;
  items_ = items;
  if (!enabled_) return;
  const auto now = Clock::now();
  if (now - start_ < kQuietFor) return;
  if (now - last_print_ < (terminal_ ? kTerminalEvery : kPlainEvery) && printed_) return;
  last_print_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const std::string line = format_line(label_, done, total_, items, seconds);
  if (terminal_) {
    std::fprintf(stderr, "\r%s\033[K", line.c_str());
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
  printed_ = true;
}

void ProgressReporter::finish() {
  if (!enabled_ || !printed_) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const std::string line = format_line(label_, total_ > 0 ? total_ : done_, total_, items_, seconds);
  if (terminal_) {
    std::fprintf(stderr, "\r%s\033[K\n", line.c_str());
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
  printed_ = false;
}

}  // namespace ember::data
