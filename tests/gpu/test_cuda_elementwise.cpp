// CUDA unary ops (forward and backward) and where against the CPU reference, for what the
// op-table comparison in test_cuda_backend.cpp (float32, small shapes) does not reach:
//   - float16/bfloat16: the GPU computes in float and rounds once, so its result is within a
//     rounding of the CPU's float32 result on the same (rounded) inputs: |got - ref| <=
//     2 u |ref| + 1e-5 (1 + |x|), u = 2^-11 (float16) or 2^-8 (bfloat16); the absolute term
//     covers float32-level differences where the math cancels (gelu's negative tail);
//   - float64 with a tight tolerance; float32 at odd sizes (1 .. 2^20 + 3) and misaligned views
//     (float64 and the half types reach 2^20 elements in every third op: the launch plan
//     follows the dtype and layout, not the op);
//   - NaN and signed-zero behaviour of relu, clamp, abs and their gradients, bit for bit;
//   - empty tensors.
// Binary ops and where are in test_cuda_elementwise_binary.cpp, casts and copies in
// test_cuda_elementwise_copy.cpp.
#include <limits>

#include "gpu_test_skip.h"
#include "elementwise_test_util.h"
#include "kernels/backend.h"

namespace tandem::testing::elementwise {
namespace {

struct UnaryCase {
  const char* name;
  UnaryOp op;
  UnaryParams params;
  bool positive;  // inputs in [0.5, 2) (log, sqrt, pow, reciprocal)
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<UnaryCase> unary_cases() {
  UnaryParams none, pw, cl, af, rc;
  pw.scalar = 2.5;
  cl.lo = -0.5;
  cl.hi = 0.7;
  af.alpha = 1.5;
  af.beta = -0.25;
  rc.alpha = 2.0;
  return {
      {"neg", UnaryOp::Neg, none, false, [](const Tensor& x) { return neg(x); }},
      {"exp", UnaryOp::Exp, none, false, [](const Tensor& x) { return exp(x); }},
      {"log", UnaryOp::Log, none, true, [](const Tensor& x) { return log(x); }},
      {"sqrt", UnaryOp::Sqrt, none, true, [](const Tensor& x) { return sqrt(x); }},
      {"abs", UnaryOp::Abs, none, false, [](const Tensor& x) { return abs(x); }},
      {"relu", UnaryOp::Relu, none, false, [](const Tensor& x) { return relu(x); }},
      {"sigmoid", UnaryOp::Sigmoid, none, false, [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", UnaryOp::Tanh, none, false, [](const Tensor& x) { return tanh(x); }},
      {"gelu", UnaryOp::Gelu, none, false, [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", UnaryOp::GeluTanh, none, false, [](const Tensor& x) { return gelu(x, "tanh"); }},
      {"pow", UnaryOp::Pow, pw, true, [](const Tensor& x) { return pow(x, 2.5); }},
      {"clamp", UnaryOp::Clamp, cl, false, [](const Tensor& x) { return clamp(x, -0.5, 0.7); }},
      {"affine", UnaryOp::Affine, af, false, [](const Tensor& x) { return affine(x, 1.5, -0.25); }},
      {"reciprocal", UnaryOp::Reciprocal, rc, true, [](const Tensor& x) { return 2.0 / x; }},
  };
}

struct Tolerance {
  double rel, abs;
};
Tolerance tolerance_for(DType dt) {
  switch (dt) {
    case DType::Float16: return {2 * 0x1p-11, 1e-5};
    case DType::BFloat16: return {2 * 0x1p-8, 1e-5};
    case DType::Float32: return {4e-6, 1e-6};
    default: return {1e-12, 1e-13};
  }
}

// Checks got (any float dtype, either device) against ref (the CPU result in the compute type)
// elementwise: NaN where ref is NaN, the rounded value where ref rounds to an infinity in got's
// dtype, else within the dtype's tolerance; x scales the absolute term.
void expect_close(const Tensor& got, const Tensor& ref, const Tensor& x, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const Tolerance tol = tolerance_for(got.dtype());
  const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>(),
                            rr = ref.to(Device::cpu()).to(got.dtype()).to_vector<double>(), xv = x.to_vector<double>();
  int reported = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(r[i])) {
      ok = std::isnan(g[i]);
    } else if (std::isinf(rr[i])) {
      ok = g[i] == rr[i];
    } else {
      ok = std::fabs(g[i] - r[i]) <= tol.rel * std::fabs(r[i]) + tol.abs * (1 + std::fabs(xv[i]));
    }
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " x=" << xv[i] << " got " << g[i] << ", reference " << r[i];
    bad += !ok;
  }
  EXPECT_EQ(bad, 0) << what;
}

// The type the CPU reference computes in for a dtype under test.
DType compute_type(DType dt) { return dt == DType::Float64 ? DType::Float64 : DType::Float32; }

// Forward through the public op and backward through the backend (so the reference sees the
// very y the GPU's backward reads), on x laid out as given, against the CPU in the compute type.
void check_unary(const UnaryCase& c, DType dt, const Tensor& values, Layout layout, std::mt19937& rng) {
  const std::string what = std::string(c.name) + " " + dtype_name(dt) + " " + values.shape_str() + " " +
                           layout_name(layout);
  const DType ct = compute_type(dt);
  const LaidOut x = lay_out(values.to(dt), layout, gpu());
  const Tensor y = c.fn(x.dev);
  ASSERT_EQ(y.dtype(), dt) << what;
  const Tensor x_ref = x.cpu.to(ct);
  expect_close(y, c.fn(x_ref), x_ref, what + " forward");

  const Tensor gy = random_values(values.shape(), rng, false, 1.0).to(dt).to(gpu());
  const Tensor xc = x.dev.contiguous();
  Tensor gx = Tensor::empty(values.shape(), dt, gpu());
  backend_for(gpu()).unary_backward(c.op, xc.view_desc(), y.view_desc(), gy.view_desc(), gx.view_desc(), c.params);
  const Tensor xr = xc.to(Device::cpu()).to(ct), yr = y.to(Device::cpu()).to(ct), gr = gy.to(Device::cpu()).to(ct);
  Tensor gx_ref = Tensor::empty(values.shape(), ct);
  backend_for(Device::cpu()).unary_backward(c.op, xr.view_desc(), yr.view_desc(), gr.view_desc(), gx_ref.view_desc(),
                                            c.params);
  expect_close(gx, gx_ref, xr, what + " backward");
}

// The launch plan of a map depends on the dtype and the layout, not on the op, so every third
// case also runs at 2^20 elements (in each dtype; the small odd sizes run for every case).
bool is_large_size_case(size_t case_index) { return case_index % 3 == 0; }

TEST(CudaElementwiseUnary, HalfTypesAreWithinOneRoundingOfFloat32) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  for (const UnaryCase& c : unary_cases())
    for (DType dt : {DType::Float16, DType::BFloat16})
      for (int64_t n : {1, 3, 7, 8, 9, 31, 1000, 1025}) check_unary(c, dt, random_values({n}, rng, c.positive), Layout::Contiguous, rng);
  const std::vector<UnaryCase> cases = unary_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      const UnaryCase& c = cases[i];
      if (is_large_size_case(i)) check_unary(c, dt, random_values({(1 << 20) + 3}, rng, c.positive), Layout::Contiguous, rng);
      check_unary(c, dt, random_values({37, 61}, rng, c.positive), Layout::Misaligned, rng);
    }
}

TEST(CudaElementwiseUnary, Float64IsTight) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  const std::vector<UnaryCase> cases = unary_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const UnaryCase& c = cases[i];
    for (int64_t n : {1, 2, 3, 5, 1001}) check_unary(c, DType::Float64, random_values({n}, rng, c.positive), Layout::Contiguous, rng);
    if (is_large_size_case(i)) check_unary(c, DType::Float64, random_values({(1 << 20) + 1}, rng, c.positive), Layout::Contiguous, rng);
  }
}

TEST(CudaElementwiseUnary, Float32OddSizesAndMisalignedViews) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  const std::vector<UnaryCase> cases = unary_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const UnaryCase& c = cases[i];
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 9, 17, 255, 1000})
      check_unary(c, DType::Float32, random_values({n}, rng, c.positive), Layout::Contiguous, rng);
    for (int64_t n : {5, 1000})
      check_unary(c, DType::Float32, random_values({n}, rng, c.positive), Layout::Misaligned, rng);
    if (!is_large_size_case(i)) continue;
    for (Layout layout : {Layout::Contiguous, Layout::Misaligned})
      check_unary(c, DType::Float32, random_values({(1 << 20) + 3}, rng, c.positive), layout, rng);
  }
}

