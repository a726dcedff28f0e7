// CUDA linear: Backend::linear_forward (cuBLASLt's bias epilogue, linear_cuda.cu) and
// linear_weight_grad (GEMM + reduce) against the CPU reference, beyond the float32 op table of
// test_cuda_backend.cpp: all four float dtypes with and without a bias, odd sizes (rows 1, 3,
// 257; in/out features 1, 7, 33, 300), a 3-D input, empty inputs, which path ran (the epilogue
// for regular shapes, the unfused default by shape, for an under-aligned bias and when the test
// hook turns it off), TF32 following its switch inside the fused plan, and run-to-run
// bit-identical results. Device allocations are poisoned (NaN) until written, so an element a
// path skipped fails.
//
// The reference is the float64 CPU op on the same rounded inputs; each element is checked
// against the GEMM bound |err| <= tol(k) * (|x| |w|^T + |b|) of gemm_tolerance, with k = in for
// y, out for dx, rows for dw and db.
#include "gpu_test_skip.h"
#include "gemm_conv_test_util.h"

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>

#include "tensor/ops/ops.h"
#if TANDEM_WITH_CUDA
#include "kernels/cuda/linear_epilogue.h"
#endif

namespace tandem::testing::gemm_conv {
namespace {

struct LinearCase {
  DType dt;
  Shape x_shape;  // [..., in]
  int64_t out;
  bool bias;
  double tol = -1;  // default gemm_tolerance(dt, k) per output
};

std::string describe(const LinearCase& c) {
  std::ostringstream s;
  s << dtype_name(c.dt) << " x" << shape_to_string(c.x_shape) << " out=" << c.out << (c.bias ? " bias" : " no bias");
  return s.str();
}

// Every |got - want| <= tol * bound + half the subnormal spacing of got's dtype (a result in the
// subnormal range is rounded to that absolute step, whatever its relative error); NaN, an
// unwritten element, fails.
void expect_within(const Tensor& got, const Tensor& want, const Tensor& bound, double tol, const std::string& what) {
  const std::vector<double> g = values(got), w = values(want), b = values(bound);
  const int min_exponent = got.dtype() == DType::Float16    ? -24
                           : got.dtype() == DType::BFloat16 ? -133
                           : got.dtype() == DType::Float32  ? -149
                                                            : -1074;
  const double subnormal_half_step = std::ldexp(1.0, min_exponent - 1);
  ASSERT_EQ(g.size(), w.size()) << what;
  ASSERT_EQ(b.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - w[i]);
    ASSERT_TRUE(err <= tol * b[i] + subnormal_half_step)
        << what << " element " << i << ": got " << g[i] << ", want " << w[i] << " (bound " << tol * b[i] << ")";
  }
}

struct LinearRun {
  Tensor y, dx, dw, db;
};

// linear(x, w, b) forward, then backward from gy; b may be undefined (no bias).
LinearRun run_linear(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy) {
  Tensor xg = x.detach(), wg = w.detach(), bg = b.defined() ? b.detach() : Tensor();
  xg.requires_grad_();
  wg.requires_grad_();
  if (bg.defined()) bg.requires_grad_();
  Tensor y = linear(xg, wg, bg);
  y.backward(gy);
  return {y.detach(), xg.grad(), wg.grad(), bg.defined() ? bg.grad() : Tensor()};
}

void check_linear(const LinearCase& c, uint64_t seed) {
  std::mt19937 rng(seed);
  const int64_t in = c.x_shape.back();
  const int64_t rows = shape_numel(c.x_shape) / std::max<int64_t>(in, 1);
  Shape y_shape = c.x_shape;
  y_shape.back() = c.out;
  Operand x = random_operand(c.x_shape, c.dt, rng), w = random_operand({c.out, in}, c.dt, rng);
  Operand b = random_operand({c.out}, c.dt, rng), gy = random_operand(y_shape, c.dt, rng);
  const LinearRun got = run_linear(x.dev, w.dev, c.bias ? b.dev : Tensor(), gy.dev);
  const LinearRun want = run_linear(x.ref, w.ref, c.bias ? b.ref : Tensor(), gy.ref);

  const Tensor ax = abs(x.ref).reshape({rows, in}), aw = abs(w.ref), ag = abs(gy.ref).reshape({rows, c.out});
  const auto tol = [&](int64_t k) { return c.tol >= 0 ? c.tol : gemm_tolerance(c.dt, k); };
  const std::string what = describe(c);
  expect_within(got.y, want.y, linear(ax, aw, c.bias ? abs(b.ref) : Tensor()).reshape(y_shape), tol(in), "y " + what);
  expect_within(got.dx, want.dx, matmul(ag, aw).reshape(c.x_shape), tol(c.out), "dx " + what);
  expect_within(got.dw, want.dw, matmul(ag.t(), ax), tol(rows), "dw " + what);
  if (c.bias) expect_within(got.db, want.db, sum(ag, {0}), tol(rows), "db " + what);
}

TEST(CudaLinear, MatchesCpuInEveryDtypeWithOddSizes) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (DType dt : float_dtypes())
    for (int64_t rows : {1, 3, 257})
      for (int64_t in : {1, 7, 33, 300})
        for (int64_t out : {1, 7, 33, 300})
          for (bool bias : {true, false}) {
            check_linear({dt, {rows, in}, out, bias}, seed++);
            if (HasFatalFailure()) return;
          }
}

