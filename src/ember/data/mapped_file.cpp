#include "ember/data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ember/core/error.hpp"
#include "ember/core/path_check.hpp"

namespace ember::data {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string problem = file_problem(path);
    EMBER_THROW_AS(DataError, "data file '", path, "' ",
                   problem.empty() ? cat("cannot be opened (", std::strerror(err), ")") : problem);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    EMBER_THROW_AS(DataError, "cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    EMBER_THROW_AS(DataError, "data file '", path, "' ",
                   S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      EMBER_THROW_AS(DataError, "cannot map '", path, "' (", size_,
                     " bytes): ", std::strerror(err));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file
}

void MappedFile::advise_sequential() const {
  if (data_ != nullptr) (void)::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace ember::data
