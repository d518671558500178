# Third-party dependencies. Every one of them comes from Debian/Ubuntu packages that
# scripts/install-deps installs; nothing is downloaded at configure time.

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)

# OpenBLAS (ember::blas), NCCL (ember::nccl) and Parquet's codecs (ember::codecs): found by a
# file that the installed package shares, so that an installed Ember finds them the same way.
include(EmberSystemLibraries)
if(EMBER_WITH_CUDA AND NOT EMBER_WITH_NCCL)
  message(WARNING "NCCL not found: multi-GPU collectives will be unavailable")
endif()

if(EMBER_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    find_package(GTest REQUIRED)
  endif()
  include(GoogleTest)
endif()
if(EMBER_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()

# MPI is optional: multi-process training (`mpirun -np N ember train ...`) and the MPI
# collectives are built where MPI is found, unless -DEMBER_MPI=OFF; -DEMBER_MPI=ON makes a
# missing MPI an error.
set(EMBER_MPI AUTO CACHE STRING "Multi-process training over MPI: AUTO (where found), ON or OFF")
set_property(CACHE EMBER_MPI PROPERTY STRINGS AUTO ON OFF)
set(EMBER_WITH_MPI OFF)
if(NOT EMBER_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(EMBER_WITH_MPI ON)
  elseif(EMBER_MPI STREQUAL "ON")
    message(FATAL_ERROR "EMBER_MPI=ON but no MPI was found (install openmpi-bin libopenmpi-dev)")
  endif()
endif()

# PyTorch's C++ library, for the allocator benchmark's peer only (the device machine has it).
set(EMBER_WITH_TORCH OFF)
if(EMBER_WITH_CUDA AND EMBER_BUILD_BENCH)
  find_program(EMBER_PYTHON3 python3)
  if(EMBER_PYTHON3)
    execute_process(
      COMMAND ${EMBER_PYTHON3} -c "import torch, sys; sys.stdout.write(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE EMBER_TORCH_PREFIX ERROR_QUIET RESULT_VARIABLE _torch_rc)
    if(_torch_rc EQUAL 0 AND EMBER_TORCH_PREFIX)
      set(EMBER_TORCH_PREFIX ${EMBER_TORCH_PREFIX} CACHE PATH "PyTorch's CMake prefix")
    endif()
  endif()
endif()
