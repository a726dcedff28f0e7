// The CPU backend's caching allocator for tensor storage (CpuBackend::allocate / deallocate),
// the host twin of kernels/cuda/caching_allocator.h.
//
// Why: a training step frees and allocates the same sizes every iteration. Freed blocks are kept
// on a free list per size class (64 B steps up to 64 KiB, 4 KiB steps above) and handed out again,
// so a steady-state step makes no malloc/free for tensors: no mmap/munmap, no page faults (each
// fresh 1 MiB block costs ~256 faults), no TLB shootdowns.
//
// Peak memory: blocks are reused only at their own size class, so a step whose sizes change over
// time needs some cached blocks beside its live ones. The cache is bounded so that it cannot
// grow without limit: a request that misses first returns cached blocks until live + cached +
// the request is at most 2 x the peak of live bytes so far (or live + the request, when that
// is a new peak), and at most 2 GiB stays cached. The CNN step's sizes need about 1.7 x its
// peak; at 1.5 x it went to the system allocator 7 times a step, each fresh block paying its
// page faults again (test_step_allocations). host_empty_cache() returns every cached block; the process's exit returns the rest.
//
// Thread-safe (one mutex). Under AddressSanitizer (-DTANDEM_SANITIZE=address) the cache is off:
// every block goes straight to aligned_alloc / free, so ASan still sees a use after free.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tandem::cpu {

void* host_alloc(size_t nbytes);
void host_free(void* p, size_t nbytes);

struct HostAllocatorStats {
  int64_t allocated_bytes = 0;       // held by live tensors (rounded sizes)
  int64_t peak_allocated_bytes = 0;
  int64_t cached_bytes = 0;          // freed blocks kept for reuse
  int64_t requests = 0;              // host_alloc calls
  int64_t system_allocations = 0;    // of those, how many went to aligned_alloc
};
HostAllocatorStats host_allocator_stats();
// Returns every cached block to the system.
void host_empty_cache();
// True when the cache is on (off under AddressSanitizer).
bool host_cache_enabled();

}  // namespace tandem::cpu
