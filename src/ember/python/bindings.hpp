// The parts of the extension module ember._ember, each adding its names to the module.
#pragma once

#include <pybind11/pybind11.h>

namespace ember::python {

namespace py = pybind11;

// ember.Error and its subclasses (ConfigError is a ValueError, OutOfMemoryError a MemoryError),
// and the translation of Ember's C++ errors into them, message unchanged.
void bind_errors(py::module_& m);
// Reading and checking configurations with the C++ reader (what ember.Model.compile() uses).
void bind_config(py::module_& m);
// The training session.
void bind_session(py::module_& m);

}  // namespace ember::python
