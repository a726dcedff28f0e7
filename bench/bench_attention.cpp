// Causal scaled-dot-product attention on the CPU backend, forward and forward + backward, at the
// GPT presets' attention shapes. Run: bench/run_attention.sh [reps] (builds, runs this and
// bench/peers/attention_torch.py in one go, prints the ratios).
// Floor: a dense attention is 4 B H T^2 D flops forward (q k^T and p v) and 8 B H T^2 D more
// backward (dv, dp, dq, dk); GFLOP/s below count these dense flops for both implementations
// (causal masking lets the tiled kernel skip about half), so the ratio is the ratio of times.
// The same run times a 1024 x 1024 x 1024 float32 matmul (the fastest of `reps` runs): its GFLOP/s
// is the "measured peak" the attention rates are quoted against.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

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

// The fastest of `reps` runs (after a warm-up): the peak estimate.
template <typename F>
double best_seconds(F&& f, int reps) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return best;
}

struct Shape4 {
  const char* name;
  int64_t B, H, T, D;
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  manual_seed(0);
  {
    NoGradGuard no_grad;
    Tensor a = Tensor::randn({1024, 1024}), b = Tensor::randn({1024, 1024});
    const double sec = best_seconds([&] { matmul(a, b); }, reps);
    std::printf("{\"bench\": \"matmul_peak\", \"impl\": \"tandem\", \"gflops\": %.2f}\n", 2.0 * 1024 * 1024 * 1024 / sec / 1e9);
  }
  const Shape4 shapes[] = {{"gpt-nano", 12, 4, 64, 32}, {"gpt2-T64", 4, 12, 64, 64}, {"gpt-char", 8, 6, 256, 64},
                           {"T1024", 1, 4, 1024, 64}};
  for (const Shape4& s : shapes) {
    Tensor q = Tensor::randn({s.B, s.H, s.T, s.D}), k = Tensor::randn({s.B, s.H, s.T, s.D}),
           v = Tensor::randn({s.B, s.H, s.T, s.D}), g = Tensor::randn({s.B, s.H, s.T, s.D});
    const double dense = double(s.B * s.H) * double(s.T * s.T) * double(s.D);
    const double fwd = median_seconds([&] {
      NoGradGuard no_grad;
      scaled_dot_product_attention(q, k, v);
    }, reps);
    const double fwd_bwd = median_seconds([&] {
      Tensor qq = q.detach().requires_grad_(true), kk = k.detach().requires_grad_(true), vv = v.detach().requires_grad_(true);
      scaled_dot_product_attention(qq, kk, vv).backward(g);
    }, reps);
    std::printf("{\"bench\": \"attention\", \"impl\": \"tandem\", \"shape\": \"%s\", \"B\": %lld, \"H\": %lld, \"T\": %lld, "
                "\"D\": %lld, \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f, \"fwd_gflops\": %.2f, \"fwd_bwd_gflops\": %.2f}\n",
                s.name, (long long)s.B, (long long)s.H, (long long)s.T, (long long)s.D, fwd * 1e3, fwd_bwd * 1e3,
                4 * dense / fwd / 1e9, 12 * dense / fwd_bwd / 1e9);
  }
  return 0;
}
