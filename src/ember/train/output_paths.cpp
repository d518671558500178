#include "ember/train/output_paths.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ember/core/error.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train {

namespace fs = std::filesystem;

namespace {

// `dir` created when missing, then proved writable by creating and removing a file in it.
void require_writable_directory(const fs::path& dir, const std::string& what,
                                const fs::path& shown) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    EMBER_THROW_AS(DataError, what, " ", shown.string(), ": cannot create the directory ",
                   dir.string(), " (", ec.message(), ")");
  }
  if (!fs::is_directory(dir)) {
    EMBER_THROW_AS(DataError, what, " ", shown.string(), ": ", dir.string(), " is not a directory");
  }
  const fs::path probe = dir / (".ember-write-check-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    EMBER_THROW_AS(DataError, what, " ", shown.string(), ": cannot write in ", dir.string(), " (",
                   std::strerror(errno), ")");
  }
  ::close(fd);
  fs::remove(probe, ec);
}

fs::path parent_of(const fs::path& p) {
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

// The path without trailing separators ("model/" -> "model"), so that its name is its last part.
fs::path trimmed(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (n.has_filename() || !n.has_parent_path() || n == n.root_path()) return n;
  return n.parent_path();
}

}  // namespace

void check_checkpoint_destination(const fs::path& given, const std::string& what) {
  if (given.empty()) EMBER_THROW_AS(DataError, what, ": the path is empty");
  const fs::path dir = trimmed(given);
  const std::string name = dir.filename().string();
  std::error_code ec;
  const fs::path here = fs::weakly_canonical(fs::current_path(), ec);
  const fs::path target = fs::weakly_canonical(fs::absolute(dir), ec);
  const bool holds_here =
      name.empty() || name == "." || name == ".." || dir == dir.root_path() ||
      (!ec &&
       std::mismatch(target.begin(), target.end(), here.begin(), here.end()).first == target.end());
  if (holds_here) {
    EMBER_THROW_AS(DataError, what, " ", given.string(),
                   " is the current directory or one that holds it; a save replaces its "
                   "directory: give the model a directory of its own (e.g. ",
                   (fs::path(given) / "model").lexically_normal().string(), ")");
  }
  check_replaceable(dir, what);
  require_writable_directory(parent_of(dir), what, given);
}

void check_output_file(const fs::path& path, const std::string& what) {
  if (path.empty()) EMBER_THROW_AS(DataError, what, ": the path is empty");
  if (fs::is_directory(path)) {
    EMBER_THROW_AS(DataError, what, " ", path.string(),
                   " is a directory; give the name of a file to write");
  }
  require_writable_directory(parent_of(path), what, path);
}

void check_output_directory(const fs::path& dir, const std::string& what) {
  if (dir.empty()) EMBER_THROW_AS(DataError, what, ": the path is empty");
  if (fs::exists(dir) && !fs::is_directory(dir)) {
    EMBER_THROW_AS(DataError, what, " ", dir.string(), " exists and is not a directory");
  }
  require_writable_directory(dir, what, dir);
}

}  // namespace ember::train
