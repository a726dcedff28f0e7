// Host entry points of the emulator's own test kernels (emulator_kernels.cu). Each runs one
// launch through cuda::launch on the current device's compute stream and returns
// cudaGetLastError() after it; pointers are device memory.
#pragma once
#include <cuda_runtime.h>

namespace tandem::emulator_test {

// out[b * n + t] = in[b * n + (n - 1 - t)]: each block reverses its slice through shared memory.
cudaError_t reverse_in_blocks(const int* in, int* out, int n, int blocks);
// The same without its __syncthreads: a data race on shared memory (for the race-check build).
cudaError_t reverse_without_barrier(const int* in, int* out, int n, int blocks);
// Per lane of a `threads`-thread block, 9 results (see the kernel for which op each is).
constexpr int kWarpResults = 9;
cudaError_t warp_ops(unsigned* out, int threads);
// counter[0] += 1 and counter[1] = max(counter[1], global id) from every thread.
cudaError_t atomics(int* counter, dim3 grid, dim3 block);
// out[linear id] = blockIdx/threadIdx packed as (bx, by, tx, ty, tz) digits.
cudaError_t coordinates(int* out, dim3 grid, dim3 block);
// Misuse, for death tests: each aborts the process with a message naming the kernel.
cudaError_t barrier_skipped_by_half_the_block();
cudaError_t shuffle_with_a_lane_that_exited();
cudaError_t warp_lanes_with_different_masks();

}  // namespace tandem::emulator_test
