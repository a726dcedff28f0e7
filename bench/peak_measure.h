// The machine's measured ceilings, shared by bench/bench_peak.cpp and every CPU benchmark that
// reports "% of measured peak": FMA throughput (a register-only loop of independent FMA chains in
// the widest instruction set CPUID reports: AVX-512, AVX2 + FMA, else plain float code) and memory
// bandwidth (the STREAM triad a = b + s*c over arrays far larger than the caches). Each number
// is the median of 5 timed runs on `threads` threads started for the run (each runs the whole loop;
// GFLOP/s and GB/s are totals), per wall-clock second and per CPU second (the process's CPU time
// divided by the threads: the rate while the threads actually run, which on a machine shared
// with other jobs is the number that can be compared between runs).
// Header-only: only the loop functions carry target attributes.
#pragma once
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::bench {

// Flops per call of the loops below: iters * chains * lanes * 2 (an FMA is 2 flops).
constexpr int64_t kPeakIters = int64_t(1) << 24;
// Independent accumulators: 2 FMA pipes x latency 4-6 needs 8-12; 12 also fits AVX2's 16
// registers next to the two constants (16 would spill and measure the spills).
constexpr int kPeakChains = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline float fma_loop_avx512(float seed) {
  __m512 acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < kPeakIters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  __m512 s = acc[0];
  for (int i = 1; i < kPeakChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(float seed) {
  __m256 acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < kPeakIters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  __m256 s = acc[0];
  for (int i = 1; i < kPeakChains; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif

// Plain float code: the compiler vectorizes the chains for the baseline ISA (SSE: mul + add).
inline float fma_loop_scalar(float seed) {
  float acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = seed + float(i);
  for (int64_t it = 0; it < kPeakIters / 16; ++it)  // a sixteenth of the iterations: scalar is slow
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

struct FmaLoop {
  const char* isa;
  int lanes;            // floats per FMA
  int64_t iters;        // iterations per call
  float (*run)(float);
};

// The FMA loops this CPU can run, widest first.
inline std::vector<FmaLoop> fma_loops() {
  std::vector<FmaLoop> loops;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) loops.push_back({"avx512", 16, kPeakIters, fma_loop_avx512});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    loops.push_back({"avx2", 8, kPeakIters, fma_loop_avx2});
#endif
  loops.push_back({"baseline", 1, kPeakIters / 16, fma_loop_scalar});
  return loops;
}

inline double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// A rate per wall-clock second and per CPU second per thread.
struct Rate {
  double wall, cpu;
};

// `work` units per call of `run` on `threads` threads: the median rate of 5 calls.
template <typename F>
Rate median_rate(double work, int threads, F&& run) {
  std::vector<double> wall, cpu;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    run();
    const double c = process_cpu_seconds() - c0;
    const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    wall.push_back(work / w);
    cpu.push_back(work / (c / threads));
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[2], cpu[2]};
}

// body(t) for t in [0, threads), each on its own thread at the same time (t = 0 on the caller).
template <typename F>
void on_threads(int threads, F&& body) {
  std::vector<std::thread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back([&body, t] { body(t); });
  body(0);
  for (std::thread& th : others) th.join();
}

// GFLOP/s of `loop` on `threads` threads together (median of 5).
inline Rate fma_gflops(const FmaLoop& loop, int threads) {
  volatile float sink = 0;
  const double gflop = double(threads) * double(loop.iters) * kPeakChains * loop.lanes * 2.0 / 1e9;
  return median_rate(gflop, threads, [&] {
    std::vector<float> sums(size_t(threads), 0.0f);
    on_threads(threads, [&](int t) { sums[size_t(t)] = loop.run(float(t)); });
    for (float s : sums) sink = sink + s;
  });
}

// The machine's float32 FMA peak on `threads` threads: the widest ISA's loop, the best of 3
// medians. A ceiling is the most the machine did: on the shared project VM one median of 5 ranged
// from 150 to 226 GFLOP/s on one core from run to run, and a low one put a GEMM at "120% of peak".
inline Rate fma_peak_gflops(int threads) {
  Rate best{0.0, 0.0};
  for (int round = 0; round < 3; ++round) {
    const Rate r = fma_gflops(fma_loops().front(), threads);
    best = {std::max(best.wall, r.wall), std::max(best.cpu, r.cpu)};
  }
  return best;
}

// STREAM triad GB/s on `threads` threads (24 bytes per element: two reads, one write of doubles).
inline Rate triad_gbps(int threads, int64_t n = int64_t(1) << 25) {
  std::unique_ptr<double[]> a(new double[size_t(n)]), b(new double[size_t(n)]), c(new double[size_t(n)]);
  auto slice = [&](int t, auto&& fn) {  // thread t's share of [0, n), the same share every time
    for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) fn(i);
  };
  on_threads(threads, [&](int t) { slice(t, [&](int64_t i) { a[i] = 0.0, b[i] = 1.0, c[i] = 2.0; }); });  // first touch
  const double s = 3.0;
  return median_rate(24.0 * double(n) / 1e9, threads, [&] {
    on_threads(threads, [&](int t) { slice(t, [&](int64_t i) { a[i] = b[i] + s * c[i]; }); });
  });
}

}  // namespace tandem::bench
