// The emulator under a sanitizer (tests/emulation/CMakeLists.txt builds this with
// -fsanitize=thread and with -fsanitize=address): `clean` runs correct kernels, which must
// produce no report; `race` runs the block reversal without its __syncthreads, which
// ThreadSanitizer must report as a data race between emulated CUDA threads; `overflow` reads one
// element past a device allocation, which AddressSanitizer must report.
#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/emulation/emulator_kernels.h"

using namespace tandem::emulator_test;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int n = 64, blocks = 2;
  int *in = nullptr, *out = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&in), sizeof(int) * n * blocks);
  cudaMalloc(reinterpret_cast<void**>(&out), sizeof(int) * n * blocks);
  std::vector<int> host(n * blocks, 1);
  cudaMemcpy(in, host.data(), sizeof(int) * host.size(), cudaMemcpyHostToDevice);
  cudaError_t err = cudaErrorInvalidValue;
  if (std::strcmp(argv[1], "clean") == 0) {
    err = reverse_in_blocks(in, out, n, blocks);
    if (err == cudaSuccess) {
      std::vector<unsigned> warp(64 * kWarpResults);
      unsigned* d = nullptr;
      cudaMalloc(reinterpret_cast<void**>(&d), sizeof(unsigned) * warp.size());
      err = warp_ops(d, 64);
    }
  } else if (std::strcmp(argv[1], "race") == 0) {
    err = reverse_without_barrier(in, out, n, blocks);
  } else if (std::strcmp(argv[1], "overflow") == 0) {
    err = reverse_in_blocks(in, out, n + 1, blocks - 1);  // thread n reads in[n] of a 2n buffer: fine ...
    if (err == cudaSuccess) err = reverse_in_blocks(in + n, out, n + 1, 1);  // ... and here in[2n]: past the end
  }
  std::printf("%s: %s\n", argv[1], cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}
