// CUDA max/avg pooling against the CPU reference (kernels/cpu/conv_pool_cpu.cpp): ties and
// NaNs (which index wins), overlapping windows (several gradients into one input), padding with
// and without count_include_pad, all float dtypes, more planes than one grid pass covers, and
// empty batches. The GPU kernels visit windows and add gradients in the CPU's order, so float32
// and float64 results are compared for exact equality; float16/bfloat16 against the CPU's
// float32 result on the same rounded inputs.
#include "gpu_test_skip.h"
#include "gemm_conv_test_util.h"

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

}  // namespace
}  // namespace tandem::testing::gemm_conv
