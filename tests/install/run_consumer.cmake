# The install test (ctest install_consumer): `cmake --install` the build into a fresh prefix,
# then configure, build and run tests/install/consumer against that prefix alone, as a host
# project would, once on tandem::tandem and once on the tandem::nn layer alone. Also checks that
# the package refuses a version it does not provide and that nothing it exports points back into
# the source or build tree.
# The C host (consumer_c, tests/capi/test_capi.c against tandem::c) runs under mpirun -np 2.
# With MPI, host projects in C and Fortran (tests/install/host_languages) find the package.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=... [-DMPIEXEC=...]
#         [-DFORTRAN_COMPILER=...] [-DSANITIZE=...] -P run_consumer.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake needs -D${var}=...")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file lib/cmake/tandem/tandemConfig.cmake lib/cmake/tandem/tandemConfigVersion.cmake
             lib/cmake/tandem/tandemTargets.cmake include/tandem/engine/nn/nn.h include/tandem/capi/tandem.h
             include/tandem/base/error.h include/tandem/tensor/ops/ops.h bin/tandem)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "cmake --install did not install ${file} under ${prefix}")
  endif()
endforeach()
file(GLOB exported ${prefix}/lib/cmake/tandem/*.cmake)
foreach(file ${exported})
  file(READ ${file} text)
  foreach(tree ${SOURCE_DIR} ${BUILD_DIR})
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} refers to ${tree}; the installed package must not depend on the build")
    endif()
  endforeach()
endforeach()

set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -G ${GENERATOR}
              -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release)
# The version file: 0.1 is provided, 0.2 is not (0.x minor versions may break the API).
execute_process(COMMAND ${configure} -B ${WORK_DIR}/wrong_version -DTANDEM_REQUESTED_VERSION=0.2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "tandem")
  message(FATAL_ERROR "find_package(tandem 0.2) should fail against 0.1, but configure gave exit ${rc}:\n${err}")
endif()
run("configuring the consumer" ${configure} -B ${WORK_DIR}/build)
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("running the consumer" ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 ${WORK_DIR}/build/consumer)
message(STATUS "${last_output}")
if(NOT last_output MATCHES "consumer: loss decreased")
  message(FATAL_ERROR "the consumer ran but did not report a decreasing loss:\n${last_output}")
endif()
run("running the consumer linked with tandem::nn alone" ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1
    ${WORK_DIR}/build/consumer_nn)
if(NOT last_output MATCHES "consumer: loss decreased")
  message(FATAL_ERROR "the consumer on tandem::nn ran but did not report a decreasing loss:\n${last_output}")
endif()
if(NOT MPIEXEC)
  message(STATUS "no MPI in this build: the C consumer (it needs MPI) was not run")
  return()
endif()
# Host projects in C and in Fortran (no C++ enabled) find the package (configure only).
foreach(languages "C" "Fortran C")
  if(languages MATCHES "Fortran" AND NOT FORTRAN_COMPILER)
    continue()
  endif()
  string(REPLACE " " "_" dir "${languages}")
  run("find_package(tandem) from a ${languages} project" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/host_languages
      -B ${WORK_DIR}/host_${dir} -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix} "-DHOST_LANGUAGES=${languages}")
  if(NOT last_output MATCHES "tandem found from a ${languages} project")
    message(FATAL_ERROR "the ${languages} host project configured without finding tandem:\n${last_output}")
  endif()
endforeach()
# A host program of a sanitized package carries none of the build's sanitizer defaults
# (sanitizers/sanitizer_defaults.cpp): it names Open MPI's leak suppressions itself, with the
# unwinder that lets them match (the same settings, from the environment).
set(sanitizer_env)
if(SANITIZE MATCHES "address")
  list(APPEND sanitizer_env ASAN_OPTIONS=fast_unwind_on_malloc=0
       LSAN_OPTIONS=suppressions=${SOURCE_DIR}/sanitizers/lsan_openmpi.supp:print_suppressions=0)
endif()
run("running the C consumer" ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ${sanitizer_env} ${MPIEXEC} -np 2 --oversubscribe ${WORK_DIR}/build/consumer_c)
if(NOT last_output MATCHES "capi: passed")
  message(FATAL_ERROR "the C consumer ran but did not pass:\n${last_output}")
endif()
