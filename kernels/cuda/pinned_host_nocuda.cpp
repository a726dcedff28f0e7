// pinned_host.h for builds without CUDA: there is no pinned memory, pinned tensors are ordinary
// host memory.
#include "kernels/pinned_host.h"

namespace tandem {

void* pinned_host_alloc(size_t) { return nullptr; }
void pinned_host_free(void*) noexcept {}
bool pinned_host_available() { return false; }
int pinned_host_thread_device() { return -1; }
void pinned_host_use_device(int) {}

}  // namespace tandem
