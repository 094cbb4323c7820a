# Install-consumer test, run by CTest as:
#   cmake -D PAGEDATTN_BINARY_DIR=... -D INSTALL_PREFIX=... \
#         -D CONSUMER_SOURCE_DIR=... -D CONSUMER_BINARY_DIR=... \
#         [-D CONSUMER_GENERATOR=Ninja] [-D CMAKE_CUDA_COMPILER=...] \
#         [-D CMAKE_CUDA_HOST_COMPILER=...] [-D CMAKE_CXX_COMPILER=...] \
#         [-D EXPECTED_VERSION=x.y.z] -P run_consumer_test.cmake
#
# (a) installs the pagedattn build tree into a fresh prefix,
# (b) configures the consumer project against that prefix only,
# (c) builds it and runs the resulting program (no GPU needed).
cmake_minimum_required(VERSION 3.25)

foreach(_var PAGEDATTN_BINARY_DIR INSTALL_PREFIX CONSUMER_SOURCE_DIR CONSUMER_BINARY_DIR)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: -D ${_var}=... is required")
  endif()
endforeach()
if(NOT CONSUMER_GENERATOR)
  set(CONSUMER_GENERATOR Ninja)
endif()

function(run_step name)
  execute_process(
    COMMAND ${ARGN}
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    message(FATAL_ERROR
      "install_consumer: step '${name}' failed (exit ${_rc})\n"
      "command: ${_cmd}\n"
      "---- output ----\n${_out}\n----------------")
  endif()
  message(STATUS "install_consumer: step '${name}' ok")
  set(STEP_OUTPUT "${_out}" PARENT_SCOPE)
endfunction()

# Start from scratch so stale files from a previous run cannot hide problems.
file(REMOVE_RECURSE "${INSTALL_PREFIX}" "${CONSUMER_BINARY_DIR}")

# (a) install
run_step(install
  "${CMAKE_COMMAND}" --install "${PAGEDATTN_BINARY_DIR}" --prefix "${INSTALL_PREFIX}")

# (b) configure the consumer
set(_cfg_args
  -S "${CONSUMER_SOURCE_DIR}"
  -B "${CONSUMER_BINARY_DIR}"
  -G "${CONSUMER_GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${INSTALL_PREFIX}"
  -DCMAKE_CUDA_ARCHITECTURES=80
  -DCMAKE_BUILD_TYPE=Release)
foreach(_var CMAKE_CUDA_COMPILER CMAKE_CUDA_HOST_COMPILER CMAKE_CXX_COMPILER EXPECTED_VERSION)
  if(DEFINED ${_var} AND NOT "${${_var}}" STREQUAL "")
    list(APPEND _cfg_args "-D${_var}=${${_var}}")
  endif()
endforeach()
run_step(configure "${CMAKE_COMMAND}" ${_cfg_args})

# (c) build
run_step(build "${CMAKE_COMMAND}" --build "${CONSUMER_BINARY_DIR}")

# run it (host-only code path: needs no GPU / driver)
run_step(run "${CONSUMER_BINARY_DIR}/pagedattn_consumer")
if(NOT STEP_OUTPUT MATCHES "pagedattn consumer ok")
  message(FATAL_ERROR "install_consumer: unexpected program output:\n${STEP_OUTPUT}")
endif()
message(STATUS "install_consumer: passed")
