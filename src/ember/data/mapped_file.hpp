// A read-only memory mapping of a whole file (how HugeCTR reads Raw data, and so does Ember).
#pragma once

#include <cstddef>
#include <string>

namespace ember::data {

class MappedFile {
 public:
  // Maps `path` read-only; DataError naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel the mapping is read front to back (read ahead, drop behind).
  void advise_sequential() const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ember::data