TEST(CudaLinear, BatchedInputAndEmptyRows) {
  SKIP_WITHOUT_GPU();
  for (DType dt : float_dtypes()) {
    check_linear({dt, {4, 5, 33}, 7, true}, 600);  // [4, 5, 33] folds into 20 rows
    check_linear({dt, {0, 7}, 5, true}, 601);       // y empty; dw and db are empty sums: 0
    check_linear({dt, {2, 0, 9}, 4, false}, 602);
  }
}

#if TANDEM_WITH_CUDA
// Turns the bias epilogue off for a scope and restores the previous setting.
class BiasEpilogueOff {
 public:
  BiasEpilogueOff() : previous_(cuda::linear_bias_epilogue_enabled()) { cuda::set_linear_bias_epilogue_enabled(false); }
  ~BiasEpilogueOff() { cuda::set_linear_bias_epilogue_enabled(previous_); }
  BiasEpilogueOff(const BiasEpilogueOff&) = delete;
  BiasEpilogueOff& operator=(const BiasEpilogueOff&) = delete;

 private:
  bool previous_;
};

// Runs one case and returns how many forward calls with a bias took each path meanwhile (the
// CPU reference does not count: it is another backend).
cuda::LinearBiasPathCounts paths_taken(const LinearCase& c, uint64_t seed) {
  const cuda::LinearBiasPathCounts before = cuda::linear_bias_path_counts();
  check_linear(c, seed);
  const cuda::LinearBiasPathCounts after = cuda::linear_bias_path_counts();
  return {after.fused - before.fused, after.unfused - before.unfused};
}

TEST(CudaLinear, BiasEpilogueRunsForRegularShapes) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    const cuda::LinearBiasPathCounts n = paths_taken({dt, {256, 512}, 128, true}, 700);
    EXPECT_EQ(n.fused, 1) << "cuBLASLt's bias epilogue did not run for " << dtype_name(dt)
                          << " x [256, 512], w [128, 512]";
    EXPECT_EQ(n.unfused, 0) << dtype_name(dt);
  }
  const cuda::LinearBiasPathCounts none = paths_taken({DType::Float32, {256, 512}, 128, false}, 701);
  EXPECT_EQ(none.fused + none.unfused, 0) << "without a bias there is nothing to fuse or count";
}

TEST(CudaLinear, UnfusedPathForOneFeatureAndWhenTurnedOff) {
  SKIP_WITHOUT_GPU();
  using Features = std::pair<int64_t, int64_t>;  // in, out
  for (auto [in, out] : {Features{1, 16}, Features{16, 1}}) {  // vector-shaped: never asked of cuBLASLt
    const cuda::LinearBiasPathCounts n = paths_taken({DType::Float32, {64, in}, out, true}, 710);
    EXPECT_EQ(n.fused, 0) << "in=" << in << " out=" << out;
    EXPECT_EQ(n.unfused, 1) << "in=" << in << " out=" << out;
  }
  BiasEpilogueOff off;
  uint64_t seed = 720;
  for (DType dt : float_dtypes())
    for (int64_t rows : {1, 257})
      for (auto [in, out] : {Features{7, 33}, Features{1000, 33}, Features{33, 1000}}) {
        const cuda::LinearBiasPathCounts n = paths_taken({dt, {rows, in}, out, true}, seed++);
        if (HasFatalFailure()) return;
        EXPECT_EQ(n.fused, 0) << dtype_name(dt);
        EXPECT_EQ(n.unfused, 1) << dtype_name(dt);
      }
}

// A bias sliced at a one-element offset is not 16-byte aligned: it takes the unfused path
// (cuBLASLt kernels have been reported to fault on such a bias) and y is still x w^T + b.
TEST(CudaLinear, UnderAlignedBiasTakesTheUnfusedPath) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    std::mt19937 rng(730);
    Operand x = random_operand({64, 48}, dt, rng), w = random_operand({40, 48}, dt, rng);
    Operand b = random_operand({41}, dt, rng);
    const Tensor b_dev = b.dev.slice(0, 1, 41), b_ref = b.ref.slice(0, 1, 41);
    ASSERT_NE(reinterpret_cast<uintptr_t>(b_dev.raw_data()) % 16, 0u) << dtype_name(dt);
    const cuda::LinearBiasPathCounts before = cuda::linear_bias_path_counts();
    const Tensor y = linear(x.dev, w.dev, b_dev);
    const cuda::LinearBiasPathCounts after = cuda::linear_bias_path_counts();
    EXPECT_EQ(after.fused - before.fused, 0) << dtype_name(dt);
    EXPECT_EQ(after.unfused - before.unfused, 1) << dtype_name(dt);
    expect_within(y, linear(x.ref, w.ref, b_ref), linear(abs(x.ref), abs(w.ref), abs(b_ref)), gemm_tolerance(dt, 48),
                  std::string("y with an under-aligned bias ") + dtype_name(dt));
  }
}
#endif

