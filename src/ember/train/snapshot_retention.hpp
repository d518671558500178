// Where a run's snapshots go and how many it keeps (solver.snapshot_prefix, keep_snapshots).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::train {

// Snapshots are <parent>/<name_prefix><iteration>: "<snapshot_prefix>snapshot_<iter>", or
// "<run_dir>/snapshot_<iter>" when the prefix is empty (the current directory without either).
struct SnapshotPlace {
  std::filesystem::path parent;  // empty: the current directory
  std::string name_prefix;       // "snapshot_", "ckpt_snapshot_"
  std::filesystem::path path_of(std::int64_t iteration) const;
};

SnapshotPlace snapshot_place(const std::string& snapshot_prefix,
                             const std::filesystem::path& run_dir);

// Keeps the `keep` newest snapshots at `place` (Ember checkpoints named <name_prefix><n>, by
// when they were written) and removes the others, never `just_written`. Returns those removed.
std::vector<std::filesystem::path> prune_snapshots(const SnapshotPlace& place, std::int64_t keep,
                                                   const std::filesystem::path& just_written);

}  // namespace ember::train
