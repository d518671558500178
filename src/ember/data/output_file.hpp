// A binary output file with a large write buffer and error messages that name the file: what
// the Norm and Raw writers sit on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::data {

class OutputFile {
 public:
  // Creates (or truncates) `path`. Throws DataError naming the file when it cannot.
  explicit OutputFile(std::string path, std::size_t buffer_bytes = std::size_t{1} << 20);
  ~OutputFile();  // closes, logging (not throwing) any error; call close() to see errors
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t bytes);
  // Overwrites bytes at `offset` (within what has been written), e.g. a header.
  void write_at(std::uint64_t offset, const void* data, std::size_t bytes);
  std::uint64_t bytes_written() const { return written_ + buffer_.size(); }
  void flush();
  void close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::byte> buffer_;
  std::size_t capacity_;
  std::uint64_t written_ = 0;
};

}  // namespace ember::data
