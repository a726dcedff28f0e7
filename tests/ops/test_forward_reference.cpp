// Forward values of the ops against naive reference implementations written here from the
// definitions (PyTorch's documented formulas), on random float64 inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "op_harness.h"
#include "tensor/generator.h"

namespace tandem::testing {
namespace {

using V = std::vector<double>;

V vals(const Tensor& t) { return t.to_vector<double>(); }

void expect_near_all(const V& got, const V& want, double tol = 1e-10) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
}

TEST(ForwardReference, BroadcastBinary) {
  std::mt19937 rng(5);
  Tensor a = randn64({3, 4, 5}, DType::Float64, rng), b = randn64({5}, DType::Float64, rng),
         c = randn64({4, 1}, DType::Float64, rng);
  V va = vals(a), vb = vals(b), vc = vals(c), want(60);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) {
        size_t idx = size_t((i * 4 + j) * 5 + k);
        want[idx] = (va[idx] + vb[size_t(k)]) * vc[size_t(j)] - vb[size_t(k)] / 3.0;
      }
  expect_near_all(vals((a + b) * c - b / 3.0), want);
  EXPECT_EQ(((a + b) * c).shape(), (Shape{3, 4, 5}));
}

TEST(ForwardReference, UnaryFormulas) {
  std::mt19937 rng(6);
  Tensor x = randn64({37}, DType::Float64, rng);
  V vx = vals(x);
  V e, s, th, g, gt, r;
  for (double v : vx) {
    e.push_back(std::exp(v));
    s.push_back(1 / (1 + std::exp(-v)));
    th.push_back(std::tanh(v));
    g.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    gt.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    r.push_back(v > 0 ? v : 0);
  }
  expect_near_all(vals(exp(x)), e);
  expect_near_all(vals(sigmoid(x)), s);
  expect_near_all(vals(tanh(x)), th);
  expect_near_all(vals(gelu(x)), g);
  expect_near_all(vals(gelu(x, "tanh")), gt);
  expect_near_all(vals(relu(x)), r);
  expect_near_all(vals(clamp(x, -0.1, 0.2)), [&] { V c; for (double v : vx) c.push_back(std::min(0.2, std::max(-0.1, v))); return c; }());
}

TEST(ForwardReference, MatmulBatchedBroadcast) {
  std::mt19937 rng(7);
  Tensor a = randn64({2, 1, 3, 4}, DType::Float64, rng), b = randn64({3, 4, 5}, DType::Float64, rng);
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 3, 5}));
  V va = vals(a), vb = vals(b), want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 5; ++n) {
          double s = 0;
          for (int k = 0; k < 4; ++k) s += va[size_t((i * 3 + m) * 4 + k)] * vb[size_t((j * 4 + k) * 5 + n)];
          want.push_back(s);
        }
  expect_near_all(vals(c), want);
}

TEST(ForwardReference, LinearIsXWTransposePlusBias) {
  std::mt19937 rng(8);
  Tensor x = randn64({6, 5}, DType::Float64, rng), w = randn64({3, 5}, DType::Float64, rng), b = randn64({3}, DType::Float64, rng);
  V vx = vals(x), vw = vals(w), vb = vals(b), want;
  for (int i = 0; i < 6; ++i)
    for (int o = 0; o < 3; ++o) {
      double s = vb[size_t(o)];
      for (int k = 0; k < 5; ++k) s += vx[size_t(i * 5 + k)] * vw[size_t(o * 5 + k)];
      want.push_back(s);
    }
  expect_near_all(vals(linear(x, w, b)), want);
}

