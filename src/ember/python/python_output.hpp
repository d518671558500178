// Where a session's display and evaluation lines go from Python: sys.stdout (so that notebooks
// show them), one whole line at a time, taking the GIL only for the write; or nowhere.
#pragma once

#include <ostream>
#include <streambuf>
#include <string>

namespace ember::python {

class PythonStdout : public std::streambuf {
 public:
  // quiet: the lines are dropped.
  explicit PythonStdout(bool quiet) : quiet_(quiet) {}
  ~PythonStdout() override;

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void write_line();
  bool quiet_;
  std::string line_;
};

// An ostream over its own PythonStdout.
class PythonStdoutStream : public std::ostream {
 public:
  explicit PythonStdoutStream(bool quiet) : std::ostream(nullptr), buffer_(quiet) {
    rdbuf(&buffer_);
  }

 private:
  PythonStdout buffer_;
};

}  // namespace ember::python
