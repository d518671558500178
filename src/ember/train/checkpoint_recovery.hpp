// Finishing or undoing a checkpoint save that a crash interrupted.
//
// A save (CheckpointWriter) leaves, while it runs, <dir>.tmp-<pid>-<n> (the new checkpoint being
// written) and, for the instant of the swap, <dir>.old-<pid> (the checkpoint it replaces). When
// the process that made them is gone, recover_checkpoint(dir) settles them:
//   - <dir> missing (the crash fell between the two renames): the newest complete candidate is
//     renamed to <dir>: a complete staging directory (the save had finished writing) before the
//     moved-aside older checkpoint; the log says which;
//   - then whatever the leftovers hold that is not part of a checkpoint (metrics.csv, snapshots)
//     moves into <dir> where absent, and the leftovers are removed.
// Leftovers of a living process (another save running now) are never touched.
#pragma once

#include <filesystem>

namespace ember::train {

// Settles the leftovers of interrupted saves of `dir`. Returns true when it restored `dir`.
bool recover_checkpoint(const std::filesystem::path& dir);

// recover_checkpoint() for every checkpoint in `parent` that has leftovers (a run directory's
// snapshots); nothing when `parent` does not exist.
void recover_checkpoints_in(const std::filesystem::path& parent);

}  // namespace ember::train
