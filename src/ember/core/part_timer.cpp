#include "ember/core/part_timer.hpp"

#include "ember/core/error.hpp"

namespace ember {

PartTimer::PartTimer(Place place) : place_(place) {}

int PartTimer::part_index(std::string_view name, bool host) {
  const auto it = index_.find(name);
  if (it != index_.end()) {
    EMBER_CHECK(parts_[static_cast<std::size_t>(it->second)].host == host, "part timer: part '",
                name, "' is timed both on the host and on the device");
    return it->second;
  }
  const int i = static_cast<int>(parts_.size());
  parts_.push_back({std::string(name), host, 0.0, 0});
  index_.emplace(std::string(name), i);
  return i;
}

void PartTimer::mark(int part, StreamHandle stream) {
  Mark m;
  m.part = part;
  if (place_.is_cuda()) {
    if (stream == nullptr) stream = current_stream(place_.device());
    if (events_used_ == events_.size()) events_.push_back(Event::create(place_.device(), true));
    m.event = events_used_++;
    events_[m.event].record(stream);
  } else {
    m.time = std::chrono::steady_clock::now();
  }
  marks_.push_back(m);
}

void PartTimer::begin(std::string_view part, StreamHandle stream) {
  mark(part_index(part, false), stream);
}

void PartTimer::end(StreamHandle stream) {
  if (!marks_.empty() && marks_.back().part >= 0) mark(-1, stream);
}

std::string_view PartTimer::open_part() const {
  if (marks_.empty() || marks_.back().part < 0) return {};
  return parts_[static_cast<std::size_t>(marks_.back().part)].name;
}

void PartTimer::add_host(std::string_view part, double ms) {
  Part& p = parts_[static_cast<std::size_t>(part_index(part, true))];
  p.ms += ms;
  ++p.intervals;
}

const std::vector<PartTimer::Part>& PartTimer::collect() {
  if (place_.is_cuda()) {
    for (std::size_t e = 0; e < events_used_; ++e)
      events_[e].synchronize();  // the marks may be on several streams
  }
  // Each mark's interval runs to the next mark; a part still open at the end stays open (its
  // mark is kept for the next collect()).
  std::size_t i = 0;
  for (; i + 1 < marks_.size(); ++i) {
    const Mark& a = marks_[i];
    if (a.part < 0) continue;
    const Mark& b = marks_[i + 1];
    const double ms =
        place_.is_cuda()
            ? static_cast<double>(Event::elapsed_ms(events_[a.event], events_[b.event]))
            : std::chrono::duration<double, std::milli>(b.time - a.time).count();
    Part& p = parts_[static_cast<std::size_t>(a.part)];
    p.ms += ms;
    ++p.intervals;
  }
  if (!marks_.empty() && marks_.back().part >= 0) {
    // Keep the open part: its event moves to the front of the pool.
    Mark open = marks_.back();
    if (place_.is_cuda() && open.event != 0) {
      std::swap(events_[0], events_[open.event]);
      open.event = 0;
    }
    marks_.assign(1, open);
    events_used_ = place_.is_cuda() ? 1 : 0;
  } else {
    marks_.clear();
    events_used_ = 0;
  }
  return parts_;
}

void PartTimer::reset() {
  parts_.clear();
  index_.clear();
  marks_.clear();
  events_used_ = 0;
  steps_ = 0;
}

}  // namespace ember
