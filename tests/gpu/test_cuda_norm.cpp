// CUDA batch norm and layer norm against the CPU reference, beyond the float32 op table of
// test_cuda_backend.cpp: 2M values per channel with a large mean offset, float64,
// float16/bfloat16 inputs (against the CPU's float32 result on the same rounded inputs),
// float16 input with float32 parameters, rows of 1 to 5000 columns, more than 65535 rows,
// unaligned views and empty batches. Kernels are called through the backends directly, so
// each test needs no other CUDA family.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cuda_family_test_util.h"
#include "tensor/generator.h"

namespace tandem::testing {
namespace {

// ---------------------------------------------------------------- batch norm
struct BnOut {
  Tensor y, mean, invstd;
};

// batch_norm_train of x [outer, c, inner] on `device`; gamma/beta (may be undefined) give the
// parameter dtype (x's dtype when undefined).
BnOut bn_train(Device device, const Tensor& x, int64_t outer, int64_t c, int64_t inner, const Tensor& gamma,
               const Tensor& beta, DType param_dtype, double eps = 1e-5) {
  Tensor xd = x.to(device), gd = gamma.defined() ? gamma.to(device) : Tensor(),
         bd = beta.defined() ? beta.to(device) : Tensor();
  BnOut o{Tensor::empty(x.shape(), x.dtype(), device), Tensor::empty({c}, param_dtype, device),
          Tensor::empty({c}, param_dtype, device)};
  TensorView gv = gd.defined() ? gd.view_desc() : TensorView{}, bv = bd.defined() ? bd.view_desc() : TensorView{};
  backend_for(device).batch_norm_train(xd.view_desc(), outer, c, inner, gd.defined() ? &gv : nullptr,
                                       bd.defined() ? &bv : nullptr, eps, o.y.view_desc(), o.mean.view_desc(),
                                       o.invstd.view_desc());
  return o;
}

struct BnGrads {
  Tensor gx, ggamma, gbeta;
};
BnGrads bn_backward(Device device, const Tensor& x, const Tensor& gy, int64_t outer, int64_t c, int64_t inner,
                    const Tensor& mean, const Tensor& invstd, const Tensor& gamma) {
  Tensor xd = x.to(device), gyd = gy.to(device), md = mean.to(device), id = invstd.to(device);
  Tensor gd = gamma.defined() ? gamma.to(device) : Tensor();
  BnGrads o{Tensor::empty(x.shape(), x.dtype(), device), Tensor::empty({c}, mean.dtype(), device),
            Tensor::empty({c}, mean.dtype(), device)};
  TensorView gv = gd.defined() ? gd.view_desc() : TensorView{};
  TensorView ggv = o.ggamma.view_desc(), gbv = o.gbeta.view_desc();
  backend_for(device).batch_norm_backward(xd.view_desc(), gyd.view_desc(), outer, c, inner, md.view_desc(),
                                          id.view_desc(), gd.defined() ? &gv : nullptr, o.gx.view_desc(), &ggv, &gbv);
  return o;
}

// 2M values per channel around 1000 (x = 1000 + randn): the statistics must still be accurate
// to the float32 rounding of the exact (float64) result. Both pass-1 shapes: a large inner
// (block per channel chunk) and inner = 1 (column partials).
TEST(CudaNorm, BatchNormLargeCountAndLargeMeanOffset) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  struct Layout { int64_t outer, c, inner; };
  for (Layout l : {Layout{2, 3, int64_t(1) << 20}, Layout{int64_t(1) << 21, 3, 1}}) {
    const std::string where = "[" + std::to_string(l.outer) + ", 3, " + std::to_string(l.inner) + "]";
    Tensor x = randn_host({l.outer, l.c, l.inner}, rng, 1000.0, 1.0);
    Tensor gamma = uniform_host({l.c}, rng, 0.5, 1.5), beta = randn_host({l.c}, rng);
    BnOut g = bn_train(kGpu, x, l.outer, l.c, l.inner, gamma, beta, DType::Float32);
    BnOut ref = bn_train(Device::cpu(), x.to(DType::Float64), l.outer, l.c, l.inner, gamma.to(DType::Float64),
                         beta.to(DType::Float64), DType::Float64);
    // Two float32 ulps of the exact statistics.
    expect_close(g.mean, ref.mean, 0, 2.5e-7, "mean " + where);
    expect_close(g.invstd, ref.invstd, 0, 2.5e-7, "invstd " + where);
    // y = (x - mean) * scale + beta: the float32 mean carries up to half an ulp of 1000 (3e-5).
    expect_close(g.y, ref.y, 1e-4, 0, "y " + where);
    // The CPU's float32 statistics agree too.
    BnOut cpu32 = bn_train(Device::cpu(), x, l.outer, l.c, l.inner, gamma, beta, DType::Float32);
    expect_close(g.mean, cpu32.mean, 0, 2.5e-7, "mean vs cpu float32 " + where);
    expect_close(g.invstd, cpu32.invstd, 0, 2.5e-7, "invstd vs cpu float32 " + where);

    Tensor gy = randn_host({l.outer, l.c, l.inner}, rng);
    BnGrads gg = bn_backward(kGpu, x, gy, l.outer, l.c, l.inner, ref.mean.to(DType::Float32),
                             ref.invstd.to(DType::Float32), gamma);
    BnGrads gr = bn_backward(Device::cpu(), x, gy, l.outer, l.c, l.inner, ref.mean.to(DType::Float32),
                             ref.invstd.to(DType::Float32), gamma);
    expect_close(gg.gx, gr.gx, 1e-6 * max_abs(gr.gx), 2.5e-7, "gx " + where);
    expect_close(gg.ggamma, gr.ggamma, 1e-7 * std::sqrt(double(l.outer * l.inner)), 2.5e-7, "ggamma " + where);
    expect_close(gg.gbeta, gr.gbeta, 1e-7 * std::sqrt(double(l.outer * l.inner)), 2.5e-7, "gbeta " + where);
  }
}

// float64 tightly; float16/bfloat16 inputs against the CPU's float32 result of the rounded
// inputs; float16 input with float32 parameters and statistics (mixed precision). Layouts
// with odd inner sizes (both pass-1 shapes, unvectorized elementwise passes).
TEST(CudaNorm, BatchNormDtypes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  struct Layout { int64_t outer, c, inner; };
  for (Layout l : {Layout{4, 5, 37}, Layout{257, 6, 1}, Layout{3, 2, 64}, Layout{9, 3, 3}}) {
    const std::string where = "[" + std::to_string(l.outer) + ", " + std::to_string(l.c) + ", " +
                              std::to_string(l.inner) + "]";
    Tensor x = randn_host({l.outer, l.c, l.inner}, rng, 3.0, 2.0), gy = randn_host({l.outer, l.c, l.inner}, rng);
    Tensor gamma = uniform_host({l.c}, rng, 0.5, 1.5), beta = randn_host({l.c}, rng);
    {  // float64
      const DType f64 = DType::Float64;
      BnOut g = bn_train(kGpu, x.to(f64), l.outer, l.c, l.inner, gamma.to(f64), beta.to(f64), f64);
      BnOut r = bn_train(Device::cpu(), x.to(f64), l.outer, l.c, l.inner, gamma.to(f64), beta.to(f64), f64);
      expect_close(g.mean, r.mean, 1e-13, 1e-13, "f64 mean " + where);
      expect_close(g.invstd, r.invstd, 0, 1e-13, "f64 invstd " + where);
      expect_close(g.y, r.y, 1e-12, 1e-12, "f64 y " + where);
      BnGrads gg = bn_backward(kGpu, x.to(f64), gy.to(f64), l.outer, l.c, l.inner, r.mean, r.invstd, gamma.to(f64));
      BnGrads gr =
          bn_backward(Device::cpu(), x.to(f64), gy.to(f64), l.outer, l.c, l.inner, r.mean, r.invstd, gamma.to(f64));
      expect_close(gg.gx, gr.gx, 1e-12 * (1 + max_abs(gr.gx)), 1e-12, "f64 gx " + where);
      expect_close(gg.ggamma, gr.ggamma, 1e-11, 1e-12, "f64 ggamma " + where);
      expect_close(gg.gbeta, gr.gbeta, 1e-11, 1e-12, "f64 gbeta " + where);
    }
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      const double u = unit_roundoff(dt);
      const std::string what = std::string(dtype_name(dt)) + " " + where;
      Tensor xr = rounded_to(x, dt), gyr = rounded_to(gy, dt), gr_ = rounded_to(gamma, dt), br = rounded_to(beta, dt);
      BnOut g = bn_train(kGpu, x.to(dt), l.outer, l.c, l.inner, gamma.to(dt), beta.to(dt), dt);
      BnOut r = bn_train(Device::cpu(), xr, l.outer, l.c, l.inner, gr_, br, DType::Float32);
      expect_close(g.mean, r.mean, u, 1.01 * u, "mean " + what);  // statistics rounded once to dt
      expect_close(g.invstd, r.invstd, 0, 1.01 * u, "invstd " + what);
      // y from dt-rounded statistics: a few roundings of dt relative to |y| + |beta| ~ 3.
      expect_close(g.y, r.y, 8 * u, 4 * u, "y " + what);
      BnGrads gg = bn_backward(kGpu, x.to(dt), gy.to(dt), l.outer, l.c, l.inner, r.mean.to(dt), r.invstd.to(dt),
                               gamma.to(dt));
      BnGrads gref = bn_backward(Device::cpu(), xr, gyr, l.outer, l.c, l.inner, rounded_to(r.mean, dt),
                                 rounded_to(r.invstd, dt), gr_);
      expect_close(gg.gx, gref.gx, 2 * u * max_abs(gref.gx), 1.01 * u, "gx " + what);
      expect_close(gg.ggamma, gref.ggamma, 1e-6, 1.01 * u, "ggamma " + what);
      expect_close(gg.gbeta, gref.gbeta, 1e-6, 1.01 * u, "gbeta " + what);
    }
    {  // float16 input, float32 weight/bias/statistics
      Tensor xr = rounded_to(x, DType::Float16);
      BnOut g = bn_train(kGpu, x.to(DType::Float16), l.outer, l.c, l.inner, gamma, beta, DType::Float32);
      BnOut r = bn_train(Device::cpu(), xr, l.outer, l.c, l.inner, gamma, beta, DType::Float32);
      expect_close(g.mean, r.mean, 1e-6, 2.5e-7, "mixed mean " + where);
      expect_close(g.invstd, r.invstd, 0, 2.5e-7, "mixed invstd " + where);
      expect_close(g.y, r.y, 8 * unit_roundoff(DType::Float16), 2 * unit_roundoff(DType::Float16), "mixed y " + where);
    }
  }
}

