// Streams and device guards (cuda_context.h), and the error text of cuda_check.h.
#include <array>
#include <atomic>
#include <mutex>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"

namespace tandem::cuda {

void throw_call_failed(const char* call, const char* file, int line, const std::string& message) {
  throw DeviceError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + message);
}

namespace {
constexpr int kMaxDevices = 64;
// Read on every kernel launch: an atomic load on the fast path, the mutex only to create.
std::array<std::atomic<cudaStream_t>, kMaxDevices> g_streams{};
std::mutex g_streams_mutex;
}  // namespace

cudaStream_t compute_stream(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw DeviceError("cuda:" + std::to_string(device) + " is outside the device range 0.." +
                      std::to_string(kMaxDevices - 1));
  std::atomic<cudaStream_t>& slot = g_streams[size_t(device)];
  if (cudaStream_t s = slot.load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  if (!slot.load(std::memory_order_relaxed)) {
    DeviceGuard guard(device);
    cudaStream_t created = nullptr;
    TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    slot.store(created, std::memory_order_release);
  }
  return slot.load(std::memory_order_relaxed);
}

int current_device() {
  int device = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

cudaStream_t current_stream() { return compute_stream(current_device()); }

DeviceGuard::DeviceGuard(int device) {
  TANDEM_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) TANDEM_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) noexcept {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    previous_ = device;  // nothing to restore
  } else if (previous_ != device && cudaSetDevice(device) != cudaSuccess) {
    previous_ = device;
  }
  cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
  int now = previous_;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

}  // namespace tandem::cuda
