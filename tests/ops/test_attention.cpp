// scaled_dot_product_attention beyond the op harness's small shapes: forward and gradients at
// sizes that span several of the CPU kernel's 64-row tiles against the composed reference
// (matmul, mask, softmax, matmul) in float64, the dropout mask against its Philox rule, thread
// count independence, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/philox.h"
#include "kernels/cpu/thread_pool.h"
#include "op_harness.h"
#include "tensor/generator.h"
#include "tensor/ops/autocast.h"

namespace tandem::testing {
namespace {

// softmax(q k^T / sqrt(D) + mask) v with the bottom-right aligned causal mask, from ops.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const int64_t tq = q.size(2), tk = k.size(2);
  Tensor scores = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(q.size(3))));
  if (causal) {
    std::vector<double> hidden(size_t(tq * tk));
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j) hidden[size_t(i * tk + j)] = j > i + (tk - tq) ? 1.0 : 0.0;
    const Tensor mask = gt(Tensor::from_vector(hidden, {tq, tk}), Tensor::zeros({}, DType::Float64));
    scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  }
  return matmul(softmax(scores, -1), v);
}

struct Sizes {
  int64_t B, H, Tq, Tk, D;
  bool causal;
};

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - w[i]) / (1 + std::abs(w[i]));
    if (!(err <= worst)) worst = err, at = i;
  }
  EXPECT_LE(worst, tol) << what << " element " << at << ": " << g[at] << " vs " << w[at];
}

TEST(Attention, ForwardAndGradientsMatchTheComposedReferenceAcrossTiles) {
  // Tq, Tk past one and two 64-row tiles, odd D, a KV-cache-like Tq < Tk, and no mask.
  for (const Sizes& s : {Sizes{1, 2, 130, 130, 7, true}, Sizes{2, 1, 67, 150, 5, true},
                         Sizes{1, 1, 3, 129, 16, true}, Sizes{1, 2, 70, 90, 3, false}}) {
    std::mt19937 rng(uint32_t(s.Tq * 31 + s.Tk));
    Tensor q = randn64({s.B, s.H, s.Tq, s.D}, DType::Float64, rng).requires_grad_(true);
    Tensor k = randn64({s.B, s.H, s.Tk, s.D}, DType::Float64, rng).requires_grad_(true);
    Tensor v = randn64({s.B, s.H, s.Tk, s.D}, DType::Float64, rng).requires_grad_(true);
    Tensor gout = randn64({s.B, s.H, s.Tq, s.D}, DType::Float64, rng);
    const std::string what = "Tq " + std::to_string(s.Tq) + " Tk " + std::to_string(s.Tk);
    Tensor q2 = q.detach().requires_grad_(true), k2 = k.detach().requires_grad_(true),
           v2 = v.detach().requires_grad_(true);
    Tensor out = scaled_dot_product_attention(q, k, v, 0.0, s.causal);
    out.backward(gout);
    Tensor want = composed_attention(q2, k2, v2, s.causal);
    want.backward(gout);
    expect_close(out, want, 1e-12, what + " output");
    expect_close(q.grad(), q2.grad(), 1e-11, what + " dq");
    expect_close(k.grad(), k2.grad(), 1e-11, what + " dk");
    expect_close(v.grad(), v2.grad(), 1e-11, what + " dv");
  }
}

TEST(Attention, OneQueryAfterACacheAttendsToEveryKey) {
  // Causal with Tq = 1: the mask is aligned bottom-right, so the one query sees all Tk keys.
  std::mt19937 rng(8);
  Tensor q = randn64({1, 2, 1, 4}, DType::Float64, rng), k = randn64({1, 2, 9, 4}, DType::Float64, rng),
         v = randn64({1, 2, 9, 4}, DType::Float64, rng);
  expect_close(scaled_dot_product_attention(q, k, v, 0.0, true), composed_attention(q, k, v, false), 1e-12,
               "Tq = 1 against the unmasked reference");
}

TEST(Attention, OutputIsStoredHeadsLastSoMergingHeadsIsAView) {
  std::mt19937 rng(9);
  Tensor q = randn64({2, 3, 5, 4}, DType::Float32, rng);
  Tensor out = scaled_dot_product_attention(q, q, q);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5, 4}));
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
}

// With q = 0 and no mask every probability is 1/Tk; v = the identity (D = Tk) makes out[i, j]
// = keep(i, j) / (Tk (1 - p)), so the output shows the mask itself.
TEST(Attention, DropoutKeepsWhatThePhiloxRuleKeepsAndScalesByOneOverOneMinusP) {
  const int64_t B = 2, H = 3, T = 40;
  const double p = 0.25;
  Tensor q = Tensor::zeros({B, H, T, T}, DType::Float64);
  Tensor eye = Tensor::zeros({T, T}, DType::Float64);
  for (int64_t i = 0; i < T; ++i) eye.data_ptr<double>()[i * T + i] = 1.0;
  Tensor v = eye.expand({B, H, T, T}).contiguous();
  manual_seed(123);
  const Generator before = default_generator();
  auto out = scaled_dot_product_attention(q, q, v, p, false).contiguous().to_vector<double>();
  EXPECT_EQ(default_generator().offset, before.offset + uint64_t(B * H * T * T + 3) / 4);
  int64_t kept = 0;
  for (int64_t e = 0; e < B * H * T * T; ++e) {
    const bool keep = philox::uniform01(philox::bits(before.seed, before.offset, uint64_t(e))) >= float(p);
    ASSERT_NEAR(out[size_t(e)], keep ? 1.0 / (double(T) * (1 - p)) : 0.0, 1e-15) << "element " << e;
    kept += keep;
  }
  // 9600 draws: the keep rate is within 4 standard deviations (0.018) of 1 - p.
  EXPECT_NEAR(double(kept) / double(B * H * T * T), 1 - p, 0.018);
  manual_seed(123);
  EXPECT_EQ(scaled_dot_product_attention(q, q, v, p, false).contiguous().to_vector<double>(), out);
  EXPECT_NE(scaled_dot_product_attention(q, q, v, p, false).contiguous().to_vector<double>(), out);
}

