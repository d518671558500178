#include "ember/python/python_output.hpp"

#include <pybind11/pybind11.h>

namespace ember::python {

namespace py = pybind11;

PythonStdout::~PythonStdout() {
  if (!line_.empty() && Py_IsInitialized()) {
    try {
      write_line();
    } catch (...) {  // a destructor reports nothing; the line was only a display line
    }
  }
}

PythonStdout::int_type PythonStdout::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  line_.push_back(traits_type::to_char_type(ch));
  if (ch == '\n') write_line();
  return ch;
}

std::streamsize PythonStdout::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i)
    overflow(traits_type::to_int_type(s[i]));
  return n;
}

int PythonStdout::sync() {
  if (!line_.empty()) write_line();
  return 0;
}

void PythonStdout::write_line() {
  std::string line;
  line.swap(line_);
  if (quiet_) return;
  py::gil_scoped_acquire gil;
  // An error while writing (a closed stdout) must not end the training that printed the line.
  try {
    py::object out = py::module_::import("sys").attr("stdout");
    if (out.is_none()) return;
    out.attr("write")(line);
    out.attr("flush")();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("ember: writing a display line to sys.stdout");
  }
}

}  // namespace ember::python
