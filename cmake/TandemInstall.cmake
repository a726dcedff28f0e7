# `cmake --install <build> --prefix P` installs the library, its headers, the `tandem` program
# and a CMake package, so a host project writes
#   find_package(tandem 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE tandem::tandem)   (C and Fortran hosts: tandem::c)
# and gets the same include paths, definitions and link dependencies as the in-tree targets.
# tandem::tandem links every layer (cmake/TandemLayers.cmake); each layer is also exported on
# its own as tandem::<layer> (tandem::kernels, tandem::tensor, ...).
#
#   P/lib/libtandem_<layer>.a, P/lib/{libtandem_cli_lib,libtandem_c}.a
#   P/include/tandem/{base,kernels,tensor,collectives,engine,models,capi,apps/tandem}/...   #include "engine/nn/nn.h"
#   P/bin/tandem
#   P/lib/cmake/tandem/{tandemConfig,tandemConfigVersion,tandemTargets}.cmake
#
# The headers go under include/tandem/ rather than include/: their top-level folders (base,
# tensor, engine, kernels, models) are generic names that would collide with other packages in a
# shared prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TANDEM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
target_include_directories(tandem_base PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tandem>)

# The package carries no -march: consumers compile for whatever CPU they choose. No Eigen type
# crosses the library's headers, and the library's fast paths (the float32 GEMM) pick their
# instruction set at run time, so nothing has to agree with the CPU the library was built for.

# tandem::tandem (the engine) and its layers, tandem::cli (the command line as a library) and
# tandem::c (the C interface, capi/tandem.h, for C and Fortran hosts).
list(TRANSFORM TANDEM_LAYERS PREPEND tandem_ OUTPUT_VARIABLE TANDEM_LAYER_TARGETS)
install(TARGETS tandem ${TANDEM_LAYER_TARGETS} tandem_cli_lib tandem_c EXPORT tandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tandem_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir base kernels tensor collectives engine models capi)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem
          FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" PATTERN "*.def")
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/apps/tandem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem/apps
        FILES_MATCHING PATTERN "*.h")
install(EXPORT tandemTargets NAMESPACE tandem:: DESTINATION ${TANDEM_INSTALL_CMAKEDIR})

# What tandemConfig.cmake finds again before it loads the targets: the packages whose targets
# tandem::tandem links, with this build's choices (MPI, CUDA) baked in.
if(TANDEM_WITH_CUDA)
  get_filename_component(TANDEM_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
set(TANDEM_CUDNN_FILES)
set(TANDEM_NCCL_FILES)
if(TANDEM_WITH_CUDNN)
  set(TANDEM_CUDNN_FILES "${CUDNN_INCLUDE_DIR};${CUDNN_LIBRARY}")
endif()
if(TANDEM_WITH_NCCL)
  set(TANDEM_NCCL_FILES "${NCCL_INCLUDE_DIR};${NCCL_LIBRARY}")
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tandemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tandemConfig.cmake
                              INSTALL_DESTINATION ${TANDEM_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API, so find_package(tandem 0.1) accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tandemConfig.cmake ${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
        DESTINATION ${TANDEM_INSTALL_CMAKEDIR})
