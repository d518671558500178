#include "ember/core/path_check.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ember {

std::string file_problem(const std::filesystem::path& path, bool regular_only) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || status.type() == std::filesystem::file_type::not_found) {
    if (!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
      return "does not exist";
    }
    return "cannot be read (" + ec.message() + ")";
  }
  if (std::filesystem::is_directory(status)) return "is a directory, not a file";
  if (regular_only && !std::filesystem::is_regular_file(status)) return "is not a regular file";
  // access(), not open(): opening a pipe would wait for its writer.
  if (::access(path.c_str(), R_OK) != 0) {
    return "cannot be read (" + std::string(std::strerror(errno)) + ")";
  }
  return {};
}

}  // namespace ember
