// The one launch form of every kernel in kernels/cuda:
//   cuda::launch<kernel>(grid, block, shared_bytes, stream, args...);
// nvcc turns it into kernel<<<grid, block, shared_bytes, stream>>>(args...). The emulation build
// (-DTANDEM_CUDA=EMULATE, kernels/cuda/emulation) compiles the same kernel source with g++ and
// runs the grid on the CPU, one fiber per CUDA thread. Arguments convert to the kernel's
// parameter types as they would at a <<<>>> site. Check the launch with TANDEM_CUDA_CHECK_LAUNCH.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#if TANDEM_CUDA_EMULATION
#include "kernels/cuda/emulation/emulated_launch.h"
#endif

namespace tandem::cuda {

template <auto Kernel, typename... Args>
inline void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
#if TANDEM_CUDA_EMULATION
  emu::launch_kernel<Kernel>(grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#else
  Kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
}

}  // namespace tandem::cuda