TEST(CudaNorm, BatchNormEdgeCases) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  // No weight and bias.
  Tensor x = randn_host({5, 4, 9}, rng);
  BnOut g = bn_train(kGpu, x, 5, 4, 9, Tensor(), Tensor(), DType::Float32);
  BnOut r = bn_train(Device::cpu(), x, 5, 4, 9, Tensor(), Tensor(), DType::Float32);
  expect_close(g.y, r.y, 1e-6, 1e-6, "y without affine");
  // An empty batch: no elements per channel gives NaN statistics, as on the CPU (0 / 0).
  Tensor empty = Tensor::zeros({0, 3, 4});
  BnOut ge = bn_train(kGpu, empty, 0, 3, 4, Tensor(), Tensor(), DType::Float32);
  for (double v : host_values(ge.mean)) EXPECT_TRUE(std::isnan(v));
  for (double v : host_values(ge.invstd)) EXPECT_TRUE(std::isnan(v));
  // batch_norm_apply with given statistics (eval mode) on an unaligned view.
  Tensor big = randn_host({1 + 6 * 5 * 8}, rng);
  Tensor mean = randn_host({5}, rng), invstd = uniform_host({5}, rng, 0.5, 2.0);
  Tensor gamma = randn_host({5}, rng), beta = randn_host({5}, rng);
  Tensor bigd = big.to(kGpu);
  Tensor xv = bigd.narrow(0, 1, 6 * 5 * 8);  // data pointer 4 bytes past a 16-byte boundary
  Tensor y = Tensor::empty({6 * 5 * 8}, DType::Float32, kGpu), yc = Tensor::empty({6 * 5 * 8});
  Tensor md = mean.to(kGpu), id = invstd.to(kGpu), gd = gamma.to(kGpu), bd = beta.to(kGpu);
  TensorView gv = gd.view_desc(), bv = bd.view_desc(), gcv = gamma.view_desc(), bcv = beta.view_desc();
  gpu_backend().batch_norm_apply(xv.view_desc(), 6, 5, 8, md.view_desc(), id.view_desc(), &gv, &bv, y.view_desc());
  cpu_backend().batch_norm_apply(big.narrow(0, 1, 6 * 5 * 8).contiguous().view_desc(), 6, 5, 8, mean.view_desc(),
                                 invstd.view_desc(), &gcv, &bcv, yc.view_desc());
  expect_close(y, yc, 1e-6, 1e-6, "apply on an unaligned view");
}

