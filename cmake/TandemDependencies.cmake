# Finds the dependencies (all from Debian packages; see scripts/install-deps.sh) and resolves
# TANDEM_CUDA / TANDEM_MPI into TANDEM_WITH_CUDA / TANDEM_WITH_MPI.
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(ZLIB REQUIRED)

# TANDEM_CUDA / TANDEM_MPI take AUTO, ON or OFF (CMake's other spellings of on/off too, any case);
# anything else stops the configure with a message instead of being read as AUTO.
function(tandem_normalize_switch var)
  string(TOUPPER "${${var}}" value)
  if(value MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(value ON)
  elseif(value MATCHES "^(OFF|NO|FALSE|N|0)$")
    set(value OFF)
  elseif(NOT value STREQUAL "AUTO")
    message(FATAL_ERROR "${var}=${${var}} is not valid; use -D${var}=AUTO, ON or OFF")
  endif()
  set(${var} ${value} PARENT_SCOPE)
endfunction()
# TANDEM_CUDA also takes EMULATE: the CUDA backend compiled by the C++ compiler, its kernels run
# on the CPU by kernels/cuda/emulation (no GPU, no nvcc needed; the CUDA headers are).
string(TOUPPER "${TANDEM_CUDA}" tandem_cuda_upper)
set(TANDEM_CUDA_EMULATION OFF)
if(tandem_cuda_upper STREQUAL "EMULATE")
  set(TANDEM_CUDA_EMULATION ON)
else()
  tandem_normalize_switch(TANDEM_CUDA)
endif()
tandem_normalize_switch(TANDEM_MPI)

# ---- CUDA ----
set(TANDEM_WITH_CUDA OFF)
if(TANDEM_CUDA_EMULATION)
  # Headers only (types, cuda_fp16/cuda_bf16 host code); the runtime is kernels/cuda/emulation.
  find_package(CUDAToolkit REQUIRED)
  set(TANDEM_WITH_CUDA ON)
elseif(NOT TANDEM_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) SASS plus PTX so newer GPUs can JIT.
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 dialect for nvcc 13; kernels and the headers they include are C++17.
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    set(TANDEM_WITH_CUDA ON)
  elseif(TANDEM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TANDEM_CUDA=ON but no CUDA compiler (nvcc) was found; install the CUDA toolkit "
                        "or configure with -DTANDEM_CUDA=OFF")
  endif()
endif()
message(STATUS "Tandem: CUDA backend ${TANDEM_WITH_CUDA} (emulated on the CPU: ${TANDEM_CUDA_EMULATION})")

# ---- cuDNN: convolutions on CUDA (kernels/cuda/conv_pool_cuda.cu). Optional: without it the
# build still succeeds and conv2d on a GPU throws DeviceError saying how to install cuDNN 9. ----
set(TANDEM_WITH_CUDNN OFF)
if(TANDEM_WITH_CUDA AND NOT TANDEM_CUDA_EMULATION)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES x86_64-linux-gnu aarch64-linux-gnu)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    set(TANDEM_WITH_CUDNN ON)
  else()
    message(STATUS "Tandem: cuDNN not found (conv2d on CUDA will be unavailable); install cuDNN 9 for "
                   "CUDA 13, e.g. apt-get install libcudnn9-dev-cuda-13 from NVIDIA's CUDA repository")
  endif()
endif()
message(STATUS "Tandem: cuDNN ${TANDEM_WITH_CUDNN}")

# ---- MPI ----
set(TANDEM_WITH_MPI OFF)
if(NOT TANDEM_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(TANDEM_WITH_MPI ON)
  elseif(TANDEM_MPI STREQUAL "ON")
    message(FATAL_ERROR "TANDEM_MPI=ON but MPI was not found; apt-get install libopenmpi-dev openmpi-bin")
  endif()
endif()
message(STATUS "Tandem: MPI ${TANDEM_WITH_MPI}")

# ---- NCCL: the GPU communicator, bootstrapped by MPI, so it needs CUDA and MPI ----
set(TANDEM_WITH_NCCL OFF)
# Never in the emulation build: NCCL is not faked; DDP there runs over the MPI communicator.
if(TANDEM_WITH_CUDA AND TANDEM_WITH_MPI AND NOT TANDEM_CUDA_EMULATION)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(TANDEM_WITH_NCCL ON)
  endif()
endif()
message(STATUS "Tandem: NCCL ${TANDEM_WITH_NCCL}")

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
