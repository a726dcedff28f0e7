// Error checks for CUDA runtime, cuBLAS(Lt) and cuDNN calls. A failure throws DeviceError
// naming the call, the file and line, and the library's own message, e.g.
//   "cudaMalloc(&p, n) failed at kernels/cuda/caching_allocator.cu:88: out of memory".
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace tandem::cuda {

[[noreturn]] void throw_call_failed(const char* call, const char* file, int line, const std::string& message);

inline void check_runtime(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so later calls start clean
    throw_call_failed(call, file, line, std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err));
  }
}

}  // namespace tandem::cuda

#define TANDEM_CUDA_CHECK(call) ::tandem::cuda::check_runtime((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports bad launch configurations (and earlier asynchronous faults).
#define TANDEM_CUDA_CHECK_LAUNCH(kernel_name) \
  ::tandem::cuda::check_runtime(cudaGetLastError(), kernel_name " launch", __FILE__, __LINE__)
