// CUDA conv2d (cuDNN) and max/avg pooling against the CPU reference (kernels/cpu/conv_pool_cpu.cpp),
// beyond the float32 op table of test_cuda_backend.cpp.
// conv2d: stride/padding/dilation/1x1/batch 1 in all four float dtypes, each gradient alone,
// empty batches, an input with no element (the output is the bias) and an empty output plane
// (the bias gradient is 0); errors are checked relative to the output's scale against a float64
// CPU reference on the same rounded inputs.
// Pooling: ties and NaNs (which index wins), overlapping windows (several gradients into one
// input), padding with and without count_include_pad, all float dtypes, more planes than one
// grid pass covers, and empty batches. The GPU kernels visit windows and add gradients in the
// CPU's order, so float32 and float64 results are compared for exact equality;
// float16/bfloat16 against the CPU's float32 result on the same rounded inputs.
#include "base/error.h"
#include "cuda_family_test_util.h"
#include "gemm_conv_test_util.h"
#include "gpu_test_skip.h"
#include "tensor/ops/ops.h"

namespace tandem::testing::gemm_conv {
namespace {

struct PoolCase {
  const char* name;
  int64_t N, C, H, W;
  Pool2dParams p;
};

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases{
      {"3x3 stride 2 pad 1 (overlapping)", 2, 3, 7, 9, {3, 3, 2, 2, 1, 1, true}},
      {"2x2 stride 2", 2, 3, 8, 6, {2, 2, 2, 2, 0, 0, true}},
      {"3x2 stride 1x2 pad 1x0", 1, 5, 6, 7, {3, 2, 1, 2, 1, 0, true}},
      {"3x3 stride 1 pad 1 (up to 9 windows per input)", 2, 2, 5, 5, {3, 3, 1, 1, 1, 1, true}},
      {"4x4 stride 3 pad 2", 1, 3, 11, 10, {4, 4, 3, 3, 2, 2, true}},
  };
  return cases;
}

Shape pool_out_shape(const PoolCase& c) {
  return {c.N, c.C, (c.H + 2 * c.p.pad_h - c.p.kernel_h) / c.p.stride_h + 1,
          (c.W + 2 * c.p.pad_w - c.p.kernel_w) / c.p.stride_w + 1};
}

// The CPU computes half types in float32 (they are storage-only there).
DType cpu_dtype(DType dt) { return dt == DType::Float64 ? DType::Float64 : DType::Float32; }

// Small integers (many ties in every window), with NaNs at (1,1) and (2,3) of the first plane
// (two rows of one 3x3 window: the CPU keeps the later row's NaN) and at the last element.
Tensor tied_values(const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<double> nd(0.0, 1.5);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = std::floor(nd(rng));
  const int64_t W = shape[3];
  v[size_t(1 * W + 1)] = NAN;
  v[size_t(2 * W + 3)] = NAN;
  v.back() = NAN;
  return Tensor::from_vector(v, shape);
}

void check_max_pool(const PoolCase& c, DType dt, std::mt19937& rng) {
  SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt));
  const Shape out = pool_out_shape(c);
  Operand x = operand(tied_values({c.N, c.C, c.H, c.W}, rng), dt);
  Operand gy = random_operand(out, dt, rng);
  const DType cdt = cpu_dtype(dt);
  Tensor xc = x.ref.to(cdt), gyc = gy.ref.to(cdt);

  Tensor y = Tensor::empty(out, dt, gpu()), idx = Tensor::empty(out, DType::Int64, gpu());
  gpu_backend().max_pool2d(x.dev.view_desc(), c.p, y.view_desc(), idx.view_desc());
  Tensor yc = Tensor::empty(out, cdt), idxc = Tensor::empty(out, DType::Int64);
  cpu_backend().max_pool2d(xc.view_desc(), c.p, yc.view_desc(), idxc.view_desc());
  EXPECT_EQ(first_mismatch(values(y), values(yc)), -1) << "y";  // the max of rounded values is exact
  EXPECT_EQ(idx.to_vector<int64_t>(), idxc.to_vector<int64_t>()) << "indices";

  Tensor gx = Tensor::empty(x.dev.shape(), dt, gpu()), gxc = Tensor::empty(xc.shape(), cdt);
  gpu_backend().max_pool2d_backward(gy.dev.view_desc(), idx.view_desc(), gx.view_desc());
  cpu_backend().max_pool2d_backward(gyc.view_desc(), idxc.view_desc(), gxc.view_desc());
  if (dt == cdt)
    EXPECT_EQ(first_mismatch(values(gx), values(gxc)), -1) << "gx";
  else
    EXPECT_LE(scaled_error(values(gx), values(gxc)), 4 * unit_roundoff(dt)) << "gx";
}