// The fused plan's compute type follows allow_tf32(): float32-exact bounds (which TF32 products
// fail at k = 512) hold before and after a TF32 stretch, which needs only TF32's bound.
TEST(CudaLinear, Tf32SwitchReachesTheFusedPlan) {
  SKIP_WITHOUT_GPU();
  const LinearCase exact{DType::Float32, {192, 512}, 96, true};
  check_linear(exact, 800);
  {
    Tf32Scope tf32(true);
    LinearCase fast = exact;
    fast.tol = std::ldexp(1.0, -9);
    check_linear(fast, 801);
  }
  check_linear(exact, 802);
}

// Raw bytes of a tensor, copied to the host.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor h = t.contiguous().to(Device::cpu());
  std::vector<unsigned char> out(size_t(h.numel()) * dtype_size(h.dtype()));
  if (!out.empty()) std::memcpy(out.data(), h.raw_data(), out.size());
  return out;
}

TEST(CudaLinear, RunToRunBitIdentical) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    std::mt19937 rng(900);
    Operand x = random_operand({2048, 1024}, dt, rng), w = random_operand({512, 1024}, dt, rng);
    Operand b = random_operand({512}, dt, rng), gy = random_operand({2048, 512}, dt, rng);
    const LinearRun first = run_linear(x.dev, w.dev, b.dev, gy.dev);
    for (int run = 0; run < 3; ++run) {
      const LinearRun again = run_linear(x.dev, w.dev, b.dev, gy.dev);
      EXPECT_EQ(bytes_of(again.y), bytes_of(first.y)) << dtype_name(dt) << " y, run " << run;
      EXPECT_EQ(bytes_of(again.dx), bytes_of(first.dx)) << dtype_name(dt) << " dx, run " << run;
      EXPECT_EQ(bytes_of(again.dw), bytes_of(first.dw)) << dtype_name(dt) << " dw, run " << run;
      EXPECT_EQ(bytes_of(again.db), bytes_of(first.db)) << dtype_name(dt) << " db, run " << run;
    }
  }
}

// The Backend methods directly, where the op API cannot reach: in_features 0 (y = the bias in
// every row), the weight gradient without db, and db over zero rows.
TEST(CudaLinear, BackendMethodsOnEmptySums) {
  SKIP_WITHOUT_GPU();
  for (DType dt : float_dtypes()) {
    std::mt19937 rng(950);
    Operand b = random_operand({5}, dt, rng);
    Tensor x = Tensor::empty({3, 0}, dt, gpu()), w = Tensor::empty({5, 0}, dt, gpu());
    Tensor y = Tensor::empty({3, 5}, dt, gpu());  // poisoned
    const TensorView bias = b.dev.view_desc();
    gpu_backend().linear_forward(x.view_desc(), w.view_desc(), &bias, y.view_desc(), LinearActivation::None, nullptr);
    const std::vector<double> got = values(y), bias_values = values(b.ref);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], bias_values[i % 5]) << dtype_name(dt) << " element " << i;

    Operand g = random_operand({9, 5}, dt, rng), xs = random_operand({9, 7}, dt, rng);
    Tensor dw = Tensor::empty({5, 7}, dt, gpu()), dw_ref = Tensor::empty({5, 7}, DType::Float64);
    gpu_backend().linear_weight_grad(g.dev.view_desc(), xs.dev.view_desc(), dw.view_desc(), nullptr);
    cpu_backend().linear_weight_grad(g.ref.view_desc(), xs.ref.view_desc(), dw_ref.view_desc(), nullptr);
    expect_within(dw, dw_ref, matmul(abs(g.ref).t(), abs(xs.ref)), gemm_tolerance(dt, 9),
                  std::string("dw without db ") + dtype_name(dt));

    Tensor g0 = Tensor::empty({0, 5}, dt, gpu()), x0 = Tensor::empty({0, 7}, dt, gpu());
    Tensor dw0 = Tensor::empty({5, 7}, dt, gpu()), db0 = Tensor::empty({5}, dt, gpu());  // poisoned
    const TensorView db0_view = db0.view_desc();
    gpu_backend().linear_weight_grad(g0.view_desc(), x0.view_desc(), dw0.view_desc(), &db0_view);
    for (double v : values(dw0)) ASSERT_EQ(v, 0.0) << dtype_name(dt) << " dw over zero rows";
    for (double v : values(db0)) ASSERT_EQ(v, 0.0) << dtype_name(dt) << " db over zero rows";
  }
}

}  // namespace
}  // namespace tandem::testing::gemm_conv
