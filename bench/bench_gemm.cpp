// GEMM throughput of the CPU backend (float32: the packed GEMM of kernels/cpu/gemm) at the
// square sizes 1024..4096, the MLP step's products (forward linear with bias, the two backward
// products of each layer), the GPT's (B*T x C x 3C and 4C, the projection back, GPT-2's 256 x 768
// rows into 2304 / 3072 / the 50304-word head) and attention's batched T x T products.
// Run: bench/run_gemm.sh  (runs this and bench/peers/gemm_torch.py at 1 and 2 threads, prints ratios)
//   build/bin/bench_gemm [reps]   (threads: OMP_NUM_THREADS)
// Each line: GFLOP/s (2*M*N*K*batch flops over the median of `reps` timed samples after a warm-up)
// per wall second and per CPU second (the process's CPU time over the threads: robust to other
// jobs on a shared machine), and each as a percentage of the FMA peak measured in this process
// on as many threads (bench/peak_measure.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/peak_measure.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/thread_pool.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

// A warm-up of about 0.2 s (at least one call), then the median rates of `reps` timed samples
// (per wall and per CPU second). The first shape measured after the peak loop ran at 67-74% of
// peak in some runs and 83-88% in others with one warm-up call; a fifth of a second settles it.
// A sample runs f() as many times as fill about 20 ms (the first call's time decides), so the two
// clock reads around it (the CPU-time one is a system call of ~1.6 us here) and their jitter stay
// under 0.1% even for the 10-class head's ~30 us product.
template <typename F>
bench::Rate median_rate(double gflop, int threads, int reps, F&& f) {
  const auto w0 = std::chrono::steady_clock::now();
  f();
  const double first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const int calls = int(std::clamp(0.02 / std::max(first_s, 1e-7), 1.0, 10000.0));
  for (int c = int(std::min(0.2 / std::max(first_s, 1e-7), 100000.0)); c > 1; --c) f();
  std::vector<double> wall, cpu;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = bench::process_cpu_seconds();
    for (int c = 0; c < calls; ++c) f();
    const double c = bench::process_cpu_seconds() - c0;
    wall.push_back(gflop * calls / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(gflop * calls / (c / threads));
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

struct Shape3 {
  const char* op;  // linear (x[M,K] w[N,K]^T + b), matmul (op(a) op(b)), bmm (batch of matmuls)
  int64_t m, n, k;
  bool ta = false, tb = false;
  int64_t batch = 1;
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  if (reps < 1) {
    std::fprintf(stderr, "bench_gemm: reps must be >= 1, got %s\n", argv[1]);
    return 2;
  }
  manual_seed(0);
  NoGradGuard no_grad;
  const int threads = cpu::max_threads();
  const bench::Rate peak = bench::fma_peak_gflops(threads);
  const std::vector<Shape3> shapes = {
      {"matmul", 1024, 1024, 1024}, {"matmul", 2048, 2048, 2048}, {"matmul", 4096, 4096, 4096},
      // MLP 784-1024-1024-10 at batch 256: forward, then dX = g W and dW = g^T x per layer.
      {"linear", 256, 1024, 784}, {"linear", 256, 1024, 1024}, {"linear", 256, 10, 1024},
      {"matmul", 256, 784, 1024}, {"matmul", 1024, 784, 256, true, false},
      {"matmul", 256, 1024, 1024}, {"matmul", 1024, 1024, 256, true, false},
      // GPT, B*T = 768 rows, C = 128: qkv, MLP up, MLP down; GPT-2 124M at 256 rows.
      {"linear", 768, 384, 128}, {"linear", 768, 512, 128}, {"linear", 768, 128, 512},
      {"linear", 256, 2304, 768}, {"linear", 256, 3072, 768}, {"linear", 256, 50304, 768},
      // Attention scores and values: 48 heads x (64 x 64 x 64), q k^T and p v.
      {"bmm", 64, 64, 64, false, true, 48}, {"bmm", 64, 64, 64, false, false, 48}};
  for (const Shape3& s : shapes) {
    const double gflop = 2.0 * double(s.m) * s.n * s.k * s.batch / 1e9;
    bench::Rate r{};
    if (std::string(s.op) == "linear") {
      Tensor x = Tensor::randn({s.m, s.k}), w = Tensor::randn({s.n, s.k}), b = Tensor::randn({s.n});
      r = median_rate(gflop, threads, reps, [&] { linear(x, w, b); });
    } else {
      const int64_t bt = s.batch;
      Tensor a = s.ta ? Tensor::randn({bt, s.k, s.m}).transpose(-1, -2) : Tensor::randn({bt, s.m, s.k});
      Tensor b = s.tb ? Tensor::randn({bt, s.n, s.k}).transpose(-1, -2) : Tensor::randn({bt, s.k, s.n});
      if (bt == 1) a = a.squeeze(0), b = b.squeeze(0);
      r = median_rate(gflop, threads, reps, [&] { matmul(a, b); });
    }
    std::printf("{\"bench\": \"gemm\", \"impl\": \"tandem\", \"op\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, "
                "\"ta\": %d, \"tb\": %d, \"batch\": %lld, \"threads\": %d, \"isa\": \"%s\", \"gflops\": %.2f, "
                "\"gflops_cpu\": %.2f, \"peak_gflops\": %.1f, \"peak_gflops_cpu\": %.1f, \"pct_peak\": %.1f, "
                "\"pct_peak_cpu\": %.1f}\n",
                s.op, (long long)s.m, (long long)s.n, (long long)s.k, int(s.ta), int(s.tb), (long long)s.batch,
                threads, cpu::isa_name(cpu::active_isa()), r.wall, r.cpu, peak.wall, peak.cpu,
                100.0 * r.wall / peak.wall, 100.0 * r.cpu / peak.cpu);
    std::fflush(stdout);
  }
  return 0;
}
