// What is wrong with a path that should name a readable file, in words for a message: a user who
// passes a directory where a file belongs should read "is a directory", not "does not exist",
// "empty file" or a C++ library's message.
#pragma once

#include <filesystem>
#include <string>

namespace ember {

// Empty when `path` is a regular file this process can open for reading; otherwise "does not
// exist", "is a directory, not a file", "is not a regular file" or "cannot be read (<reason>)".
// With `regular_only` false, a pipe or a device that reads passes too (a file list given as
// `<(...)`); a directory never does.
std::string file_problem(const std::filesystem::path& path, bool regular_only = true);

}  // namespace ember