void check_avg_pool(const PoolCase& c, bool count_include_pad, DType dt, std::mt19937& rng) {
  SCOPED_TRACE(std::string(c.name) + (count_include_pad ? " count_include_pad " : " ") + dtype_name(dt));
  Pool2dParams p = c.p;
  p.count_include_pad = count_include_pad;
  const Shape out = pool_out_shape(c);
  Operand x = random_operand({c.N, c.C, c.H, c.W}, dt, rng), gy = random_operand(out, dt, rng);
  const DType cdt = cpu_dtype(dt);
  Tensor xc = x.ref.to(cdt), gyc = gy.ref.to(cdt);

  Tensor y = Tensor::empty(out, dt, gpu()), yc = Tensor::empty(out, cdt);
  gpu_backend().avg_pool2d(x.dev.view_desc(), p, y.view_desc());
  cpu_backend().avg_pool2d(xc.view_desc(), p, yc.view_desc());
  // Both sum in double and divide once; a half type is the float32 result rounded once more.
  EXPECT_EQ(first_mismatch(values(y), values(yc.to(dt))), -1) << "y";

  Tensor gx = Tensor::empty(x.dev.shape(), dt, gpu()), gxc = Tensor::empty(xc.shape(), cdt);
  gpu_backend().avg_pool2d_backward(gy.dev.view_desc(), p, gx.view_desc());
  cpu_backend().avg_pool2d_backward(gyc.view_desc(), p, gxc.view_desc());
  if (dt == cdt)
    EXPECT_EQ(first_mismatch(values(gx), values(gxc)), -1) << "gx";
  else  // each share is rounded to the half type before it is summed (up to 9 shares here)
    EXPECT_LE(scaled_error(values(gx), values(gxc)), 12 * unit_roundoff(dt)) << "gx";
}

TEST(CudaPool, MaxPoolTiesNansAndOverlapsMatchCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (const PoolCase& c : pool_cases())
    for (DType dt : float_dtypes()) check_max_pool(c, dt, rng);
}

TEST(CudaPool, AvgPoolWithAndWithoutPaddingCountMatchesCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (const PoolCase& c : pool_cases())
    for (bool include : {true, false})
      for (DType dt : float_dtypes()) check_avg_pool(c, include, dt, rng);
}

// 20000 planes: more than one pass of the max-pool backward grid (one warp per plane) and of
// the grid-stride loops.
TEST(CudaPool, ManyPlanes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  const PoolCase c{"2x2 stride 1 over 20000 planes", 20000, 1, 4, 4, {2, 2, 1, 1, 0, 0, true}};
  check_max_pool(c, DType::Float32, rng);
  check_avg_pool(c, true, DType::Float32, rng);
}

TEST(CudaPool, EmptyBatch) {
  SKIP_WITHOUT_GPU();
  const Pool2dParams p{3, 3, 2, 2, 1, 1, true};
  for (DType dt : float_dtypes()) {
    Tensor x = Tensor::empty({0, 2, 5, 5}, dt, gpu()), y = Tensor::empty({0, 2, 3, 3}, dt, gpu());
    Tensor idx = Tensor::empty({0, 2, 3, 3}, DType::Int64, gpu()), gx = Tensor::empty({0, 2, 5, 5}, dt, gpu());
    EXPECT_NO_THROW(gpu_backend().max_pool2d(x.view_desc(), p, y.view_desc(), idx.view_desc()));
    EXPECT_NO_THROW(gpu_backend().max_pool2d_backward(y.view_desc(), idx.view_desc(), gx.view_desc()));
    EXPECT_NO_THROW(gpu_backend().avg_pool2d(x.view_desc(), p, y.view_desc()));
    EXPECT_NO_THROW(gpu_backend().avg_pool2d_backward(y.view_desc(), p, gx.view_desc()));
    gpu_backend().synchronize(0);
  }
}

