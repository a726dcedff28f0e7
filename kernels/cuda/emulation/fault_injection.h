// Test hooks of the emulation build for what only a broken GPU does.
#pragma once
#include <cuda_runtime.h>

namespace tandem::emu {

// From now on the runtime calls that use `device` (making it current, allocating on it, queueing
// work on its streams, synchronizing it) fail with `err`, as every call after a kernel fault does
// on a GPU (a sticky error), until clear_sticky_error(device).
void inject_sticky_error(int device, cudaError_t err);
void clear_sticky_error(int device);

}  // namespace tandem::emu