// ---------------------------------------------------------------- layer norm
struct LnOut {
  Tensor y, mean, invstd, gx, ggamma, gbeta;
};

LnOut layer_norm_both(Device device, const Tensor& x, const Tensor& gy, int64_t rows, int64_t cols, const Tensor& gamma,
                      const Tensor& beta, DType param_dtype) {
  Tensor xd = x.to(device), gyd = gy.to(device), gd = gamma.to(device), bd = beta.to(device);
  LnOut o{Tensor::empty(x.shape(), x.dtype(), device),       Tensor::empty({rows}, param_dtype, device),
          Tensor::empty({rows}, param_dtype, device),        Tensor::empty(x.shape(), x.dtype(), device),
          Tensor::empty({cols}, param_dtype, device),        Tensor::empty({cols}, param_dtype, device)};
  TensorView gv = gd.view_desc(), bv = bd.view_desc(), ggv = o.ggamma.view_desc(), gbv = o.gbeta.view_desc();
  Backend& be = backend_for(device);
  be.layer_norm(xd.view_desc(), rows, cols, &gv, &bv, 1e-5, o.y.view_desc(), o.mean.view_desc(), o.invstd.view_desc());
  be.layer_norm_backward(xd.view_desc(), gyd.view_desc(), rows, cols, o.mean.view_desc(), o.invstd.view_desc(), &gv,
                         o.gx.view_desc(), &ggv, &gbv);
  return o;
}

