// GEMM throughput on one GPU: Tandem through the op API (matmul / linear) and through
// Backend::gemm, against cuBLAS called directly (cublasGemmStridedBatchedEx) with the same
// settings: same compute type (float32 without TF32 unless TANDEM_ALLOW_TF32=1, float
// accumulation for half types with no reduced-precision reductions), same 32 MiB workspace,
// same stream. All three run in this process on the compute stream and are timed with CUDA
// events; each result is the best of 5 groups of `reps` calls (per-call mean).
// Run: bench/run_gemm_cuda.sh [reps]. Prints one JSON line per measurement; the goal is
// Tandem (backend) >= 0.95 x cuBLAS.
//
// The op-API numbers include allocating each output tensor; they track the caching allocator.
//
// For the linear problems it also times linear(x, w, b) with a bias both ways: the bias added
// by cuBLASLt's epilogue (the default) and the unfused path (bias copy, then GEMM with
// beta = 1), forced through the test hook of kernels/cuda/linear_epilogue.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cuda_timing.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/linear_epilogue.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cublasGetStatusString(s));
    std::exit(1);
  }
}

using bench::check;
using bench::time_ms;

struct Problem {
  const char* what;
  int64_t batch, m, n, k;
  bool trans_b;  // B stored [n,k] (a linear layer's weight)
  bool share_b;  // one B for every batch (stride 0)
};

cudaDataType cuda_type(DType dt) {
  return dt == DType::Float32 ? CUDA_R_32F : dt == DType::Float16 ? CUDA_R_16F : CUDA_R_16BF;
}

Tensor random_on_gpu(const Shape& shape, DType dt) { return Tensor::randn(shape).to(dt).to(Device::cuda(0)); }