// ---------------------------------------------------------------- conv2d
#if TANDEM_WITH_CUDNN

struct ConvCase {
  const char* name;
  int64_t N, C, H, W, OC, KH, KW;
  Conv2dParams p;
  bool bias;
};

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d) { return (in + 2 * pad - d * (k - 1) - 1) / s + 1; }

// Scale-relative tolerance for a sum of `len` products in dtype dt (cuDNN's algorithms sum in
// other orders than the CPU, and Winograd/FFT variants add transform error).
double conv_tolerance(DType dt, int64_t len, bool tf32 = false) {
  if (tf32) return std::sqrt(double(len)) * std::ldexp(1.0, -9);
  switch (dt) {
    case DType::Float64: return 1e-12 + double(len) * std::ldexp(1.0, -50);
    case DType::Float32: return 1e-5 + double(len) * std::ldexp(1.0, -22);
    default: return 4 * unit_roundoff(dt) + double(len) * std::ldexp(1.0, -22);
  }
}

void check_conv(const ConvCase& cc, DType dt, uint64_t seed, bool tf32 = false) {
  SCOPED_TRACE(std::string(cc.name) + " " + dtype_name(dt) + (tf32 ? " tf32" : ""));
  std::mt19937 rng(seed);
  const int64_t OH = conv_out(cc.H, cc.KH, cc.p.stride_h, cc.p.pad_h, cc.p.dil_h);
  const int64_t OW = conv_out(cc.W, cc.KW, cc.p.stride_w, cc.p.pad_w, cc.p.dil_w);
  Operand x = random_operand({cc.N, cc.C, cc.H, cc.W}, dt, rng), w = random_operand({cc.OC, cc.C, cc.KH, cc.KW}, dt, rng);
  Operand b = random_operand({cc.OC}, dt, rng), gy = random_operand({cc.N, cc.OC, OH, OW}, dt, rng);
  struct Results { Tensor y, gx, gw, gb; };
  auto run = [&](Backend& be, const Tensor& xv, const Tensor& wv, const Tensor& bv, const Tensor& gyv) {
    const DType t = xv.dtype();
    const Device d = xv.device();
    Results r{Tensor::empty(gyv.shape(), t, d), Tensor::empty(xv.shape(), t, d), Tensor::empty(wv.shape(), t, d),
              Tensor::empty({cc.OC}, t, d)};
    TensorView bias = bv.view_desc(), vx = r.gx.view_desc(), vw = r.gw.view_desc(), vb = r.gb.view_desc();
    be.conv2d(xv.view_desc(), wv.view_desc(), cc.bias ? &bias : nullptr, cc.p, r.y.view_desc());
    be.conv2d_backward(xv.view_desc(), wv.view_desc(), gyv.view_desc(), cc.p, &vx, &vw, &vb);
    return r;
  };
  Results got, want = run(cpu_backend(), x.ref, w.ref, b.ref, gy.ref);
  {
    Tf32Scope scope(tf32);
    got = run(gpu_backend(), x.dev, w.dev, b.dev, gy.dev);
  }
  EXPECT_LE(scaled_error(values(got.y), values(want.y)), conv_tolerance(dt, cc.C * cc.KH * cc.KW, tf32)) << "y";
  EXPECT_LE(scaled_error(values(got.gx), values(want.gx)), conv_tolerance(dt, cc.OC * cc.KH * cc.KW, tf32)) << "gx";
  EXPECT_LE(scaled_error(values(got.gw), values(want.gw)), conv_tolerance(dt, cc.N * OH * OW, tf32)) << "gw";
  EXPECT_LE(scaled_error(values(got.gb), values(want.gb)), conv_tolerance(dt, cc.N * OH * OW)) << "gb";

  // Each gradient alone (the others null) gives the same values.
  Tensor gx_only = Tensor::empty(x.dev.shape(), dt, gpu()), gw_only = Tensor::empty(w.dev.shape(), dt, gpu());
  TensorView vx = gx_only.view_desc(), vw = gw_only.view_desc();
  Tf32Scope scope(tf32);
  gpu_backend().conv2d_backward(x.dev.view_desc(), w.dev.view_desc(), gy.dev.view_desc(), cc.p, &vx, nullptr, nullptr);
  gpu_backend().conv2d_backward(x.dev.view_desc(), w.dev.view_desc(), gy.dev.view_desc(), cc.p, nullptr, &vw, nullptr);
  EXPECT_EQ(first_mismatch(values(gx_only), values(got.gx)), -1) << "gx alone";
  EXPECT_EQ(first_mismatch(values(gw_only), values(got.gw)), -1) << "gw alone";
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases{
      {"3x3 pad 1", 2, 3, 9, 11, 5, 3, 3, {1, 1, 1, 1, 1, 1}, true},
      {"stride 2x1, pad 1x0, dilation 1x2", 3, 4, 12, 10, 6, 3, 2, {2, 1, 1, 0, 1, 2}, true},
      {"1x1, batch 1, odd channels", 1, 7, 5, 5, 3, 1, 1, {1, 1, 0, 0, 1, 1}, true},
      {"5x5 stride 2 pad 2, no bias", 2, 5, 16, 16, 9, 5, 5, {2, 2, 2, 2, 1, 1}, false},
      {"MNIST-like 1 -> 8 channels", 4, 1, 28, 28, 8, 5, 5, {1, 1, 2, 2, 1, 1}, true},
  };
  return cases;
}

