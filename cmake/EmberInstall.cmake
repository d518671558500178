# Ember as a CMake package. `cmake --install build --prefix P` puts the layer libraries in P/lib,
# their headers in P/include/ember, the `ember` command in P/bin and the package files in
# P/lib/cmake/ember, so that another project can write
#   find_package(ember CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE ember::train)   # a layer and those below it; ember::ember: all
# The build tree is a package as well (export()): CMAKE_PREFIX_PATH=<build> finds it uninstalled.
# The command line (ember_cli) is the `ember` executable's own code and is not exported.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EMBER_EXPORTED_LAYERS core tensor distributed optim data embedding network train)
set(EMBER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ember)

# ember::ember: every layer at once.
add_library(ember_all INTERFACE)
add_library(ember::ember ALIAS ember_all)
target_link_libraries(ember_all INTERFACE ember_train)
set_target_properties(ember_all PROPERTIES EXPORT_NAME ember)

set(_ember_exported ember_all)
foreach(layer ${EMBER_EXPORTED_LAYERS})
  set_target_properties(ember_${layer} PROPERTIES EXPORT_NAME ${layer})
  list(APPEND _ember_exported ember_${layer})
endforeach()

install(TARGETS ${_ember_exported} EXPORT emberTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ember_exe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Every layer's headers; of the CUDA headers, the tensor layer's kernel building blocks (the
# others are private to their layer's .cu files).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ember DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "cli" EXCLUDE PATTERN "python" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/src/ember/tensor/cuda_apply.cuh
              ${PROJECT_SOURCE_DIR}/src/ember/tensor/cuda_vector_io.cuh
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/tensor)

# The package files: for the install tree, and for the build tree under <build>/cmake.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/emberConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/emberConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/emberConfig.cmake
                              INSTALL_DESTINATION ${EMBER_INSTALL_CMAKEDIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/EmberSystemLibraries.cmake
               ${PROJECT_BINARY_DIR}/cmake/EmberSystemLibraries.cmake COPYONLY)
export(EXPORT emberTargets NAMESPACE ember:: FILE ${PROJECT_BINARY_DIR}/cmake/emberTargets.cmake)
install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${EMBER_INSTALL_CMAKEDIR})
install(FILES ${PROJECT_BINARY_DIR}/cmake/emberConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/emberConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/EmberSystemLibraries.cmake
        DESTINATION ${EMBER_INSTALL_CMAKEDIR})
