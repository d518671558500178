// The extension module ember._ember; the package ember (ember/__init__.py) re-exports it.
#include "ember/python/bindings.hpp"

PYBIND11_MODULE(_ember, m) {
  m.doc() = "Ember's C++ core: sessions, configurations and errors (use the package 'ember')";
#ifdef EMBER_VERSION
  m.attr("__version__") = EMBER_VERSION;
#endif
  m.attr("cuda_compiled") =
#if EMBER_WITH_CUDA
      true;
#else
      false;
#endif
  ember::python::bind_errors(m);
  ember::python::bind_config(m);
  ember::python::bind_session(m);
}