// Rows of 1, 7, 1024 (warp per row) and 5000 (block per row) columns, 70000 rows of 7 (more
// rows than a grid dimension of 65535), forward and backward in float32 and float64.
TEST(CudaNorm, LayerNormRowLengthsFloat32AndFloat64) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  struct Size { int64_t rows, cols; };
  for (Size s : {Size{5, 1}, Size{70000, 7}, Size{33, 1024}, Size{6, 5000}}) {
    const std::string where = "[" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]";
    Tensor x = randn_host({s.rows, s.cols}, rng, 0.5, 2.0), gy = randn_host({s.rows, s.cols}, rng);
    Tensor gamma = uniform_host({s.cols}, rng, 0.5, 1.5), beta = randn_host({s.cols}, rng);
    LnOut g = layer_norm_both(kGpu, x, gy, s.rows, s.cols, gamma, beta, DType::Float32);
    LnOut r = layer_norm_both(Device::cpu(), x, gy, s.rows, s.cols, gamma, beta, DType::Float32);
    expect_close(g.mean, r.mean, 1e-7, 2.5e-7, "mean " + where);
    expect_close(g.invstd, r.invstd, 0, 2.5e-7, "invstd " + where);
    expect_close(g.y, r.y, 1e-6, 1e-6, "y " + where);
    expect_close(g.gx, r.gx, 1e-6 * (1 + max_abs(r.gx)), 1e-6, "gx " + where);
    const double col_scale = std::sqrt(double(s.rows));  // column sums of O(1) terms
    expect_close(g.ggamma, r.ggamma, 1e-6 * col_scale, 1e-6, "ggamma " + where);
    expect_close(g.gbeta, r.gbeta, 1e-6 * col_scale, 1e-6, "gbeta " + where);

    // float64 at the shorter shapes: its > 65535-row launch is the float32 one's template, and
    // 70000 x 7 in both types cost half of this test's time on emulated GPUs under the sanitizers.
    if (s.rows > 65535) continue;
    const DType f64 = DType::Float64;
    LnOut g64 = layer_norm_both(kGpu, x.to(f64), gy.to(f64), s.rows, s.cols, gamma.to(f64), beta.to(f64), f64);
    LnOut r64 = layer_norm_both(Device::cpu(), x.to(f64), gy.to(f64), s.rows, s.cols, gamma.to(f64), beta.to(f64), f64);
    expect_close(g64.y, r64.y, 1e-12, 1e-12, "f64 y " + where);
    expect_close(g64.invstd, r64.invstd, 0, 1e-13, "f64 invstd " + where);
    expect_close(g64.gx, r64.gx, 1e-12 * (1 + max_abs(r64.gx)), 1e-12, "f64 gx " + where);
    expect_close(g64.ggamma, r64.ggamma, 1e-12 * col_scale, 1e-12, "f64 ggamma " + where);
    expect_close(g64.gbeta, r64.gbeta, 1e-12 * col_scale, 1e-12, "f64 gbeta " + where);
  }
}

