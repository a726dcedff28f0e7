// The CUDA emulator's execution model (one launch at a time per OS thread):
//   - a grid's blocks run one after another on the launching OS thread;
//   - a block's threads are fibers, started in thread order and switched only where CUDA lets
//     threads wait for each other: __syncthreads (all threads of the block) and the warp
//     collectives (__syncwarp, shuffles, votes, __match_any_sync: the lanes named in the mask);
//   - `__shared__` variables are `static thread_local` (device_emulation.h): one copy per OS
//     thread, which is one copy per running block.
// Misuse that hangs or corrupts a real GPU aborts here with a message naming the kernel and
// the block: a barrier that part of the block never reaches, a collective whose mask names a
// lane that exited or that waits elsewhere, lanes of one warp in different collectives.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::emu {

struct ThreadState {
  uint3 thread_idx;
};
struct BlockState {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

// The CUDA thread and block running on this OS thread (only valid inside a kernel).
extern thread_local ThreadState* t_thread;
extern thread_local BlockState* t_block;

// __syncthreads.
void block_barrier();

// The warp collectives. Each lane of `mask` deposits `value` (and its op's argument); when the
// last one arrives every lane gets its result. `op` and `arg` must agree across the lanes
// except where the op lets them differ (a shuffle's source lane).
enum class WarpOp : uint8_t { Sync, ShuffleIndex, ShuffleUp, ShuffleDown, ShuffleXor, Ballot, Any, All, MatchAny };
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
// The lanes of the calling thread's warp that have not exited (__activemask; a GPU reports the
// lanes converged at the call, which the emulator cannot know: call it before lanes diverge).
unsigned active_lanes();

// Runs a grid: body(ctx) once per CUDA thread. Returns cudaErrorInvalidConfiguration (without
// running anything) for a launch a GPU would refuse; the caller records it for cudaGetLastError.
cudaError_t run_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, void (*body)(void*), void* ctx);

// Aborts the process with `message` (emulator misuse or a device-side failure).
[[noreturn]] void device_abort(const char* kernel, const char* message);

}  // namespace tandem::emu
