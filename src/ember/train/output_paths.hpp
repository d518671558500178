// Where a run will write, checked before it starts, so that a wrong or unwritable path fails in
// the first second rather than after hours of training: the model directory (--model-out), an
// output file (predict --out), a run directory (--run-dir) and the directories snapshots and
// exported predictions go to. Every failure is a DataError naming the flag or key and the path.
#pragma once

#include <filesystem>
#include <string>

namespace ember::train {

// A checkpoint directory a save will create or replace: not the current directory or one of
// its ancestors, not a file, not a user's non-empty directory (check_replaceable), in a
// directory that can be written (created if needed).
void check_checkpoint_destination(const std::filesystem::path& dir, const std::string& what);

// A file to be written: not a directory, in a directory that can be written (created if
// needed).
void check_output_file(const std::filesystem::path& path, const std::string& what);

// A directory to write files into: created if needed, and writable.
void check_output_directory(const std::filesystem::path& dir, const std::string& what);

}  // namespace ember::train
