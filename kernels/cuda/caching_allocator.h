// The CUDA caching allocator: device memory for tensors and kernel scratch, and pinned host
// memory for staging, both reused instead of returned to the driver.
//
// Why: cudaMalloc and cudaFree synchronize the device and cost tens of microseconds; a training
// step frees and re-allocates the same shapes every iteration. Freed blocks go to a per-device
// free list keyed by size class and are handed out again to later requests of the same class.
//
// Stream semantics: every block belongs to its device's compute stream (cuda_context.h), where
// all kernels run. Reuse is stream-ordered: a block freed on the host while kernels that use it
// are still queued can be handed to the next request at once, because that request's kernels are
// queued on the same stream behind them. A block also used on another stream (the NCCL stream, a
// copy stream) must be announced with record_stream(); its free then waits for an event on that
// stream before the block is reused.
//
// Size classes: requests round up to 512 B and then to a quarter of their power of two
// (1.0, 1.25, 1.5, 1.75 x 2^k), so at most 25% is wasted and repeated shapes hit exactly.
// When cudaMalloc fails, cached blocks are released and the request retried once; a second
// failure throws DeviceError with what was asked, what Tandem holds and what the device has.
//
// TANDEM_CUDA_POISON=1 fills every allocation with 0xFF bytes (NaN in every float dtype) so a
// kernel that leaves an output element unwritten is caught by the GPU tests.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

void* device_alloc(size_t nbytes, int device);
void device_free(void* p, int device);
// Marks that `stream` (a cudaStream_t) uses block p; p's free then waits for that stream.
void record_stream(void* p, int device, void* stream);

struct AllocatorStats {
  int64_t allocated_bytes = 0;       // held by live tensors and scratch (rounded sizes)
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;        // obtained from cudaMalloc, live or cached
  int64_t peak_reserved_bytes = 0;
  int64_t requests = 0;              // device_alloc calls
  int64_t driver_allocations = 0;    // of those, how many needed cudaMalloc
  int64_t cache_flushes = 0;         // times an out-of-memory retry released the cache
};
AllocatorStats allocator_stats(int device);
// True once the allocator has made the cache of any device; until then it has nothing to report.
bool allocator_started();
void reset_peak_stats(int device);
// Returns every cached (free) block of `device` to the driver.
void empty_cache(int device);

// Page-locked host memory for asynchronous host<->device copies: the copy stagings of
// memory_cuda.cu and pinned tensors (Tensor::empty_pinned). pinned_free(p, stream) records an
// event on `stream` (a cudaStream_t, or null when no copy is pending) and on every stream
// pinned_record_stream announced for p, and hands p out again only after those events completed.
void* pinned_alloc(size_t nbytes);
void pinned_free(void* p, void* stream);
// When [p, p + nbytes) lies inside a live block of pinned_alloc (p may point into its middle),
// notes that `stream` (a cudaStream_t of `device`) reads or writes it, so the block's free waits
// for the work queued there so far, and returns true. Returns false for any other memory.
// A lookup in an address-sorted map under a mutex: cheap enough for every host-to-device copy.
bool pinned_record_stream(const void* p, size_t nbytes, int device, void* stream);

// ---- private pools for CUDA graph capture (step_graph.h) ----
// A captured graph replays its kernels on the same addresses forever, so the memory it used must
// not go to anyone else while the graph lives. Between begin_capture_pool and end_capture_pool,
// the capturing thread's allocations on `device` come from a new private pool (its own free
// lists; blocks freed during capture are reused within the capture, in stream order), and
// blocks from outside the pool freed during capture are held back (a captured kernel may still
// use them). After end_capture_pool the pool's free blocks stay reserved for replays; blocks
// still owned by tensors return to it when freed. release_capture_pool(id), once the graph is
// gone, hands everything back to the device's ordinary free lists (stream order makes that safe:
// later work queues behind the last replay). Pinned staging buffers that captured copies read
// are held the same way (hold_pinned_for_capture).
int begin_capture_pool(int device);
void end_capture_pool(int device);
void release_capture_pool(int device, int pool);
// True while `device` has a capture underway (any thread).
bool capture_underway(int device);
// Keeps a pinned buffer a captured host-to-device copy reads until the pool is released.
void hold_pinned_for_capture(int device, void* p);

}  // namespace tandem::cuda