void run(const Problem& pr, DType dt, int reps, cublasHandle_t h) {
  const Device gpu = Device::cuda(0);
  const int64_t bb = pr.share_b ? 1 : pr.batch;
  Tensor a = random_on_gpu(pr.batch > 1 ? Shape{pr.batch, pr.m, pr.k} : Shape{pr.m, pr.k}, dt);
  Shape b_shape = pr.trans_b ? Shape{pr.n, pr.k} : Shape{pr.k, pr.n};
  if (bb > 1) b_shape.insert(b_shape.begin(), bb);
  Tensor b = random_on_gpu(b_shape, dt);
  Tensor c = Tensor::empty({pr.batch, pr.m, pr.n}, dt, gpu);
  const int64_t sa = pr.m * pr.k, sb = pr.share_b ? 0 : pr.k * pr.n, sc = pr.m * pr.n;
  const double flops = 2.0 * double(pr.batch) * double(pr.m) * double(pr.n) * double(pr.k);

  // Tandem through the op API: linear for x W^T, matmul otherwise (a shared B folds the batch
  // into rows: one large GEMM).
  const double ops_ms = time_ms([&] { pr.trans_b ? linear(a, b) : matmul(a, b); }, reps);
  // Tandem's Backend::gemm: the same strided-batched problem cuBLAS gets below.
  Backend& be = cuda_backend();
  const double be_ms = time_ms([&] {
    be.gemm(dt, false, pr.trans_b, pr.m, pr.n, pr.k, 1.0, a.raw_data(), sa, b.raw_data(), sb, 0.0, c.raw_data(), sc,
            pr.batch);
  }, reps);
  // cuBLAS directly, row-major as column-major C^T = B^T A^T.
  const float one = 1.f, zero = 0.f;
  const cublasComputeType_t compute =
      dt == DType::Float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const double direct_ms = time_ms([&] {
    check(cublasGemmStridedBatchedEx(h, pr.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(pr.n), int(pr.m),
                                     int(pr.k), &one, b.raw_data(), cuda_type(dt), int(pr.trans_b ? pr.k : pr.n), sb,
                                     a.raw_data(), cuda_type(dt), int(pr.k), sa, &zero, c.raw_data(), cuda_type(dt),
                                     int(pr.n), sc, int(pr.batch), compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  }, reps);
  for (auto [impl, ms] : {std::pair{"tandem_ops", ops_ms}, std::pair{"tandem_backend", be_ms},
                          std::pair{"cublas", direct_ms}})
    std::printf("{\"bench\": \"gemm_cuda\", \"problem\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, \"M\": %lld, "
                "\"N\": %lld, \"K\": %lld, \"impl\": \"%s\", \"ms\": %.4f, \"tflops\": %.2f, \"vs_cublas\": %.3f}\n",
                pr.what, dtype_name(dt), (long long)pr.batch, (long long)pr.m, (long long)pr.n, (long long)pr.k, impl,
                ms, flops / (ms * 1e-3) / 1e12, direct_ms / ms);
  if (pr.trans_b && pr.batch == 1) {  // linear with a bias: fused epilogue vs unfused
    Tensor bias = random_on_gpu({pr.n}, dt);
    const int64_t fused_before = cuda::linear_bias_path_counts().fused;
    const double fused_ms = time_ms([&] { linear(a, b, bias); }, reps);
    // The epilogue may fall back (no cuBLASLt algorithm): then both rows time the unfused path.
    const bool fused_ran = cuda::linear_bias_path_counts().fused > fused_before;
    cuda::set_linear_bias_epilogue_enabled(false);
    const double unfused_ms = time_ms([&] { linear(a, b, bias); }, reps);
    cuda::set_linear_bias_epilogue_enabled(true);
    for (auto [impl, ms] : {std::pair{fused_ran ? "bias_epilogue" : "bias_epilogue_fell_back", fused_ms},
                            std::pair{"bias_copy_then_gemm", unfused_ms}})
      std::printf("{\"bench\": \"linear_bias_cuda\", \"problem\": \"%s\", \"dtype\": \"%s\", \"M\": %lld, "
                  "\"N\": %lld, \"K\": %lld, \"impl\": \"%s\", \"ms\": %.4f, \"speedup_vs_unfused\": %.3f}\n",
                  pr.what, dtype_name(dt), (long long)pr.m, (long long)pr.n, (long long)pr.k, impl, ms,
                  unfused_ms / ms);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::visible_device_count() == 0) {
    std::fprintf(stderr, "bench_gemm_cuda: no CUDA device (%s)\n", cuda::device_count_note().c_str());
    return 1;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const char* tf32 = std::getenv("TANDEM_ALLOW_TF32");
  set_allow_tf32(tf32 && std::string(tf32) == "1");
  manual_seed(0);
  NoGradGuard no_grad;

  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  check(cublasSetStream(h, cuda::current_stream()), "cublasSetStream");
  const size_t workspace_bytes = size_t(32) << 20;  // what Tandem's gemm gives cuBLASLt
  void* workspace = cuda_backend().allocate(workspace_bytes, 0);
  check(cublasSetWorkspace(h, workspace, workspace_bytes), "cublasSetWorkspace");
  check(cublasSetMathMode(h, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode");

  const Problem problems[] = {
      {"MLP fc1 forward x[256,784] W[1024,784]^T", 1, 256, 1024, 784, true, false},
      {"MLP fc2 forward x[1024,1024] W[1024,1024]^T", 1, 1024, 1024, 1024, true, false},
      {"square 1024", 1, 1024, 1024, 1024, false, false},
      {"square 4096", 1, 4096, 4096, 4096, false, false},
      {"CNN conv-as-GEMM [256*196, 800] x [800, 64]", 1, 50176, 64, 800, false, false},
      {"batched 1024 x [64,64]x[64,64]", 1024, 64, 64, 64, false, false},
      {"batched 1024 x [32,256] shared W [256,256]", 1024, 32, 256, 256, false, true},
  };
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16})
    for (const Problem& pr : problems) run(pr, dt, reps, h);

  cublasDestroy(h);
  cuda_backend().deallocate(workspace, workspace_bytes, 0);
  return 0;
}
