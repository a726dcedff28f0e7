// CUDA gemm (cuBLASLt) against the CPU reference, beyond the float32 op table of
// test_cuda_backend.cpp: every transpose combination, alpha/beta, odd and degenerate shapes,
// stride-0 batch broadcasting, misaligned operands, all four float dtypes, TF32 off by default.
//
// References compute in float64 on the CPU from the same rounded inputs. GEMM errors are
// checked per element against the classic bound |err| <= tol * (|alpha| |A||B| + |beta| |C|)
// with tol = 2u(output) + 2(k+4)u(accumulator), so a TF32 product (u = 2^-11) fails the float32
// test.
#include "gpu_test_skip.h"
#include "gemm_conv_test_util.h"

#include "base/error.h"
#include "tensor/ops/ops.h"

namespace tandem::testing::gemm_conv {
namespace {

struct GemmSpec {
  DType dt;
  bool ta, tb;
  int64_t m, n, k;
  double alpha = 1, beta = 0;
  int64_t batch = 1;
  bool share_a = false, share_b = false;  // stride 0: one matrix for every batch
  int64_t offset = 0;                     // elements: misaligns every operand's pointer
  double tol = -1;                        // default gemm_tolerance(dt, k)
};

// An operand stored flat after `offset` leading elements; ref is the float64 CPU view of it.
struct FlatOperand {
  Operand o;
  void* dev_ptr;
  Tensor ref;
};
FlatOperand flat_operand(const Shape& shape, DType dt, int64_t offset, std::mt19937& rng) {
  const int64_t n = shape_numel(shape);
  Operand o = random_operand({offset + n}, dt, rng);
  void* p = static_cast<char*>(o.dev.raw_data()) + offset * int64_t(dtype_size(dt));
  return {o, p, o.ref.narrow(0, offset, n).contiguous().view(shape)};
}

void check_gemm(const GemmSpec& s, uint64_t seed) {
  std::mt19937 rng(seed);
  const int64_t ba = s.share_a ? 1 : s.batch, bb = s.share_b ? 1 : s.batch;
  FlatOperand A = flat_operand({ba, s.ta ? s.k : s.m, s.ta ? s.m : s.k}, s.dt, s.offset, rng);
  FlatOperand B = flat_operand({bb, s.tb ? s.n : s.k, s.tb ? s.k : s.n}, s.dt, s.offset, rng);
  FlatOperand C = flat_operand({s.batch, s.m, s.n}, s.dt, s.offset, rng);
  if (s.beta == 0)  // C's old values must not be read: make them NaN (0xFF bytes)
    gpu_backend().fill(TensorView{C.dev_ptr, DType::UInt8, {s.batch * s.m * s.n * int64_t(dtype_size(s.dt))}, {1}},
                       255);
  const int64_t sa = s.share_a ? 0 : s.m * s.k, sb = s.share_b ? 0 : s.k * s.n, sc = s.m * s.n;
  gpu_backend().gemm(s.dt, s.ta, s.tb, s.m, s.n, s.k, s.alpha, A.dev_ptr, sa, B.dev_ptr, sb, s.beta, C.dev_ptr, sc,
                     s.batch);
  Tensor got = C.o.dev.narrow(0, s.offset, s.batch * s.m * s.n);

  Tensor want = C.ref.clone(), bound = abs(C.ref), abs_a = abs(A.ref), abs_b = abs(B.ref);
  cpu_backend().gemm(DType::Float64, s.ta, s.tb, s.m, s.n, s.k, s.alpha, A.ref.raw_data(), sa, B.ref.raw_data(), sb,
                     s.beta, want.raw_data(), sc, s.batch);
  cpu_backend().gemm(DType::Float64, s.ta, s.tb, s.m, s.n, s.k, std::fabs(s.alpha), abs_a.raw_data(), sa,
                     abs_b.raw_data(), sb, std::fabs(s.beta), bound.raw_data(), sc, s.batch);
  const std::vector<double> g = values(got), w = values(want), b = values(bound);
  const double tol = s.tol >= 0 ? s.tol : gemm_tolerance(s.dt, s.k);
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - w[i]);
    ASSERT_TRUE(err <= tol * b[i] + 1e-300) << dtype_name(s.dt) << " ta=" << s.ta << " tb=" << s.tb << " m=" << s.m
                                            << " n=" << s.n << " k=" << s.k << " batch=" << s.batch << " alpha="
                                            << s.alpha << " beta=" << s.beta << " element " << i << ": got " << g[i]
                                            << ", want " << w[i] << " (bound " << tol * b[i] << ")";
  }
}

TEST(CudaGemm, EveryTransposeAlphaBetaAndOddShapeInEveryDtype) {
  SKIP_WITHOUT_GPU();
  const int64_t shapes[][3] = {{1, 1, 1}, {17, 33, 65}, {1, 40, 19}, {23, 1, 31}, {64, 48, 96}};
  uint64_t seed = 1;
  for (DType dt : float_dtypes())
    for (const auto& mnk : shapes)
      for (int t = 0; t < 4; ++t)
        for (auto [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{0.5, -1.25}})
          check_gemm({dt, bool(t & 1), bool(t & 2), mnk[0], mnk[1], mnk[2], alpha, beta}, seed++);
}

TEST(CudaGemm, BatchedWithStrideZeroBroadcast) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (DType dt : float_dtypes())
    for (auto [share_a, share_b] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true},
                                    std::pair{false, false}})
      for (int t = 0; t < 4; ++t) {
        GemmSpec s{dt, bool(t & 1), bool(t & 2), 7, 9, 13, 1.5, 0.75, 5};
        s.share_a = share_a;
        s.share_b = share_b;
        check_gemm(s, seed++);
      }
}

