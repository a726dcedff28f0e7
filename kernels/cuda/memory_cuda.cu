// CUDA backend: device memory (the caching allocator), copies, synchronize and fill. Every copy
// and kernel is queued on the device's compute stream; host-to-device copies read pinned tensors
// directly and stage other host memory through pinned buffers, and never wait for the device;
// the host waits only for device-to-host copies (the caller reads the bytes next) and in
// synchronize().
#include <cstring>

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/step_graph.h"

namespace tandem {

namespace {

// out[i] = value over a contiguous buffer of n words (the dtype's bit pattern).
template <typename Word>
__global__ void fill_kernel(Word* out, int64_t n, Word value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

template <typename Word>
void launch_fill(void* out, int64_t n, Word value) {
  cuda::launch<fill_kernel<Word>>(cuda::grid_for(n), cuda::kElementwiseThreads, 0, cuda::current_stream(), static_cast<Word*>(out),
                                  n, value);
  TANDEM_CUDA_CHECK_LAUNCH("fill");
}

// `waiter` runs what is queued on it next only after what is queued on `producer` now.
void order_after(cudaStream_t waiter, int waiter_device, cudaStream_t producer, int producer_device) {
  cudaEvent_t event = nullptr;
  {
    cuda::DeviceGuard guard(producer_device);
    TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    TANDEM_CUDA_CHECK(cudaEventRecord(event, producer));
  }
  cuda::DeviceGuard guard(waiter_device);
  TANDEM_CUDA_CHECK(cudaStreamWaitEvent(waiter, event, 0));
  TANDEM_CUDA_CHECK(cudaEventDestroy(event));  // released once the wait has happened
}

// cuda:src_device -> cuda:dst_device on the destination's stream, after the work that wrote the
// source (queued on the source's stream); and the source's stream waits for the copy, so the
// source's memory, which its allocator hands out again in the source stream's order, is not
// reused while the copy still reads it.
void copy_across_devices(void* dst, int dst_device, const void* src, int src_device, size_t nbytes) {
  cudaStream_t dst_stream = cuda::compute_stream(dst_device), src_stream = cuda::compute_stream(src_device);
  order_after(dst_stream, dst_device, src_stream, src_device);
  {
    cuda::DeviceGuard guard(dst_device);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, dst_stream));
  }
  order_after(src_stream, src_device, dst_stream, dst_device);
}

}  // namespace

void* CudaBackend::allocate(size_t nbytes, int device_index) { return cuda::device_alloc(nbytes, device_index); }

void CudaBackend::deallocate(void* p, size_t, int device_index) { cuda::device_free(p, device_index); }

void CudaBackend::copy_bytes(void* dst, const void* src, size_t nbytes, bool dst_on_host, bool src_on_host,
                             int device_index) {
  if (nbytes == 0) return;
  if (dst_on_host && src_on_host) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  cuda::DeviceGuard guard(device_index);
  cudaStream_t stream = cuda::compute_stream(device_index);
  if (src_on_host) {
    // A source inside a pinned block of Tandem's (a pinned tensor, Tensor::empty_pinned) is
    // read by the DMA directly: the block notes this stream, so its free waits for the copy
    // before the block is handed out again. Not while a CUDA graph is captured: every replay
    // reads the source again, so it must be a staging buffer the graph's pool keeps.
    const bool capturing = cuda::capture_underway(device_index);
    if (!capturing && cuda::pinned_record_stream(src, nbytes, device_index, stream)) {
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream));
      return;
    }
    // Other host memory goes through a pinned staging buffer: the host copy into it is the only
    // wait, the DMA runs asynchronously behind the kernels already queued, and the buffer
    // returns to the pinned cache once an event says the copy finished. A copy captured into a
    // CUDA graph reads the buffer at every replay, so the graph's pool keeps it instead.
    void* staging = cuda::pinned_alloc(nbytes);
    std::memcpy(staging, src, nbytes);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, staging, nbytes, cudaMemcpyHostToDevice, stream));
    if (capturing) {
      cuda::hold_pinned_for_capture(device_index, staging);
    } else {
      cuda::pinned_free(staging, stream);
    }
    return;
  }
  if (dst_on_host) cuda::count_host_read();
  if (!dst_on_host) {
    cudaPointerAttributes attributes{};
    TANDEM_CUDA_CHECK(cudaPointerGetAttributes(&attributes, src));
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != device_index) {
      copy_across_devices(dst, device_index, src, attributes.device, nbytes);
      return;
    }
  }
  const cudaMemcpyKind kind = dst_on_host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream));
  // The host reads device-to-host results right after this call. Into pinned memory the DMA
  // writes the destination directly; into pageable memory the driver stages it.
  if (dst_on_host) TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void CudaBackend::synchronize(int device_index) {
  cuda::count_host_read();
  cuda::DeviceGuard guard(device_index);
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(cuda::compute_stream(device_index)));
}

void CudaBackend::fill(const TensorView& out, double value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  switch (out.dtype) {
    case DType::Float32: launch_fill<float>(out.data, n, float(value)); break;
    case DType::Float64: launch_fill<double>(out.data, n, value); break;
    case DType::Int32: launch_fill<int32_t>(out.data, n, int32_t(value)); break;
    case DType::Int64: launch_fill<int64_t>(out.data, n, int64_t(value)); break;
    case DType::UInt8: launch_fill<uint8_t>(out.data, n, uint8_t(value)); break;
    case DType::Bool: launch_fill<uint8_t>(out.data, n, uint8_t(value != 0)); break;
    case DType::Float16: launch_fill<uint16_t>(out.data, n, float_to_half(float(value))); break;
    case DType::BFloat16: launch_fill<uint16_t>(out.data, n, float_to_bf16(float(value))); break;
  }
}

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace tandem
