// Kernels that exercise the emulator's execution model (kernels/cuda/emulation) with known
// answers: shared memory and __syncthreads across several blocks, every warp collective with
// widths and partial masks, atomics, 3-D coordinates, and the misuse it must abort on.
#include "tests/emulation/emulator_kernels.h"

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/launch.cuh"

namespace tandem::emulator_test {
namespace {

cudaError_t last_error() { return cudaGetLastError(); }

__global__ void reverse_kernel(const int* in, int* out, int n) {
  __shared__ int slice[1024];
  const int t = int(threadIdx.x), base = int(blockIdx.x) * n;
  slice[t] = in[base + t];
  __syncthreads();  // every thread's store before any thread's load
  out[base + t] = slice[n - 1 - t];
}

__global__ void racy_reverse_kernel(const int* in, int* out, int n) {
  __shared__ int slice[1024];
  const int t = int(threadIdx.x), base = int(blockIdx.x) * n;
  slice[t] = in[base + t];
  out[base + t] = slice[n - 1 - t];  // no barrier: may read before thread n - 1 - t wrote
}

__global__ void warp_ops_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  unsigned* r = out + threadIdx.x * kWarpResults;
  const unsigned v = 100 + threadIdx.x;
  const unsigned mask = __activemask();           // before any lane can exit: the lanes that exist
  r[0] = __shfl_down_sync(mask, v, 1, 8);         // within groups of 8; the last lane keeps its own
  r[1] = __shfl_up_sync(mask, v, 2);              // the first two lanes keep their own
  r[2] = __shfl_xor_sync(mask, v, 3);
  r[3] = __shfl_sync(mask, v, 5, 16);             // lane 5 of each half-warp
  r[4] = __ballot_sync(mask, lane % 3 == 0);
  r[5] = __any_sync(mask, lane == 7);
  r[6] = __all_sync(mask, lane < 31);
  r[7] = __match_any_sync(mask, lane / 4);
  r[8] = mask;
}

__global__ void atomics_kernel(int* counter) {
  const int id = int((blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y) + threadIdx.y * blockDim.x +
                     threadIdx.x);
  atomicAdd(&counter[0], 1);
  atomicMax(&counter[1], id);
}

__global__ void coordinates_kernel(int* out) {
  const int block = int(blockIdx.y * gridDim.x + blockIdx.x);
  const int thread = int((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x);
  const int per_block = int(blockDim.x * blockDim.y * blockDim.z);
  out[block * per_block + thread] =
      int(blockIdx.x * 10000 + blockIdx.y * 1000 + threadIdx.x * 100 + threadIdx.y * 10 + threadIdx.z);
}

__global__ void half_block_barrier_kernel() {
  if (threadIdx.x < 16) return;  // these never reach the barrier the others wait at
  __syncthreads();
}

__global__ void exited_lane_shuffle_kernel(int* sink) {
  if (threadIdx.x >= 16) return;
  sink[threadIdx.x] = __shfl_sync(0xffffffffu, int(threadIdx.x), 0);  // the mask names lanes 16..31
}

__global__ void mixed_masks_kernel(int* sink) {
  const unsigned mask = threadIdx.x < 16 ? 0xffffffffu : 0xffff0000u;  // the first half waits for all 32
  sink[threadIdx.x] = __shfl_sync(mask, int(threadIdx.x), 0);
}

}  // namespace

cudaError_t reverse_in_blocks(const int* in, int* out, int n, int blocks) {
  cuda::launch<reverse_kernel>(unsigned(blocks), unsigned(n), 0, cuda::current_stream(), in, out, n);
  return last_error();
}
cudaError_t reverse_without_barrier(const int* in, int* out, int n, int blocks) {
  cuda::launch<racy_reverse_kernel>(unsigned(blocks), unsigned(n), 0, cuda::current_stream(), in, out, n);
  return last_error();
}
cudaError_t warp_ops(unsigned* out, int threads) {
  cuda::launch<warp_ops_kernel>(1, unsigned(threads), 0, cuda::current_stream(), out);
  return last_error();
}
cudaError_t atomics(int* counter, dim3 grid, dim3 block) {
  cuda::launch<atomics_kernel>(grid, block, 0, cuda::current_stream(), counter);
  return last_error();
}
cudaError_t coordinates(int* out, dim3 grid, dim3 block) {
  cuda::launch<coordinates_kernel>(grid, block, 0, cuda::current_stream(), out);
  return last_error();
}
cudaError_t barrier_skipped_by_half_the_block() {
  cuda::launch<half_block_barrier_kernel>(1, 32, 0, cuda::current_stream());
  return last_error();
}
cudaError_t shuffle_with_a_lane_that_exited() {
  static int sink[32];
  cuda::launch<exited_lane_shuffle_kernel>(1, 32, 0, cuda::current_stream(), sink);
  return last_error();
}
cudaError_t warp_lanes_with_different_masks() {
  static int sink[32];
  cuda::launch<mixed_masks_kernel>(1, 32, 0, cuda::current_stream(), sink);
  return last_error();
}

}  // namespace tandem::emulator_test
