// pinned_host.h for CUDA builds: blocks from the caching allocator's pinned cache, whose free
// waits for the copies that pinned_record_stream noted (memory_cuda.cu does, for each
// host-to-device copy from a pinned block).
#include "kernels/pinned_host.h"

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_query.h"

namespace tandem {

bool pinned_host_available() {
  // cudaHostAlloc needs a driver and a device; without them a pinned tensor is ordinary memory.
  static const bool have_device = cuda::visible_device_count() > 0;
  return have_device;
}

void* pinned_host_alloc(size_t nbytes) { return pinned_host_available() ? cuda::pinned_alloc(nbytes) : nullptr; }

void pinned_host_free(void* p) noexcept { cuda::pinned_free(p, /*stream=*/nullptr); }

int pinned_host_thread_device() { return pinned_host_available() ? cuda::current_device() : -1; }

void pinned_host_use_device(int device) {
  if (device >= 0) cuda::set_current_device(device);
}

}  // namespace tandem
