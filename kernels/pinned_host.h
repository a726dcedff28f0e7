// Page-locked (pinned) host memory for CPU tensors that move to and from CUDA devices
// (Tensor::empty_pinned). The DMA engine reads and writes pinned memory directly, so a copy
// from it to a device is one asynchronous transfer instead of a memcpy into a staging buffer
// plus the transfer.
//
// Two implementations: kernels/cuda/pinned_host.cpp (CUDA builds: the caching allocator's
// pinned cache) and kernels/cuda/pinned_host_nocuda.cpp (no pinned memory at all).
#pragma once
#include <cstddef>

namespace tandem {

// nbytes of pinned host memory, or nullptr when there is none to give: a build without CUDA,
// or no visible CUDA device (the caller then uses ordinary host memory).
void* pinned_host_alloc(size_t nbytes);
// Returns a block of pinned_host_alloc. It is handed out again only after the host-to-device
// copies already queued from it have finished, so a tensor may be freed right after its copy.
void pinned_host_free(void* p) noexcept;
// Whether pinned_host_alloc can give pinned memory at all (a CUDA build with a visible device).
bool pinned_host_available();

// cudaHostAlloc runs in the context of the calling thread's current device, creating it when
// it does not exist, and a new thread starts on device 0. A thread that allocates pinned memory
// for another (a data-loading thread) first takes over that thread's device, so a rank on
// cuda:3 does not open a second context on GPU 0 (memory there, or a failed allocation when
// GPU 0 is in exclusive-process mode).
// The calling thread's current device; -1 when pinned memory is unavailable.
int pinned_host_thread_device();
// Makes `device` (from pinned_host_thread_device) current on the calling thread; -1: nothing.
void pinned_host_use_device(int device);

}  // namespace tandem