TEST(ForwardReference, ReductionsOverDims) {
  std::mt19937 rng(9);
  Tensor x = randn64({3, 4, 5}, DType::Float64, rng);
  V vx = vals(x), s02(4, 0), mx1(15, -1e300), mean_all(1, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) {
        double v = vx[size_t((i * 4 + j) * 5 + k)];
        s02[size_t(j)] += v;
        mx1[size_t(i * 5 + k)] = std::max(mx1[size_t(i * 5 + k)], v);
        mean_all[0] += v / 60;
      }
  expect_near_all(vals(sum(x, {0, 2})), s02);
  expect_near_all(vals(amax(x, {1})), mx1);
  expect_near_all(vals(mean(x)), mean_all);
  EXPECT_EQ(sum(x, {0, 2}, true).shape(), (Shape{1, 4, 1}));
  // argmax keeps the first of equal values, like PyTorch.
  Tensor t = Tensor::from_vector<double>({1, 3, 3, 0, 2, 2}, {2, 3});
  EXPECT_EQ(argmax(t, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(argmin(t, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(argmax(t, 0, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
}

TEST(ForwardReference, SoftmaxAndLogSoftmax) {
  std::mt19937 rng(10);
  Tensor x = randn64({4, 6}, DType::Float64, rng) * 10.0;
  V vx = vals(x), sm, lsm;
  for (int i = 0; i < 4; ++i) {
    double m = -1e300, s = 0;
    for (int j = 0; j < 6; ++j) m = std::max(m, vx[size_t(i * 6 + j)]);
    for (int j = 0; j < 6; ++j) s += std::exp(vx[size_t(i * 6 + j)] - m);
    for (int j = 0; j < 6; ++j) {
      sm.push_back(std::exp(vx[size_t(i * 6 + j)] - m) / s);
      lsm.push_back(vx[size_t(i * 6 + j)] - m - std::log(s));
    }
  }
  expect_near_all(vals(softmax(x, 1)), sm);
  expect_near_all(vals(log_softmax(x, -1)), lsm);
  // softmax over dim 0 equals softmax of the transpose over dim 1, transposed back.
  expect_near_all(vals(softmax(x, 0)), vals(softmax(x.t(), 1).t()));
}

TEST(ForwardReference, CrossEntropyWithIgnoreAndSmoothing) {
  std::mt19937 rng(11);
  const int N = 5, C = 4;
  const double ls = 0.15;
  Tensor logits = randn64({N, C}, DType::Float64, rng);
  std::vector<int64_t> t{2, -100, 0, 3, 1};
  Tensor target = Tensor::from_vector(t, {N});
  V lp = vals(log_softmax(logits, 1));
  double total = 0, count = 0;
  V per_row;
  for (int i = 0; i < N; ++i) {
    if (t[size_t(i)] == -100) { per_row.push_back(0); continue; }
    double smooth = 0;
    for (int c = 0; c < C; ++c) smooth -= lp[size_t(i * C + c)] / C;
    double l = (1 - ls) * -lp[size_t(i * C + t[size_t(i)])] + ls * smooth;
    per_row.push_back(l);
    total += l;
    count += 1;
  }
  expect_near_all(vals(cross_entropy(logits, target, Reduction::None, -100, ls)), per_row);
  EXPECT_NEAR(cross_entropy(logits, target, Reduction::Sum, -100, ls).item(), total, 1e-12);
  EXPECT_NEAR(cross_entropy(logits, target, Reduction::Mean, -100, ls).item(), total / count, 1e-12);
  // Without smoothing, cross_entropy = nll_loss(log_softmax).
  EXPECT_NEAR(cross_entropy(logits, target).item(), nll_loss(log_softmax(logits, 1), target).item(), 1e-12);
}

TEST(ForwardReference, Conv2dDirect) {
  std::mt19937 rng(12);
  const int N = 2, C = 3, H = 7, W = 6, O = 4, KH = 3, KW = 2, sh = 2, sw = 1, ph = 1, pw = 2, dh = 1, dw = 2;
  Tensor x = randn64({N, C, H, W}, DType::Float64, rng), w = randn64({O, C, KH, KW}, DType::Float64, rng),
         b = randn64({O}, DType::Float64, rng);
  Tensor y = conv2d(x, w, b, {sh, sw}, {ph, pw}, {dh, dw});
  const int OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  ASSERT_EQ(y.shape(), (Shape{N, O, OH, OW}));
  V vx = vals(x), vw = vals(w), vb = vals(b), want;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          double s = vb[size_t(o)];
          for (int c = 0; c < C; ++c)
            for (int kh = 0; kh < KH; ++kh)
              for (int kw = 0; kw < KW; ++kw) {
                int ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += vx[size_t(((n * C + c) * H + ih) * W + iw)] * vw[size_t(((o * C + c) * KH + kh) * KW + kw)];
              }
          want.push_back(s);
        }
  expect_near_all(vals(y), want);
}

TEST(ForwardReference, Pooling) {
  std::mt19937 rng(13);
  const int H = 5, W = 6;
  Tensor x = randn64({1, 2, H, W}, DType::Float64, rng);
  V vx = vals(x);
  // max_pool2d(3, stride 2, pad 1) and avg_pool2d(3, stride 2, pad 1) both count modes.
  V mx, avg_incl, avg_excl;
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double m = -1e300, s = 0;
        int valid = 0;
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            double v = vx[size_t((c * H + ih) * W + iw)];
            m = std::max(m, v);
            s += v;
            ++valid;
          }
        // count_include_pad divides by the window clipped to the padded input.
        int h0 = oh * 2 - 1, w0 = ow * 2 - 1;
        int padded = (std::min(h0 + 3, H + 1) - h0) * (std::min(w0 + 3, W + 1) - w0);
        mx.push_back(m);
        avg_incl.push_back(s / padded);
        avg_excl.push_back(s / valid);
      }
  expect_near_all(vals(max_pool2d(x, {3}, {2}, {1})), mx);
  expect_near_all(vals(avg_pool2d(x, {3}, {2}, {1}, true)), avg_incl);
  expect_near_all(vals(avg_pool2d(x, {3}, {2}, {1}, false)), avg_excl);
}

TEST(ForwardReference, BatchNormTrainingAndRunningStats) {
  std::mt19937 rng(14);
  const int N = 4, C = 3, L = 5;
  Tensor x = randn64({N, C, L}, DType::Float64, rng) * 2.0 + 1.0;
  Tensor gamma = randn64({C}, DType::Float64, rng), beta = randn64({C}, DType::Float64, rng);
  Tensor rm = Tensor::zeros({C}, DType::Float64), rv = Tensor::ones({C}, DType::Float64);
  Tensor y = batch_norm(x, rm, rv, gamma, beta, true, 0.1, 1e-5);
  V vx = vals(x), vg = vals(gamma), vb = vals(beta), want(size_t(N * C * L)), want_rm, want_rv;
  for (int c = 0; c < C; ++c) {
    double s = 0, ss = 0;
    for (int n = 0; n < N; ++n)
      for (int l = 0; l < L; ++l) s += vx[size_t((n * C + c) * L + l)];
    double m = s / (N * L);
    for (int n = 0; n < N; ++n)
      for (int l = 0; l < L; ++l) ss += std::pow(vx[size_t((n * C + c) * L + l)] - m, 2);
    double var = ss / (N * L);
    for (int n = 0; n < N; ++n)
      for (int l = 0; l < L; ++l) {
        size_t i = size_t((n * C + c) * L + l);
        want[i] = (vx[i] - m) / std::sqrt(var + 1e-5) * vg[size_t(c)] + vb[size_t(c)];
      }
    want_rm.push_back(0.1 * m);
    want_rv.push_back(0.9 + 0.1 * ss / (N * L - 1));
  }
  expect_near_all(vals(y), want);
  expect_near_all(vals(rm), want_rm, 1e-9);
  expect_near_all(vals(rv), want_rv, 1e-9);
  // Eval mode uses the running statistics.
  Tensor ye = batch_norm(x, rm, rv, gamma, beta, false, 0.1, 1e-5);
  V rmv = vals(rm), rvv = vals(rv), ve = vals(ye);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int l = 0; l < L; ++l) {
        size_t i = size_t((n * C + c) * L + l);
        EXPECT_NEAR(ve[i], (vx[i] - rmv[size_t(c)]) / std::sqrt(rvv[size_t(c)] + 1e-5) * vg[size_t(c)] + vb[size_t(c)], 1e-10);
      }
}

TEST(ForwardReference, LayerNorm) {
  std::mt19937 rng(15);
  Tensor x = randn64({3, 7}, DType::Float64, rng), g = randn64({7}, DType::Float64, rng), b = randn64({7}, DType::Float64, rng);
  V vx = vals(x), vg = vals(g), vb = vals(b), want;
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 7; ++j) m += vx[size_t(r * 7 + j)] / 7;
    for (int j = 0; j < 7; ++j) v += std::pow(vx[size_t(r * 7 + j)] - m, 2) / 7;
    for (int j = 0; j < 7; ++j) want.push_back((vx[size_t(r * 7 + j)] - m) / std::sqrt(v + 1e-5) * vg[size_t(j)] + vb[size_t(j)]);
  }
  expect_near_all(vals(layer_norm(x, {7}, g, b)), want);
}

