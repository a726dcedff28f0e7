// The CUDA backend. This first version provides device memory, host<->device copies and fill;
// every other kernel falls back to Backend's default, which throws a DeviceError naming the
// kernel (the hand-written kernels arrive with the CUDA backend issue).
#include <cuda_runtime.h>

#include <string>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

namespace {

void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess)
    throw DeviceError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                      cudaGetErrorString(err));
}
#define TANDEM_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

// out[i] = value for a contiguous buffer of `n` elements of `bytes` each (bit pattern given).
template <typename Word>
__global__ void fill_kernel(Word* out, int64_t n, Word value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

class CudaBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }
  const char* name() const override { return "cuda"; }

  void* allocate(size_t nbytes, int device_index) override {
    TANDEM_CUDA_CHECK(cudaSetDevice(device_index));
    void* p = nullptr;
    TANDEM_CUDA_CHECK(cudaMalloc(&p, nbytes ? nbytes : 1));
    return p;
  }
  void deallocate(void* p, size_t, int device_index) override {
    cudaSetDevice(device_index);
    cudaFree(p);  // never throw from a destructor path
  }
  void copy_bytes(void* dst, const void* src, size_t nbytes, bool dst_on_host, bool src_on_host,
                  int device_index) override {
    TANDEM_CUDA_CHECK(cudaSetDevice(device_index));
    cudaMemcpyKind kind = dst_on_host ? (src_on_host ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost)
                                      : (src_on_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice);
    TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, kind));
  }
  void synchronize(int device_index) override {
    TANDEM_CUDA_CHECK(cudaSetDevice(device_index));
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  }

  void fill(const TensorView& out, double value) override {
    const int64_t n = out.numel();
    if (n == 0) return;
    const int threads = 256;
    const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 65535));
    switch (out.dtype) {
      case DType::Float32: fill_kernel<float><<<blocks, threads>>>(out.ptr<float>(), n, float(value)); break;
      case DType::Float64: fill_kernel<double><<<blocks, threads>>>(out.ptr<double>(), n, value); break;
      case DType::Int32: fill_kernel<int32_t><<<blocks, threads>>>(out.ptr<int32_t>(), n, int32_t(value)); break;
      case DType::Int64: fill_kernel<int64_t><<<blocks, threads>>>(out.ptr<int64_t>(), n, int64_t(value)); break;
      case DType::UInt8:
      case DType::Bool:
        fill_kernel<uint8_t><<<blocks, threads>>>(out.ptr<uint8_t>(), n,
                                                  uint8_t(out.dtype == DType::Bool ? value != 0 : value));
        break;
      case DType::Float16:
        fill_kernel<uint16_t><<<blocks, threads>>>(out.ptr<uint16_t>(), n, float_to_half(float(value)));
        break;
      case DType::BFloat16:
        fill_kernel<uint16_t><<<blocks, threads>>>(out.ptr<uint16_t>(), n, float_to_bf16(float(value)));
        break;
    }
    TANDEM_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace tandem
