// share_cores_with_local_processes: processes an MPI launcher put on one machine split half its
// cores between their OpenMP loops, unless OMP_NUM_THREADS decides; a process alone changes
// nothing.
#include "ember/core/openmp_policy.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

namespace ember {
namespace {

// Sets (or, with nullptr, unsets) an environment variable for the scope and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST(OpenMpPolicy, LocalProcessesShareTheCores) {
  const int before = omp_get_max_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  {
    ScopedEnv threads("OMP_NUM_THREADS", nullptr);
    ScopedEnv mpich("MPI_LOCALNRANKS", nullptr);
    ScopedEnv mvapich("MV2_COMM_WORLD_LOCAL_SIZE", nullptr);
    {
      ScopedEnv alone("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
      EXPECT_EQ(share_cores_with_local_processes(), 0) << "no launcher";
    }
    {
      ScopedEnv one("OMPI_COMM_WORLD_LOCAL_SIZE", "1");
      EXPECT_EQ(share_cores_with_local_processes(), 0) << "one process on this machine";
    }
    {
      ScopedEnv garbage("OMPI_COMM_WORLD_LOCAL_SIZE", "2x");
      EXPECT_EQ(share_cores_with_local_processes(), 0) << "not a number";
    }
    for (int local : {2, 3, 1000}) {
      ScopedEnv open_mpi("OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local).c_str());
      const int want = std::max(1, cores / (2 * local));
      EXPECT_EQ(share_cores_with_local_processes(), want) << local << " processes";
      EXPECT_EQ(omp_get_max_threads(), want) << local << " processes";
    }
    {
      ScopedEnv open_mpi("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
      ScopedEnv hydra("MPI_LOCALNRANKS", "2");
      EXPECT_EQ(share_cores_with_local_processes(), std::max(1, cores / 4)) << "MPICH";
    }
  }
  {
    ScopedEnv threads("OMP_NUM_THREADS", "3");
    ScopedEnv open_mpi("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    EXPECT_EQ(share_cores_with_local_processes(), 0) << "OMP_NUM_THREADS decides";
  }
  omp_set_num_threads(before);
}

}  // namespace
}  // namespace ember
