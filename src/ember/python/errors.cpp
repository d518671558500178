// Ember's C++ errors as Python exceptions. The classes carry two bases where Python has a natural
// one, so that `except ValueError` catches a bad configuration and `except MemoryError` an
// exhausted device, while `except ember.Error` catches everything Ember raises.
#include <Python.h>

#include "ember/core/error.hpp"
#include "ember/python/bindings.hpp"

namespace ember::python {

namespace {

// The classes live as long as the module's interpreter; the translator reads them from here.
struct ErrorClasses {
  PyObject* error = nullptr;
  PyObject* config = nullptr;
  PyObject* data = nullptr;
  PyObject* out_of_memory = nullptr;
  PyObject* cuda_unavailable = nullptr;
};
ErrorClasses classes;

PyObject* make_class(py::module_& m, const char* name, std::initializer_list<PyObject*> bases,
                     const char* doc) {
  py::tuple base_tuple(bases.size());
  std::size_t i = 0;
  for (PyObject* b : bases)
    base_tuple[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = std::string("ember.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  classes.error = make_class(m, "Error", {PyExc_RuntimeError}, "Every error Ember raises.");
  classes.config = make_class(m, "ConfigError", {classes.error, PyExc_ValueError},
                              "A bad configuration or argument that the user must fix.");
  classes.data = make_class(m, "DataError", {classes.error},
                            "Bad input data: a malformed or truncated file, a key out of range.");
  classes.out_of_memory =
      make_class(m, "OutOfMemoryError", {classes.error, PyExc_MemoryError},
                 "Memory could not be obtained even after the caches were emptied.");
  classes.cuda_unavailable =
      make_class(m, "CudaUnavailableError", {classes.error},
                 "The operation needs CUDA but this build or this machine has none.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      PyErr_SetString(classes.config, e.what());
    } catch (const DataError& e) {
      PyErr_SetString(classes.data, e.what());
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(classes.out_of_memory, e.what());
    } catch (const CudaUnavailableError& e) {
      PyErr_SetString(classes.cuda_unavailable, e.what());
    } catch (const Error& e) {
      PyErr_SetString(classes.error, e.what());
    }
  });
}

}  // namespace ember::python