TEST(CudaConv, MatchesCpuInEveryDtype) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 1000;
  for (const ConvCase& cc : conv_cases())
    for (DType dt : float_dtypes()) check_conv(cc, dt, seed++);
}

TEST(CudaConv, Tf32OptIn) {
  SKIP_WITHOUT_GPU();
  check_conv(conv_cases()[0], DType::Float32, 1100, /*tf32=*/true);
  check_conv(conv_cases()[0], DType::Float32, 1101);  // and float32-exact again afterwards
}

TEST(CudaConv, EmptyBatchGivesZeroWeightAndBiasGradients) {
  SKIP_WITHOUT_GPU();
  for (DType dt : float_dtypes()) {
    const Conv2dParams p{1, 1, 1, 1, 1, 1};
    Tensor x = Tensor::empty({0, 3, 6, 6}, dt, gpu()), w = Tensor::ones({4, 3, 3, 3}, dt, gpu());
    Tensor b = Tensor::ones({4}, dt, gpu()), y = Tensor::empty({0, 4, 6, 6}, dt, gpu());
    TensorView bv = b.view_desc();
    gpu_backend().conv2d(x.view_desc(), w.view_desc(), &bv, p, y.view_desc());
    Tensor gx = Tensor::empty(x.shape(), dt, gpu()), gw = Tensor::empty(w.shape(), dt, gpu());
    Tensor gb = Tensor::empty({4}, dt, gpu());  // poisoned: must be overwritten with zeros
    TensorView vx = gx.view_desc(), vw = gw.view_desc(), vb = gb.view_desc();
    gpu_backend().conv2d_backward(x.view_desc(), w.view_desc(), y.view_desc(), p, &vx, &vw, &vb);
    for (double v : values(gw)) ASSERT_EQ(v, 0.0) << dtype_name(dt);
    for (double v : values(gb)) ASSERT_EQ(v, 0.0) << dtype_name(dt);
  }
}

