// GEMM and linear-layer throughput on the CPU backend at the MLP's shapes.
// Run: bench/run_gemm.sh  (builds, runs this and bench/peers/gemm_torch.py, prints ratios)
// Floor: 2*M*N*K flops per GEMM; report GFLOP/s as the median of `reps` timed runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/ops.h"
#include "engine/tensor/generator.h"

using namespace tandem;

namespace {

template <typename F>
double median_seconds(F&& f, int reps) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  manual_seed(0);
  NoGradGuard no_grad;
  // (M, N, K): forward x[M,K] W^T -> [M,N], and the two backward products of the MLP layers.
  const int shapes[][3] = {{256, 1024, 784}, {256, 1024, 1024}, {256, 10, 1024},
                           {1024, 784, 256}, {1024, 1024, 256}, {1024, 1024, 1024}};
  for (const auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    Tensor x = Tensor::randn({M, K}), w = Tensor::randn({N, K}), b = Tensor::randn({N});
    double sec = median_seconds([&] { linear(x, w, b); }, reps);
    std::printf("{\"bench\": \"linear\", \"impl\": \"tandem\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"gflops\": %.2f}\n",
                (long long)M, (long long)N, (long long)K, 2.0 * M * N * K / sec / 1e9);
  }
  return 0;
}