TEST(CudaGemm, MisalignedOperandPointers) {
  SKIP_WITHOUT_GPU();
  for (DType dt : float_dtypes())
    for (int64_t offset : {1, 3}) {
      GemmSpec s{dt, false, true, 33, 17, 29, 1.0, 0.5, 2};
      s.offset = offset;
      check_gemm(s, 200 + uint64_t(offset));
    }
}

TEST(CudaGemm, ManyRowsAndManySmallBatches) {
  SKIP_WITHOUT_GPU();
  check_gemm({DType::Float32, false, false, 70001, 3, 5}, 300);  // > 65535 rows
  GemmSpec many{DType::Float32, false, true, 8, 8, 8, 1.0, 0.0, 2000};
  many.share_b = true;  // one weight matrix for 2000 inputs
  check_gemm(many, 301);
  check_gemm({DType::BFloat16, true, false, 300, 200, 1000}, 302);  // long reductions in bf16
}

TEST(CudaGemm, EmptySumScalesC) {
  SKIP_WITHOUT_GPU();
  for (DType dt : float_dtypes())
    for (double beta : {0.0, -2.0}) {
      std::mt19937 rng(7);
      Operand C = random_operand({2, 3, 5}, dt, rng);
      Tensor c = beta == 0 ? Tensor::empty({2, 3, 5}, dt, gpu()) : C.dev;  // empty: poisoned
      gpu_backend().gemm(dt, false, false, 3, 5, 0, 1.0, nullptr, 0, nullptr, 0, beta, c.raw_data(), 15, 2);
      const std::vector<double> got = values(c), old = values(C.ref);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], beta * old[i]) << dtype_name(dt) << " element " << i;
    }
}

// Batches that share one output (stride_c = 0) run in order, each adding to the last one's C.
TEST(CudaGemm, SharedOutputAccumulatesBatchesInOrder) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  const int64_t m = 4, n = 6, k = 5, batch = 3;
  Operand A = random_operand({batch, m, k}, DType::Float64, rng), B = random_operand({batch, k, n}, DType::Float64, rng);
  Operand C = random_operand({m, n}, DType::Float64, rng);
  gpu_backend().gemm(DType::Float64, false, false, m, n, k, 1.0, A.dev.raw_data(), m * k, B.dev.raw_data(), k * n, 1.0,
                     C.dev.raw_data(), 0, batch);
  Tensor want = C.ref.clone();
  for (int64_t i = 0; i < batch; ++i)
    cpu_backend().gemm(DType::Float64, false, false, m, n, k, 1.0, static_cast<double*>(A.ref.raw_data()) + i * m * k,
                       0, static_cast<double*>(B.ref.raw_data()) + i * k * n, 0, 1.0, want.raw_data(), 0, 1);
  EXPECT_LE(scaled_error(values(C.dev), values(want)), 1e-13);
}

TEST(CudaGemm, Tf32IsOffByDefaultAndOptIn) {
  SKIP_WITHOUT_GPU();
  EXPECT_FALSE(allow_tf32());
  const GemmSpec exact{DType::Float32, false, true, 256, 192, 512};
  check_gemm(exact, 400);  // float32-exact bound: TF32 products would fail it
  {
    Tf32Scope tf32(true);
    GemmSpec fast = exact;
    fast.tol = std::ldexp(1.0, -9);  // TF32: 10-bit mantissa products, float accumulation
    check_gemm(fast, 401);
  }
  check_gemm(exact, 402);  // the cached plan follows the switch back
}

// matmul and linear through the op API (transposed views become GEMM flags, a 3-D x 2-D
// product folds its batch into rows), forward and backward.
TEST(CudaGemm, MatmulAndLinearThroughOps) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    std::mt19937 rng(500);
    const double tol = dt == DType::Float32 ? 1e-5 : 4 * unit_roundoff(dt);
    Operand a = random_operand({37, 53}, dt, rng), b = random_operand({53, 29}, dt, rng);
    EXPECT_LE(scaled_error(values(matmul(a.dev, b.dev)), values(matmul(a.ref, b.ref))), tol) << dtype_name(dt);
    Operand at = random_operand({53, 37}, dt, rng), bt = random_operand({29, 53}, dt, rng);
    EXPECT_LE(scaled_error(values(matmul(at.dev.t(), bt.dev.t())), values(matmul(at.ref.t(), bt.ref.t()))), tol)
        << dtype_name(dt);
    Operand x3 = random_operand({4, 6, 53}, dt, rng);
    EXPECT_LE(scaled_error(values(matmul(x3.dev, b.dev)), values(matmul(x3.ref, b.ref))), tol) << dtype_name(dt);

    Operand x = random_operand({10, 784}, dt, rng), w = random_operand({128, 784}, dt, rng);
    Operand gy = random_operand({10, 128}, dt, rng);
    Tensor xd = x.dev.requires_grad_(), wd = w.dev.requires_grad_();
    Tensor xr = x.ref.requires_grad_(), wr = w.ref.requires_grad_();
    Tensor yd = linear(xd, wd), yr = linear(xr, wr);
    EXPECT_LE(scaled_error(values(yd), values(yr)), tol) << dtype_name(dt);
    yd.backward(gy.dev);
    yr.backward(gy.ref);
    EXPECT_LE(scaled_error(values(xd.grad()), values(xr.grad())), tol) << dtype_name(dt);
    EXPECT_LE(scaled_error(values(wd.grad()), values(wr.grad())), tol) << dtype_name(dt);
  }
}


}  // namespace
}  // namespace tandem::testing::gemm_conv