TEST(CudaNorm, LayerNormHalfTypesAndMixedPrecision) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  struct Size { int64_t rows, cols; };
  for (Size s : {Size{17, 7}, Size{33, 1024}, Size{5, 5000}}) {
    Tensor x = randn_host({s.rows, s.cols}, rng, 0.5, 2.0), gy = randn_host({s.rows, s.cols}, rng);
    Tensor gamma = uniform_host({s.cols}, rng, 0.5, 1.5), beta = randn_host({s.cols}, rng);
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      const double u = unit_roundoff(dt);
      const std::string what = std::string(dtype_name(dt)) + " [" + std::to_string(s.rows) + ", " +
                               std::to_string(s.cols) + "]";
      LnOut g = layer_norm_both(kGpu, x.to(dt), gy.to(dt), s.rows, s.cols, gamma.to(dt), beta.to(dt), dt);
      LnOut r = layer_norm_both(Device::cpu(), rounded_to(x, dt), rounded_to(gy, dt), s.rows, s.cols,
                                rounded_to(gamma, dt), rounded_to(beta, dt), DType::Float32);
      expect_close(g.mean, r.mean, u, 1.01 * u, "mean " + what);
      expect_close(g.invstd, r.invstd, 0, 1.01 * u, "invstd " + what);
      expect_close(g.y, r.y, 2 * u, 1.01 * u, "y " + what);  // one rounding of y (plus float32 noise)
      // gx uses the dt-rounded statistics; the CPU reference used its unrounded float32 ones.
      expect_close(g.gx, r.gx, 8 * u * (1 + max_abs(r.gx)), 2 * u, "gx " + what);
      expect_close(g.ggamma, r.ggamma, 8 * u * std::sqrt(double(s.rows)), 2 * u, "ggamma " + what);
      expect_close(g.gbeta, r.gbeta, 1e-5, 1.01 * u, "gbeta " + what);
    }
    // float16 input with float32 parameters and statistics.
    const double u = unit_roundoff(DType::Float16);
    LnOut g = layer_norm_both(kGpu, x.to(DType::Float16), gy.to(DType::Float16), s.rows, s.cols, gamma, beta,
                              DType::Float32);
    LnOut r = layer_norm_both(Device::cpu(), rounded_to(x, DType::Float16), rounded_to(gy, DType::Float16), s.rows,
                              s.cols, gamma, beta, DType::Float32);
    expect_close(g.mean, r.mean, 1e-7, 2.5e-7, "mixed mean");
    expect_close(g.invstd, r.invstd, 0, 2.5e-7, "mixed invstd");
    expect_close(g.y, r.y, 2 * u, 1.01 * u, "mixed y");
    expect_close(g.gx, r.gx, 2 * u * (1 + max_abs(r.gx)), 1.01 * u, "mixed gx");
    expect_close(g.ggamma, r.ggamma, 1e-5 * std::sqrt(double(s.rows)), 1e-6, "mixed ggamma");
    expect_close(g.gbeta, r.gbeta, 1e-5 * std::sqrt(double(s.rows)), 1e-6, "mixed gbeta");
  }
}

TEST(CudaNorm, LayerNormWithoutRowsGivesZeroParameterGradients) {
  SKIP_WITHOUT_GPU();
  Tensor x = Tensor::zeros({0, 9}, DType::Float32, kGpu), gamma = Tensor::ones({9}, DType::Float32, kGpu);
  Tensor mean = Tensor::empty({0}, DType::Float32, kGpu), invstd = Tensor::empty({0}, DType::Float32, kGpu);
  Tensor gx = Tensor::empty({0, 9}, DType::Float32, kGpu);
  Tensor gg = Tensor::empty({9}, DType::Float32, kGpu), gb = Tensor::empty({9}, DType::Float32, kGpu);
  TensorView gv = gamma.view_desc(), ggv = gg.view_desc(), gbv = gb.view_desc();
  gpu_backend().layer_norm_backward(x.view_desc(), x.view_desc(), 0, 9, mean.view_desc(), invstd.view_desc(), &gv,
                                    gx.view_desc(), &ggv, &gbv);
  for (double v : host_values(gg)) EXPECT_EQ(v, 0.0);
  for (double v : host_values(gb)) EXPECT_EQ(v, 0.0);
}

}  // namespace
}  // namespace tandem::testing
