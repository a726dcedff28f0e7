// scaled_dot_product_attention on CUDA (kernels/cuda/attention_cuda.cu) against the CPU
// reference (ctest label `gpu`; skips without a device). test_cuda_backend.cpp already runs the
// harness's attention rows (odd T and D, T = 1, a KV cache, fused qkv views, dropout) in
// float32; this file adds:
//   - sizes whose rows span several blocks and key tiles, each head-size bucket (D <= 32, 64,
//     128), causal and not, Tq < Tk, float32 and float64;
//   - float16 and bfloat16 inputs against the CPU's float32 result on the same rounded inputs,
//     output and gradients within 2e-2 (half of a unit in the 8th bit of bfloat16 is 2e-3 per
//     element; the products add up over the keys);
//   - the tensor-core kernels (attention_tensor_core.cu: bfloat16 and float16, D = 32 and 64) at
//     shapes spanning several 64-row blocks and key tiles, on contiguous inputs and on q, k, v as
//     views of one fused qkv projection (GPT's layout), within 1.5e-2 (bfloat16) and 3e-3 (float16);
//   - the dropout mask: the same seed gives the same kept set on both backends;
//   - autocast: bfloat16-mixed lowers float32 q, k, v to bfloat16 on CUDA;
//   - errors: mixed devices, a head size past 128.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "base/error.h"
#include "cuda_family_test_util.h"
#include "gpu_test_skip.h"
#include "kernels/cuda/attention_tensor_core.h"
#include "tensor/generator.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/ops.h"

namespace tandem::testing {
namespace {

Tensor random_tensor(const Shape& shape, std::mt19937& rng, DType dtype) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = nd(rng);
  return Tensor::from_vector(v, shape).to(dtype);
}

double max_error(const Tensor& got, const Tensor& want) {
  auto g = got.to(Device::cpu()).to_vector<double>(), w = want.to(Device::cpu()).to_vector<double>();
  EXPECT_EQ(g.size(), w.size());
  double worst = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    const double err = std::abs(g[i] - w[i]) / (1 + std::abs(w[i]));
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  return worst;
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
};

// Runs the op forward and backward on the CPU in float32 (or float64) and on the GPU in
// `dtype`, from the same values (rounded to `dtype` first), and returns the worst relative
// error of the output and of the three gradients.
std::pair<double, double> compare(const Case& c, DType dtype, uint32_t seed, double dropout_p = 0.0) {
  std::mt19937 rng(seed);
  const DType ref_dtype = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor q = random_tensor({c.B, c.H, c.Tq, c.D}, rng, dtype), k = random_tensor({c.B, c.H, c.Tk, c.D}, rng, dtype),
         v = random_tensor({c.B, c.H, c.Tk, c.D}, rng, dtype), g = random_tensor({c.B, c.H, c.Tq, c.D}, rng, dtype);
  std::vector<Tensor> cpu{q.to(ref_dtype), k.to(ref_dtype), v.to(ref_dtype)}, gpu{q.to(kGpu), k.to(kGpu), v.to(kGpu)};
  for (Tensor& t : cpu) t.requires_grad_(true);
  for (Tensor& t : gpu) t.requires_grad_(true);
  manual_seed(5);
  Tensor ref = scaled_dot_product_attention(cpu[0], cpu[1], cpu[2], dropout_p, c.causal);
  manual_seed(5);
  Tensor got = scaled_dot_product_attention(gpu[0], gpu[1], gpu[2], dropout_p, c.causal);
  EXPECT_EQ(got.dtype(), dtype);
  ref.backward(g.to(ref_dtype));
  got.backward(g.to(kGpu));
  double grad_error = 0;
  for (int i = 0; i < 3; ++i) grad_error = std::max(grad_error, max_error(gpu[size_t(i)].grad().to(ref_dtype), cpu[size_t(i)].grad()));
  return {max_error(got.to(ref_dtype), ref), grad_error};
}

TEST(CudaAttention, SeveralBlocksAndKeyTilesInEveryHeadSizeBucket) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{1, 2, 70, 70, 24, true}, Case{2, 1, 33, 75, 40, true}, Case{1, 1, 40, 50, 100, false},
                        Case{1, 1, 1, 65, 64, true}}) {
    const std::string what = "Tq " + std::to_string(c.Tq) + " Tk " + std::to_string(c.Tk) + " D " + std::to_string(c.D);
    auto [out32, grad32] = compare(c, DType::Float32, 1);
    EXPECT_LE(out32, 1e-5) << what;
    EXPECT_LE(grad32, 1e-4) << what;
    auto [out64, grad64] = compare(c, DType::Float64, 2);
    EXPECT_LE(out64, 1e-12) << what;
    EXPECT_LE(grad64, 1e-11) << what;
  }
}

TEST(CudaAttention, HalfInputsAccumulateInFloat) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    auto [out, grad] = compare({1, 2, 45, 45, 16, true}, dtype, 3);
    EXPECT_LE(out, 2e-2) << dtype_name(dtype);
    EXPECT_LE(grad, 2e-2) << dtype_name(dtype);
  }
}