// The op front end with autograd on the GPU: forward and the three gradients.
TEST(CudaConv, ThroughOpsWithAutograd) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1200);
  Operand x = random_operand({3, 4, 10, 9}, DType::Float32, rng), w = random_operand({5, 4, 3, 3}, DType::Float32, rng);
  Operand b = random_operand({5}, DType::Float32, rng), gy = random_operand({3, 5, 5, 9}, DType::Float32, rng);
  Tensor xd = x.dev.requires_grad_(), wd = w.dev.requires_grad_(), bd = b.dev.requires_grad_();
  Tensor xr = x.ref.requires_grad_(), wr = w.ref.requires_grad_(), br = b.ref.requires_grad_();
  Tensor yd = conv2d(xd, wd, bd, {2, 1}, {1, 1}), yr = conv2d(xr, wr, br, {2, 1}, {1, 1});
  EXPECT_LE(scaled_error(values(yd), values(yr)), 1e-5);
  yd.backward(gy.dev);
  yr.backward(gy.ref);
  EXPECT_LE(scaled_error(values(xd.grad()), values(xr.grad())), 1e-5);
  EXPECT_LE(scaled_error(values(wd.grad()), values(wr.grad())), 1e-5);
  EXPECT_LE(scaled_error(values(bd.grad()), values(br.grad())), 1e-5);
}

#else

TEST(CudaConv, WithoutCudnnSaysHowToInstallIt) {
  SKIP_WITHOUT_GPU();
  if (TANDEM_CUDA_EMULATION) GTEST_SKIP() << "the emulation build convolves on the CPU; it has no cuDNN to miss";
  Tensor x = Tensor::ones({1, 1, 3, 3}).to(gpu()), w = Tensor::ones({1, 1, 2, 2}).to(gpu());
  try {
    conv2d(x, w);
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("install cuDNN 9 for CUDA 13"), std::string::npos) << e.what();
  }
}

#endif  // TANDEM_WITH_CUDNN

std::vector<float> host(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

TEST(CudaConv, Conv2dOfAnEmptySpatialInputIsTheBias) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  // x [2, 3, 0, 4], w [4, 3, 2, 2], padding 1: output [2, 4, 1, 5], every window in the padding.
  Tensor x = Tensor::empty({2, 3, 0, 4});
  Tensor w = randn_host({4, 3, 2, 2}, rng), b = randn_host({4}, rng);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  for (Device d : {Device::cpu(), kGpu}) {
    Tensor xd = x.to(d), wd = w.to(d), bd = b.to(d);
    Tensor y = Tensor::empty({2, 4, 1, 5}, DType::Float32, d);
    TensorView bv = bd.view_desc();
    ASSERT_NO_THROW(backend_for(d).conv2d(xd.view_desc(), wd.view_desc(), &bv, p, y.view_desc())) << d.str();
    const std::vector<float> yv = y.to(Device::cpu()).to_vector<float>(), bh = b.to_vector<float>();
    for (size_t i = 0; i < yv.size(); ++i) ASSERT_EQ(yv[i], bh[(i / 5) % 4]) << d.str() << " element " << i;
  }
}

TEST(CudaConv, ConvBiasGradientOfAnEmptyOutputPlaneIsZero) {
  SKIP_WITHOUT_GPU();
  // The backend contract allows gy [N, OC, 0, 0] (the op front end refuses such shapes first):
  // two images, three channels, no output pixel. Every channel's bias gradient is an empty sum.
  const Tensor x = Tensor::ones({2, 1, 2, 2}).to(Device::cuda(0));
  const Tensor w = Tensor::ones({3, 1, 3, 3}).to(Device::cuda(0));
  const Tensor gy = Tensor::empty({2, 3, 0, 0}, DType::Float32, Device::cuda(0));
  Tensor gb = Tensor::full({3}, 7.0f).to(Device::cuda(0));
  const TensorView gb_view = gb.view_desc();
  backend_for(Device::cuda(0))
      .conv2d_backward(x.view_desc(), w.view_desc(), gy.view_desc(), Conv2dParams{}, nullptr, nullptr, &gb_view);
  EXPECT_EQ(host(gb), (std::vector<float>{0, 0, 0}));
}

}  // namespace
}  // namespace tandem::testing::gemm_conv
