# Builds one README snippet (-DTARGET) in the build tree (-DBUILD_DIR) and runs it (-DEXE).
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "README.md's snippet ${TARGET} does not compile:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "README.md's snippet ${TARGET} compiled but exited ${rc}:\n${out}\n${err}")
endif()