// Equal as bits, except that any two NaNs are equal.
void expect_same_values(const Tensor& got, const Tensor& ref, const std::string& what) {
  const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  ASSERT_EQ(g.size(), r.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(r[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " element " << i;
    } else {
      EXPECT_EQ(g[i], r[i]) << what << " element " << i;
      EXPECT_EQ(std::signbit(g[i]), std::signbit(r[i])) << what << " sign of element " << i;
    }
  }
}

TEST(CudaElementwiseUnary, NanAndSignedZeroFollowTheCpu) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 20 values, so both the vector path and the tail see the special ones.
  std::vector<float> v = {nan, -0.0f, 0.0f, -1.0f, 2.0f, -nan, 0.7f, -0.5f, 0.3f, -0.6f,
                          0.8f, nan, -0.0f, 0.0f, -2.0f, 1e-3f, -nan, 0.5f, -0.0f, nan};
  const Tensor x32 = Tensor::from_vector(v, {int64_t(v.size())});
  std::vector<float> g = v;
  for (size_t i = 0; i < g.size(); ++i) g[i] = i % 2 ? -1.0f : 1.0f;
  const Tensor g32 = Tensor::from_vector(g, {int64_t(g.size())});
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const DType ct = compute_type(dt);
    // The reference sees the values rounded to dt, as the GPU does.
    const Tensor xd = x32.to(dt).to(gpu()), gd = g32.to(dt).to(gpu());
    const Tensor xr = x32.to(dt).to(ct), gr = g32.to(dt).to(ct);
    for (const UnaryCase& c : unary_cases()) {
      if (c.op != UnaryOp::Relu && c.op != UnaryOp::Clamp && c.op != UnaryOp::Abs && c.op != UnaryOp::Neg) continue;
      const std::string what = std::string(c.name) + " " + dtype_name(dt);
      const Tensor y = c.fn(xd), y_ref = c.fn(xr);
      expect_same_values(y, y_ref.to(dt), what);
      Tensor gx = Tensor::empty(xd.shape(), dt, gpu()), gx_ref = Tensor::empty(xr.shape(), ct);
      backend_for(gpu()).unary_backward(c.op, xd.view_desc(), y.view_desc(), gd.view_desc(), gx.view_desc(), c.params);
      backend_for(Device::cpu()).unary_backward(c.op, xr.view_desc(), y_ref.view_desc(), gr.view_desc(),
                                                gx_ref.view_desc(), c.params);
      expect_same_values(gx, gx_ref.to(dt), what + " backward");
    }
  }
}

