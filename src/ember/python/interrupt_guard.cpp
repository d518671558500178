#include "ember/python/interrupt_guard.hpp"

#include <pybind11/pybind11.h>

namespace ember::python {

namespace {

// The flag of the guarded call (one at a time: only the main thread installs a guard).
std::atomic<std::atomic<bool>*> guarded_flag{nullptr};

extern "C" void request_stop(int) {
  if (std::atomic<bool>* flag = guarded_flag.load()) flag->store(true);
}

bool in_main_thread() {
  namespace py = pybind11;
  py::module_ threading = py::module_::import("threading");
  return threading.attr("current_thread")().is(threading.attr("main_thread")());
}

}  // namespace

InterruptGuard::InterruptGuard(std::atomic<bool>& stop) {
  if (!in_main_thread()) return;
  guarded_flag.store(&stop);
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  installed_ = sigaction(SIGINT, &action, &previous_) == 0;
  if (!installed_) guarded_flag.store(nullptr);
}

InterruptGuard::~InterruptGuard() {
  if (!installed_) return;
  sigaction(SIGINT, &previous_, nullptr);
  guarded_flag.store(nullptr);
}

}  // namespace ember::python
