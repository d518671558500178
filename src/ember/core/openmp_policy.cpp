#include "ember/core/openmp_policy.hpp"

#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace ember {

void prefer_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);
}

int share_cores_with_local_processes() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return 0;
  long local = 0;
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n > 0) {
      local = n;
      break;
    }
  }
  if (local <= 1) return 0;
  const long cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = static_cast<int>(std::max(1L, cores / (2 * local)));
  omp_set_num_threads(threads);
  return threads;
}

}  // namespace ember
