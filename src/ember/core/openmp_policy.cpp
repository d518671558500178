#include "ember/core/openmp_policy.hpp"

#include <unistd.h>

#include <cstdlib>

namespace ember {

void prefer_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace ember