// q, k, v of [B, H, T, D] as GPT makes them: one [B, T, 3 H D] projection, split and viewed per
// head (strides T 3HD, D, 3HD, 1). The CPU runs the same views in float32.
std::pair<double, double> compare_fused(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t C = H * D;
  Tensor qkv = random_tensor({B, T, 3 * C}, rng, dtype), g = random_tensor({B, H, T, D}, rng, dtype);
  auto heads = [&](const Tensor& fused, int part) {
    return fused.narrow(2, part * C, C).view({B, T, H, D}).transpose(1, 2);
  };
  Tensor cpu_qkv = qkv.to(DType::Float32).requires_grad_(true), gpu_qkv = qkv.to(kGpu).requires_grad_(true);
  const Tensor gq = heads(gpu_qkv, 0), gk = heads(gpu_qkv, 1), gv = heads(gpu_qkv, 2);
  const TensorView views[3] = {gq.view_desc(), gk.view_desc(), gv.view_desc()};
  EXPECT_TRUE(cuda::attention_runs_on_tensor_cores(AttentionParams{}, {&views[0], &views[1], &views[2]}))
      << "the fused views should run on tensor cores";
  Tensor ref = scaled_dot_product_attention(heads(cpu_qkv, 0), heads(cpu_qkv, 1), heads(cpu_qkv, 2), 0.0, true);
  Tensor got = scaled_dot_product_attention(gq, gk, gv, 0.0, true);
  ref.backward(g.to(DType::Float32));
  got.backward(g.to(kGpu));
  return {max_error(got.to(DType::Float32), ref), max_error(gpu_qkv.grad().to(DType::Float32), cpu_qkv.grad())};
}

TEST(CudaAttention, TensorCoresMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    // Measured in the emulation build: at most 5.7e-3 (bfloat16) and 6.8e-4 (float16).
    const double bound = dtype == DType::BFloat16 ? 1.5e-2 : 3e-3;
    for (const Case& c : {Case{1, 2, 130, 130, 64, true}, Case{2, 1, 33, 100, 32, false}, Case{1, 1, 5, 77, 64, true}}) {
      const std::string what = std::string(dtype_name(dtype)) + " Tq " + std::to_string(c.Tq) + " Tk " +
                               std::to_string(c.Tk) + " D " + std::to_string(c.D);
      auto [out, grad] = compare(c, dtype, 11);
      EXPECT_LE(out, bound) << what;
      EXPECT_LE(grad, bound) << what;
    }
    auto [out, grad] = compare_fused(2, 2, 70, 64, dtype, 12);
    EXPECT_LE(out, bound) << "fused qkv views, " << dtype_name(dtype);
    EXPECT_LE(grad, bound) << "fused qkv views, " << dtype_name(dtype);
  }
}

TEST(CudaAttention, DropoutDrawsTheCpuMask) {
  SKIP_WITHOUT_GPU();
  // Same values, same seed: outputs and gradients agree only if every kept element agrees.
  auto [out, grad] = compare({2, 2, 37, 37, 8, true}, DType::Float32, 4, 0.3);
  EXPECT_LE(out, 1e-5);
  EXPECT_LE(grad, 1e-4);
  // And the mask is not the trivial one: the dropped output differs from the undropped one.
  std::mt19937 rng(6);
  Tensor q = random_tensor({1, 1, 20, 8}, rng, DType::Float32).to(kGpu);
  EXPECT_GT(max_error(scaled_dot_product_attention(q, q, q, 0.3), scaled_dot_product_attention(q, q, q)), 1e-2);
}

TEST(CudaAttention, AutocastRunsItInBfloat16) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  Tensor q = random_tensor({1, 2, 9, 8}, rng, DType::Float32).to(kGpu).requires_grad_(true);
  Tensor out;
  {
    autocast::Guard bf16(DType::BFloat16);
    out = scaled_dot_product_attention(q, q, q);
  }
  EXPECT_EQ(out.dtype(), DType::BFloat16);
  Tensor qr = q.detach().to(DType::BFloat16).to(DType::Float32).to(Device::cpu());
  EXPECT_LE(max_error(out.to(DType::Float32), scaled_dot_product_attention(qr, qr, qr)), 1e-2);
  sum(out.to(DType::Float32)).backward();
  EXPECT_EQ(q.grad().dtype(), DType::Float32);
}

TEST(CudaAttention, BadInputsAreTypedErrors) {
  SKIP_WITHOUT_GPU();
  Tensor q = Tensor::ones({1, 1, 3, 4});
  try {
    scaled_dot_product_attention(q, q.to(kGpu), q);
    ADD_FAILURE() << "mixed devices accepted";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("different devices"), std::string::npos) << e.what();
  }
  Tensor wide = Tensor::ones({1, 1, 2, 130}, DType::Float32, kGpu);
  try {
    scaled_dot_product_attention(wide, wide, wide);
    ADD_FAILURE() << "D = 130 accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("head sizes D up to 128, got 130"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::testing
