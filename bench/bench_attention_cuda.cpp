// Causal attention on one GPU: Tandem's flash-attention-style kernels (kernels/cuda/
// attention_cuda.cu) forward and forward + backward, bfloat16, at GPT-2's head shape (B = 8,
// H = 12, D = 64) and T = 256 .. 4096, timed with CUDA events on the compute stream (best of 5
// groups of `reps` calls, per-call mean, after a warm-up call). The PyTorch twin is
// bench/peers/attention_cuda_torch.py (torch.nn.functional.scaled_dot_product_attention);
// bench/run_attention_cuda.sh runs both and prints the ratio. Goal: >= 0.9x PyTorch.
// Flops: 4 B H T^2 D forward, 12 B H T^2 D forward + backward, halved for the causal mask
// (the count FlashAttention's papers use).
//   bench_attention_cuda [reps]      the GPU table
//   bench_attention_cuda --tiny      B = 1, H = 2, T = 40 and 70, D = 16, 1 rep: that the bench
//                                    runs (ctest on emulated GPUs: bench_attention_cuda_tiny)
// Exit 77 without a visible device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cuda_timing.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_query.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

using bench::time_ms;

void run(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype, int reps) {
  const Device gpu = Device::cuda(0);
  auto make = [&] { return Tensor::randn({B, H, T, D}).to(dtype).to(gpu); };
  Tensor q = make(), k = make(), v = make(), g = make();
  const double fwd = time_ms([&] {
    NoGradGuard no_grad;
    scaled_dot_product_attention(q, k, v);
  }, reps);
  const double fwd_bwd = time_ms([&] {
    Tensor qq = q.detach().requires_grad_(true), kk = k.detach().requires_grad_(true), vv = v.detach().requires_grad_(true);
    scaled_dot_product_attention(qq, kk, vv).backward(g);
  }, reps);
  const double causal_flops = 2.0 * double(B * H) * double(T * T) * double(D);  // 4 B H T^2 D / 2
  std::printf("{\"bench\": \"attention_cuda\", \"impl\": \"tandem\", \"dtype\": \"%s\", \"B\": %lld, \"H\": %lld, "
              "\"T\": %lld, \"D\": %lld, \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f, \"fwd_tflops\": %.3f, "
              "\"fwd_bwd_tflops\": %.3f}\n",
              dtype_name(dtype), (long long)B, (long long)H, (long long)T, (long long)D, fwd, fwd_bwd,
              causal_flops / fwd / 1e9, 3 * causal_flops / fwd_bwd / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const bool tiny = argc > 1 && std::string(argv[1]) == "--tiny";
  const int reps = tiny ? 1 : (argc > 1 ? std::atoi(argv[1]) : 10);
  if (cuda::visible_device_count() == 0) {
    std::fprintf(stderr, "no CUDA device: %s\n", cuda::device_count_note().c_str());
    return 77;
  }
  manual_seed(0);
  if (tiny) {
    for (int64_t T : {40, 70}) run(1, 2, T, 16, DType::BFloat16, reps);
    return 0;
  }
  for (int64_t T : {256, 512, 1024, 2048, 4096}) run(8, 12, T, 64, DType::BFloat16, reps);
  return 0;
}