TEST(Attention, ThreadCountDoesNotChangeResults) {
  // Large enough for the parallel paths (B H Tq Tk D >= 2^20 multiply-adds).
  std::mt19937 rng(10);
  Tensor q = randn64({2, 4, 96, 32}, DType::Float32, rng), k = randn64({2, 4, 96, 32}, DType::Float32, rng),
         v = randn64({2, 4, 96, 32}, DType::Float32, rng), g = randn64({2, 4, 96, 32}, DType::Float32, rng);
  auto run = [&] {
    Tensor qq = q.detach().requires_grad_(true), kk = k.detach().requires_grad_(true), vv = v.detach().requires_grad_(true);
    Tensor out = scaled_dot_product_attention(qq, kk, vv);
    out.backward(g);
    return std::vector<std::vector<float>>{out.to_vector<float>(), qq.grad().to_vector<float>(),
                                           kk.grad().to_vector<float>(), vv.grad().to_vector<float>()};
  };
  const int saved = cpu::max_threads();
  cpu::set_max_threads(1);
  auto one = run();
  cpu::set_max_threads(2);
  auto two = run();
  cpu::set_max_threads(saved);
  EXPECT_EQ(one, two);  // each item is computed by one thread in a fixed order
}

TEST(Attention, CpuBfloat16AutocastRoundsInputsAndOutputAsMatmulDoes) {
  std::mt19937 rng(11);
  Tensor q = randn64({1, 2, 6, 4}, DType::Float32, rng), k = randn64({1, 2, 6, 4}, DType::Float32, rng);
  auto rounded = [](const Tensor& t) { return t.to(DType::BFloat16).to(DType::Float32); };
  Tensor got;
  {
    autocast::Guard bf16(DType::BFloat16);
    got = scaled_dot_product_attention(q, k, k);
  }
  EXPECT_EQ(got.dtype(), DType::Float32);
  Tensor want = rounded(scaled_dot_product_attention(rounded(q), rounded(k), rounded(k)));
  EXPECT_EQ(got.contiguous().to_vector<float>(), want.contiguous().to_vector<float>());
  EXPECT_NE(got.contiguous().to_vector<float>(), scaled_dot_product_attention(q, k, k).contiguous().to_vector<float>());
}

template <typename E, typename F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing '" << fragment << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Attention, BadInputsAreTypedErrorsThatSayWhatWasWrong) {
  Tensor q = Tensor::ones({1, 2, 3, 4}), k = Tensor::ones({1, 2, 5, 4});
  expect_error<ShapeError>([&] { scaled_dot_product_attention(k, q, q); },
                           "query length Tq (5) may not exceed the key length Tk (3)");
  EXPECT_EQ(scaled_dot_product_attention(k, q, q, 0.0, false).shape(), (Shape{1, 2, 5, 4}));
  expect_error<ShapeError>([&] { scaled_dot_product_attention(q, Tensor::ones({1, 2, 3, 5}), Tensor::ones({1, 2, 3, 5})); },
                           "same head size D");
  expect_error<ShapeError>([&] { scaled_dot_product_attention(q, k, Tensor::ones({1, 2, 4, 4})); },
                           "k and v must have the same shape");
  expect_error<ShapeError>([&] { scaled_dot_product_attention(q, Tensor::ones({1, 3, 5, 4}), Tensor::ones({1, 3, 5, 4})); },
                           "batch and heads");
  expect_error<ShapeError>([&] { scaled_dot_product_attention(Tensor::ones({2, 3, 4}), k, k); }, "4-d [B, H, T, D]");
  expect_error<ShapeError>([&] { scaled_dot_product_attention(q, Tensor::ones({1, 2, 0, 4}), Tensor::ones({1, 2, 0, 4}), 0.0, false); },
                           "need at least one key");
  expect_error<DTypeError>([&] { scaled_dot_product_attention(q, k.to(DType::Float64), k); }, "different dtypes");
  expect_error<DTypeError>([&] { scaled_dot_product_attention(q.to(DType::Int64), k.to(DType::Int64), k.to(DType::Int64)); },
                           "floating point");
  expect_error<DTypeError>([&] {
    Tensor h = q.to(DType::BFloat16);
    scaled_dot_product_attention(h, h, h);
  }, "half types are storage-only on the CPU");
  expect_error<ValueError>([&] { scaled_dot_product_attention(q, k, k, 1.5); }, "dropout_p must be in [0, 1]");
  expect_error<ValueError>([&] { scaled_dot_product_attention(q, Tensor(), k); }, "must all be defined");
}

}  // namespace
}  // namespace tandem::testing
