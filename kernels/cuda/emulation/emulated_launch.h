// cuda::launch (kernels/cuda/launch.cuh) in the emulation build: the kernel's arguments are
// converted once to its parameter types, as a real launch copies them to the device, and each
// emulated CUDA thread calls the kernel with its own copy of them.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/emulation/block_runtime.h"

namespace tandem::emu {

// Runs a launch queued on `stream` (emulated_runtime.cpp: streams execute synchronously, on the
// calling thread), or records it into the stream's capture (stream_capture.h), and records its
// error for cudaGetLastError. `params` holds the kernel's arguments for as long as a graph may
// replay the launch.
void stream_launch(cudaStream_t stream, const char* kernel, dim3 grid, dim3 block, size_t shared_bytes,
                   void (*body)(void*), std::shared_ptr<void> params);

// "reduce_rows_block_kernel<Sum<float>>" from the compiler's signature of kernel_name<K>.
std::string kernel_name_from_signature(const char* pretty_function);
template <auto Kernel>
const char* kernel_name() {
  static const std::string name = kernel_name_from_signature(__PRETTY_FUNCTION__);
  return name.c_str();
}

template <typename F>
struct KernelParams;
template <typename... P>
struct KernelParams<void (*)(P...)> {
  using type = std::tuple<std::decay_t<P>...>;
};

template <auto Kernel, typename... Args>
void launch_kernel(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  using Params = typename KernelParams<decltype(Kernel)>::type;
  auto params = std::make_shared<Params>(std::forward<Args>(args)...);
  // std::apply copies each element into the kernel's by-value parameters: every thread has its own.
  auto body = [](void* p) { std::apply(Kernel, *static_cast<const Params*>(p)); };
  stream_launch(stream, kernel_name<Kernel>(), grid, block, shared_bytes, +body, std::move(params));
}

}  // namespace tandem::emu
