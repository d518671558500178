# The libraries Ember's layers link that have no CMake package of their own: OpenBLAS
# (ember::blas, for the tensor layer's CPU GEMM), Parquet's page codecs (ember::codecs: zlib,
# libzstd and libsnappy, for the data layer) and, in CUDA builds, NCCL (ember::nccl, for the
# distributed layer). Included by the build (EmberDependencies.cmake) and by the installed
# emberConfig.cmake, so that an installed Ember finds them again on the machine that uses it.
# Reads EMBER_WITH_CUDA (CUDAToolkit already found when ON); sets EMBER_WITH_NCCL.

if(NOT TARGET ember::blas)
  # The Debian package ships a CMake config; else the generic BLAS module and cblas.h.
  find_package(OpenBLAS CONFIG QUIET)
  add_library(ember::blas INTERFACE IMPORTED)
  if(OpenBLAS_FOUND)
    target_include_directories(ember::blas INTERFACE ${OpenBLAS_INCLUDE_DIRS})
    target_link_libraries(ember::blas INTERFACE ${OpenBLAS_LIBRARIES})
  else()
    set(BLA_VENDOR OpenBLAS)
    find_package(BLAS REQUIRED)
    find_path(EMBER_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas openblas-pthread
              x86_64-linux-gnu/openblas-pthread REQUIRED)
    target_include_directories(ember::blas INTERFACE ${EMBER_CBLAS_INCLUDE})
    target_link_libraries(ember::blas INTERFACE BLAS::BLAS)
  endif()
endif()

if(NOT TARGET ember::codecs)
  # zlib is required; Debian's libzstd-dev and libsnappy-dev (scripts/install-deps) are used where
  # found. A build without libzstd reads and writes every other codec and says, when it meets a
  # ZSTD page, that this build lacks it; SNAPPY pages are read in every build (Ember's own
  # decoder), and libsnappy is needed only to write them (the GPU machines have neither package).
  find_package(ZLIB REQUIRED)
  add_library(ember::codecs INTERFACE IMPORTED)
  target_link_libraries(ember::codecs INTERFACE ZLIB::ZLIB)
  find_path(EMBER_ZSTD_INCLUDE zstd.h)
  find_library(EMBER_ZSTD_LIBRARY zstd)
  if(EMBER_ZSTD_INCLUDE AND EMBER_ZSTD_LIBRARY)
    target_include_directories(ember::codecs INTERFACE ${EMBER_ZSTD_INCLUDE})
    target_link_libraries(ember::codecs INTERFACE ${EMBER_ZSTD_LIBRARY})
    target_compile_definitions(ember::codecs INTERFACE EMBER_WITH_ZSTD=1)
  else()
    message(STATUS "Ember: libzstd not found; Parquet ZSTD pages will be refused")
  endif()
  find_path(EMBER_SNAPPY_INCLUDE snappy-c.h)
  find_library(EMBER_SNAPPY_LIBRARY snappy)
  if(EMBER_SNAPPY_INCLUDE AND EMBER_SNAPPY_LIBRARY)
    target_include_directories(ember::codecs INTERFACE ${EMBER_SNAPPY_INCLUDE})
    target_link_libraries(ember::codecs INTERFACE ${EMBER_SNAPPY_LIBRARY})
    target_compile_definitions(ember::codecs INTERFACE EMBER_WITH_SNAPPY=1)
  else()
    message(STATUS "Ember: libsnappy not found; Parquet SNAPPY pages are read but not written")
  endif()
endif()

# NCCL ships with the CUDA toolkit on some machines and as a system package on others.
set(EMBER_WITH_NCCL OFF)
if(EMBER_WITH_CUDA)
  find_path(EMBER_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
  find_library(EMBER_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
  if(EMBER_NCCL_INCLUDE AND EMBER_NCCL_LIBRARY)
    set(EMBER_WITH_NCCL ON)
    if(NOT TARGET ember::nccl)
      add_library(ember::nccl INTERFACE IMPORTED)
      target_include_directories(ember::nccl INTERFACE ${EMBER_NCCL_INCLUDE})
      target_link_libraries(ember::nccl INTERFACE ${EMBER_NCCL_LIBRARY})
    endif()
  endif()
endif()