TEST(ForwardReference, DropoutMaskScaleAndDeterminism) {
  Tensor x = Tensor::ones({200, 100}, DType::Float64);
  manual_seed(3);
  V a = vals(dropout(x, 0.3, true));
  manual_seed(3);
  V b = vals(dropout(x, 0.3, true));
  EXPECT_EQ(a, b);  // same seed, same mask
  double kept = 0;
  for (double v : a) {
    ASSERT_TRUE(v == 0.0 || std::abs(v - 1 / 0.7) < 1e-12) << v;
    kept += v != 0;
  }
  EXPECT_NEAR(kept / a.size(), 0.7, 0.01);  // 20000 Bernoulli(0.7) draws: sd 0.0032
  V c = vals(dropout(x, 0.3, true));      // the generator advanced: a different mask
  EXPECT_NE(a, c);
  EXPECT_EQ(vals(dropout(x, 0.3, false)), vals(x));
}

TEST(ForwardReference, EmbeddingCatStackWhere) {
  Tensor w = Tensor::from_vector<double>({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor idx = Tensor::from_vector<int64_t>({2, 0, 2}, {3});
  EXPECT_EQ(vals(embedding(idx, w)), (V{20, 21, 0, 1, 20, 21}));
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}), b = Tensor::from_vector<double>({5, 6}, {2, 1});
  EXPECT_EQ(vals(cat({a, b}, 1)), (V{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(stack({a, a * 2.0}, 1).shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vals(stack({a, a * 2.0}, 1)), (V{1, 2, 2, 4, 3, 4, 6, 8}));
  Tensor mask = Tensor::from_vector<bool>({true, false}, {1, 2});
  EXPECT_EQ(vals(masked_fill(a, mask, -1)), (V{-1, 2, -1, 4}));
  EXPECT_EQ(vals(where(gt(a, Tensor::scalar(2.5, DType::Float64)), a, a * 0.0)), (V{0, 0, 3, 4}));
  EXPECT_EQ(eq(a, a.t()).to_vector<bool>(), (std::vector<bool>{true, false, false, true}));
}

}  // namespace
}  // namespace tandem::testing
