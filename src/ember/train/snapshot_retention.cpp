#include "ember/train/snapshot_retention.hpp"

#include <algorithm>
#include <charconv>

#include "ember/core/log.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train {

namespace fs = std::filesystem;

fs::path SnapshotPlace::path_of(std::int64_t iteration) const {
  const std::string name = name_prefix + std::to_string(iteration);
  return parent.empty() ? fs::path(name) : parent / name;
}

SnapshotPlace snapshot_place(const std::string& snapshot_prefix, const fs::path& run_dir) {
  if (snapshot_prefix.empty()) return {run_dir, "snapshot_"};
  const fs::path path(snapshot_prefix + "snapshot_");
  return {path.parent_path(), path.filename().string()};
}

std::vector<fs::path> prune_snapshots(const SnapshotPlace& place, std::int64_t keep,
                                      const fs::path& just_written) {
  struct Found {
    fs::path path;
    fs::file_time_type written;
    std::int64_t iteration;
  };
  std::vector<Found> found;
  std::error_code ec;
  const fs::path parent = place.parent.empty() ? fs::path(".") : place.parent;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= place.name_prefix.size() || name.rfind(place.name_prefix, 0) != 0) continue;
    const char* first = name.data() + place.name_prefix.size();
    const char* last = name.data() + name.size();
    std::int64_t iteration = 0;
    const auto [end, bad] = std::from_chars(first, last, iteration);
    if (bad != std::errc() || end != last || !is_checkpoint(entry.path())) continue;
    const auto written = fs::last_write_time(entry.path() / "meta.json", ec);
    if (ec) continue;
    found.push_back({entry.path(), written, iteration});
  }
  std::vector<fs::path> removed;
  if (static_cast<std::int64_t>(found.size()) <= keep) return removed;
  // Oldest first; a snapshot written again (a resumed run) counts from its new time.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.written != b.written ? a.written < b.written : a.iteration < b.iteration;
  });
  auto excess = static_cast<std::int64_t>(found.size()) - keep;
  for (const Found& f : found) {
    if (excess == 0) break;
    if (fs::equivalent(f.path, just_written, ec)) continue;
    fs::remove_all(f.path, ec);
    if (ec) {
      EMBER_LOG_WARN("keep_snapshots {}: cannot remove {}: {}", keep, f.path.string(),
                     ec.message());
      continue;
    }
    EMBER_LOG_INFO("keep_snapshots {}: removed the older snapshot {}", keep, f.path.string());
    removed.push_back(f.path);
    --excess;
  }
  return removed;
}

}  // namespace ember::train
