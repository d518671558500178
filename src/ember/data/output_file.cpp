#include "ember/data/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"

namespace ember::data {

OutputFile::OutputFile(std::string path, std::size_t buffer_bytes)
    : path_(std::move(path)), capacity_(buffer_bytes) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    EMBER_THROW_AS(DataError, "cannot create '", path_, "': ", std::strerror(errno));
  }
  buffer_.reserve(capacity_);
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  try {
    close();
  } catch (const std::exception& e) {
    EMBER_LOG_ERROR("{}", e.what());
  }
}

void OutputFile::write(const void* data, std::size_t bytes) {
  EMBER_CHECK(fd_ >= 0, "writing to closed file '", path_, "'");
  const auto* p = static_cast<const std::byte*>(data);
  if (buffer_.size() + bytes > capacity_) flush();
  if (bytes >= capacity_) {
    // Large writes go straight through.
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t n = ::write(fd_, p + done, bytes - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) EMBER_THROW_AS(DataError, "error writing '", path_, "': ", std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    written_ += bytes;
    return;
  }
  buffer_.insert(buffer_.end(), p, p + bytes);
}

void OutputFile::flush() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) EMBER_THROW_AS(DataError, "error writing '", path_, "': ", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  written_ += buffer_.size();
  buffer_.clear();
}

void OutputFile::write_at(std::uint64_t offset, const void* data, std::size_t bytes) {
  EMBER_CHECK(fd_ >= 0, "writing to closed file '", path_, "'");
  EMBER_CHECK(offset + bytes <= bytes_written(), "write_at past the end of '", path_, "'");
  flush();
  const auto* p = static_cast<const std::byte*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) EMBER_THROW_AS(DataError, "error writing '", path_, "': ", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

void OutputFile::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  try {
    flush();
  } catch (...) {
    ::close(fd);
    fd_ = -1;
    throw;
  }
  fd_ = -1;
  if (::close(fd) != 0) {
    EMBER_THROW_AS(DataError, "error closing '", path_, "': ", std::strerror(errno));
  }
}

}  // namespace ember::data
