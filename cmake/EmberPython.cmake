# The Python module (`import ember`, src/ember/python/): optional. AUTO builds it when a Python 3
# interpreter with its development headers and pybind11 are found, and says why not otherwise.
#
# The interpreter: Python3_EXECUTABLE when given; else the first of `python3` on the PATH and
# /usr/bin/python3 that can import numpy (the module's arrays are numpy arrays), else the first
# found. pybind11: Debian's package (pybind11-dev), else pip's (`python3 -m pybind11 --cmakedir`),
# else its headers alone under PYBIND11_INCLUDE_DIR (a CMake or environment variable; pybind11 is
# header-only: a copy of the headers is enough).

set(EMBER_PYTHON "AUTO" CACHE STRING "Build the Python module: AUTO (when Python and pybind11 are found), ON or OFF")
set_property(CACHE EMBER_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(EMBER_WITH_PYTHON OFF)

function(_ember_python_missing why)
  if(EMBER_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "EMBER_PYTHON=ON but ${why}")
  endif()
  message(STATUS "Ember: Python module off (${why}; scripts/install-deps installs pybind11-dev, "
                 "python3-dev and python3-numpy)")
endfunction()

if(NOT EMBER_PYTHON STREQUAL "OFF")
  if(NOT EMBER_PYTHON MATCHES "^(AUTO|ON)$")
    message(FATAL_ERROR "EMBER_PYTHON must be AUTO, ON or OFF (got '${EMBER_PYTHON}')")
  endif()
  if(NOT Python3_EXECUTABLE)
    find_program(_ember_python_on_path python3)
    set(_ember_python_pick "")
    foreach(candidate ${_ember_python_on_path} /usr/bin/python3)
      if(EXISTS ${candidate} AND NOT _ember_python_pick)
        execute_process(COMMAND ${candidate} -c "import numpy" RESULT_VARIABLE _rc
                        OUTPUT_QUIET ERROR_QUIET)
        if(_rc EQUAL 0)
          set(_ember_python_pick ${candidate})
        endif()
      endif()
    endforeach()
    if(_ember_python_pick)
      set(Python3_EXECUTABLE ${_ember_python_pick} CACHE FILEPATH "The Python of the module")
    endif()
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(NOT Python3_FOUND)
    _ember_python_missing("no Python 3 interpreter with development headers was found")
  else()
    execute_process(COMMAND ${Python3_EXECUTABLE} -m pybind11 --cmakedir
                    OUTPUT_VARIABLE _pip_pybind11 OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    find_package(pybind11 CONFIG QUIET HINTS ${_pip_pybind11})
    if(pybind11_FOUND)
      set(EMBER_WITH_PYTHON ON)
      set(EMBER_PYBIND11_TARGET pybind11::headers)
    else()
      find_path(PYBIND11_INCLUDE_DIR pybind11/pybind11.h HINTS ENV PYBIND11_INCLUDE_DIR)
      if(PYBIND11_INCLUDE_DIR)
        set(EMBER_WITH_PYTHON ON)
        set(EMBER_PYBIND11_TARGET "")
      else()
        _ember_python_missing("pybind11 was not found")
      endif()
    endif()
  endif()
  if(EMBER_WITH_PYTHON)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy, pytest"
                    RESULT_VARIABLE EMBER_PYTHON_TESTABLE OUTPUT_QUIET ERROR_QUIET)
    if(pybind11_FOUND)
      set(_pybind11_what "pybind11 ${pybind11_VERSION}")
    else()
      set(_pybind11_what "pybind11 headers in ${PYBIND11_INCLUDE_DIR}")
    endif()
    message(STATUS "Ember: Python module on (${Python3_EXECUTABLE}, Python ${Python3_VERSION}, "
                   "${_pybind11_what})")
  endif()
endif()
