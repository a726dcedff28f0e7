#pragma once
// GPU timing for the CUDA benchmarks: a CUDA error ends the benchmark with what failed, and
// time_ms(f, reps) is the mean milliseconds per call of f over `reps` calls on Tandem's current
// stream, best of 5 groups, after one warm-up call (which also builds plans and library caches).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda_context.h"

namespace tandem::bench {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <typename F>
double time_ms(F&& f, int reps) {
  cudaStream_t s = cuda::current_stream();
  f();
  check(cudaStreamSynchronize(s), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  double best = 1e30;
  for (int group = 0; group < 5; ++group) {
    check(cudaEventRecord(start, s), "record");
    for (int i = 0; i < reps; ++i) f();
    check(cudaEventRecord(stop, s), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    best = std::min(best, double(ms) / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace tandem::bench