TEST(CudaElementwiseUnary, IntegerInputsAreRefused) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(relu(Tensor::ones({4}, DType::Int32, gpu())), DTypeError);
  Tensor xi = Tensor::ones({4}, DType::Int64, gpu()), out = Tensor::empty({4}, DType::Int64, gpu());
  EXPECT_THROW(backend_for(gpu()).unary(UnaryOp::Exp, xi.view_desc(), out.view_desc(), UnaryParams{}), DTypeError);
}

TEST(CudaElementwise, EmptyTensorsLaunchNothing) {
  SKIP_WITHOUT_GPU();
  for (Shape shape : {Shape{0}, Shape{3, 0}, Shape{0, 4}}) {
    const Tensor x = Tensor::zeros(shape, DType::Float32, gpu()), h = Tensor::zeros(shape, DType::BFloat16, gpu());
    EXPECT_EQ(relu(x).shape(), shape);
    EXPECT_EQ(gelu(h).shape(), shape);
    EXPECT_EQ(add(x, x).shape(), shape);
    EXPECT_EQ(add(x, Tensor::ones({1}, DType::Float32, gpu())).shape(), shape);
    EXPECT_EQ(lt(h, h).dtype(), DType::Bool);
    EXPECT_EQ(where(lt(x, x), x, x).shape(), shape);
    Tensor gx = Tensor::empty(shape, DType::Float32, gpu());
    backend_for(gpu()).unary_backward(UnaryOp::Tanh, x.view_desc(), x.view_desc(), x.view_desc(), gx.view_desc(),
                                      UnaryParams{});
    EXPECT_EQ(bytes_of(gx).size(), 0u);
  }
}

}  // namespace
}  // namespace tandem::testing::elementwise
