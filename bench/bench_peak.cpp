// The machine's ceilings (bench/peak_measure.h): float32 FMA GFLOP/s per core and for all cores
// in every instruction set the CPU runs (the first, widest, is the peak other benchmarks divide
// by), and STREAM triad GB/s on one core and all cores. One JSON line per number.
//   bench/run_peak.sh            (or build/bin/bench_peak [threads], default: all cores)
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "bench/peak_measure.h"

int main(int argc, char** argv) {
  using namespace tandem::bench;
  const int all = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  if (all < 1) {
    std::fprintf(stderr, "bench_peak: threads must be >= 1, got %s\n", argv[1]);
    return 2;
  }
  bool widest = true;
  for (const FmaLoop& loop : fma_loops()) {
    for (int threads : {1, all}) {
      const Rate r = fma_gflops(loop, threads);
      std::printf("{\"bench\": \"fma_peak\", \"isa\": \"%s\", \"widest\": %s, \"threads\": %d, \"gflops\": %.1f, "
                  "\"gflops_cpu\": %.1f}\n",
                  loop.isa, widest ? "true" : "false", threads, r.wall, r.cpu);
      if (all == 1) break;
    }
    widest = false;
  }
  for (int threads : {1, all}) {
    const Rate r = triad_gbps(threads);
    std::printf("{\"bench\": \"stream_triad\", \"threads\": %d, \"gbps\": %.1f, \"gbps_cpu\": %.1f}\n", threads, r.wall,
                r.cpu);
    if (all == 1) break;
  }
  return 0;
}
