// EMBER_MPI_CHECK: an MPI call's error code as an ember::Error with MPI's own text. Internal to
// the distributed layer (it includes <mpi.h>); empty where the build has no MPI.
#pragma once

#if EMBER_WITH_MPI
#include <mpi.h>

#include <string>

#include "ember/core/error.hpp"

#define EMBER_MPI_CHECK(call)                                                        \
  do {                                                                               \
    const int ember_mpi_rc_ = (call);                                                \
    if (ember_mpi_rc_ != MPI_SUCCESS) {                                              \
      char ember_mpi_text_[MPI_MAX_ERROR_STRING];                                    \
      int ember_mpi_len_ = 0;                                                        \
      MPI_Error_string(ember_mpi_rc_, ember_mpi_text_, &ember_mpi_len_);             \
      EMBER_THROW(#call, " failed: ", std::string(ember_mpi_text_, ember_mpi_len_)); \
    }                                                                                \
  } while (0)
#endif
