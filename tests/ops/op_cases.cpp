// The op table: one entry per op (and per interesting variant). Shapes are drawn per seed;
// values avoid the kinks of non-smooth ops only by being continuous random draws.
#include "kernels/backend.h"
#include "kernels/min_max_uint8_layout.h"
#include "op_harness.h"
#include "tensor/generator.h"

namespace tandem::testing {

namespace {

using Inputs = std::vector<Tensor>;
using Rng = std::mt19937;

// [a, b] or [a, 1] style broadcasting pairs with odd sizes.
std::pair<Shape, Shape> broadcast_pair(Rng& rng) {
  int64_t a = rand_dim(rng, 1, 5), b = rand_dim(rng, 1, 7), c = rand_dim(rng, 2, 3);
  switch (rng() % 4) {
    case 0: return {{a, b}, {a, b}};
    case 1: return {{c, a, b}, {b}};
    case 2: return {{a, 1}, {c, 1, b}};
    default: return {{a, b}, {}};
  }
}

OpCase binary(const std::string& name, Tensor (*fn)(const Tensor&, const Tensor&), bool positive_b = false) {
  return {name,
          [positive_b](Rng& rng, DType dt) {
            auto [sa, sb] = broadcast_pair(rng);
            return Inputs{randn64(sa, dt, rng), positive_b ? positive(sb, dt, rng) : randn64(sb, dt, rng)};
          },
          [fn](const Inputs& in) { return fn(in[0], in[1]); }};
}

OpCase unary(const std::string& name, std::function<Tensor(const Tensor&)> fn, bool positive_x = false) {
  return {name,
          [positive_x](Rng& rng, DType dt) {
            Shape s{rand_dim(rng, 1, 4), rand_dim(rng, 1, 9)};
            return Inputs{positive_x ? positive(s, dt, rng) : randn64(s, dt, rng)};
          },
          [fn](const Inputs& in) { return fn(in[0]); }};
}

Shape random_shape(Rng& rng, int ndim, int64_t lo, int64_t hi) {
  Shape s;
  for (int i = 0; i < ndim; ++i) s.push_back(rand_dim(rng, lo, hi));
  return s;
}

Tensor class_targets(Rng& rng, const Shape& shape, int64_t classes, int64_t ignore_index = -100, bool with_ignored = false) {
  std::vector<int64_t> t(size_t(shape_numel(shape)));
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = (with_ignored && i % 3 == 1) ? ignore_index : rand_dim(rng, 0, classes - 1);
  if (with_ignored && !t.empty()) t[0] = rand_dim(rng, 0, classes - 1);  // at least one counted row
  return Tensor::from_vector(t, shape);
}

// Kernels with no op front end (optimizer updates, compression, random fills), called directly
// on the inputs' backend. Their results have no gradient (differentiable = false): the gradient
// check asserts they carry no autograd history; the backend comparisons compare their values.
TensorView kernel_view(const Tensor& t) { return t.view_desc(); }
Tensor fresh(const Tensor& t) { return t.detach().clone(); }

void add_kernel_cases(std::vector<OpCase>& c) {
  auto three_vectors = [](Rng& rng, DType dt) {
    Shape s{rand_dim(rng, 1, 37)};
    return Inputs{randn64(s, dt, rng), randn64(s, dt, rng), positive(s, dt, rng)};
  };
  c.push_back({"sgd_step_nesterov_weight_decay", three_vectors,
               [](const Inputs& in) {
                 Tensor p = fresh(in[0]), buf = fresh(in[2]);
                 const TensorView bv = kernel_view(buf);
                 backend_for(p.device()).sgd_step(kernel_view(p), kernel_view(in[1]), &bv, 0.1, 0.9, 0.1, 0.01,
                                                  /*nesterov=*/true, /*first_step=*/false);
                 return cat({p, buf}, 0);
               },
               1e-6, 1e-6, /*differentiable=*/false});
  c.push_back({"adamw_step", three_vectors,
               [](const Inputs& in) {
                 Tensor p = fresh(in[0]), m = fresh(in[1]) * 0.1, v = fresh(in[2]) * 0.01;
                 backend_for(p.device()).adam_step(kernel_view(p), kernel_view(in[1]), kernel_view(m), kernel_view(v),
                                                   1e-2, 0.9, 0.999, 1e-8, 0.05, /*decoupled=*/true, /*step=*/3);
                 return cat({p, m, v}, 0);
               },
               1e-6, 1e-6, false});
  auto two_lists = [](Rng& rng, DType dt) {
    Shape a{rand_dim(rng, 1, 9)}, b{rand_dim(rng, 1, 9), 3};
    return Inputs{randn64(a, dt, rng), randn64(b, dt, rng), randn64(a, dt, rng), randn64(b, dt, rng)};
  };
  c.push_back({"sgd_step_multi_momentum", two_lists,
               [](const Inputs& in) {
                 Tensor p0 = fresh(in[0]), p1 = fresh(in[1]), b0 = Tensor::zeros(in[0].shape(), in[0].dtype(), in[0].device()),
                        b1 = Tensor::zeros(in[1].shape(), in[1].dtype(), in[1].device());
                 for (bool first : {true, false})
                   backend_for(p0.device()).sgd_step_multi({kernel_view(p0), kernel_view(p1)},
                                                           {kernel_view(in[2]), kernel_view(in[3])},
                                                           {kernel_view(b0), kernel_view(b1)}, 0.05, 0.8, 0.0, 0.0,
                                                           /*nesterov=*/false, first);
                 return cat({p0, p1.flatten(), b0, b1.flatten()}, 0);
               },
               1e-6, 1e-6, false});
  c.push_back({"adam_step_multi", two_lists,
               [](const Inputs& in) {
                 Tensor p0 = fresh(in[0]), p1 = fresh(in[1]);
                 Tensor m0 = Tensor::zeros(in[0].shape(), in[0].dtype(), in[0].device()), v0 = m0.clone();
                 Tensor m1 = Tensor::zeros(in[1].shape(), in[1].dtype(), in[1].device()), v1 = m1.clone();
                 for (int64_t step : {1, 2})
                   backend_for(p0.device()).adam_step_multi(
                       {kernel_view(p0), kernel_view(p1)}, {kernel_view(in[2]), kernel_view(in[3])},
                       {kernel_view(m0), kernel_view(m1)}, {kernel_view(v0), kernel_view(v1)}, 1e-2, 0.9, 0.99, 1e-8,
                       0.01, /*decoupled=*/false, step);
                 return cat({p0, p1.flatten(), m0, m1.flatten(), v0, v1.flatten()}, 0);
               },
               1e-6, 1e-6, false});
  // Batch norm with given statistics: no op front end calls it (eval-mode batch_norm is composed
  // of elementwise ops so that it is differentiable); the backends run it inside batch_norm_train.
  c.push_back({"batch_norm_apply_given_statistics",
               [](Rng& rng, DType dt) {
                 const int64_t ch = rand_dim(rng, 1, 4);
                 return Inputs{randn64({rand_dim(rng, 1, 3), ch, rand_dim(rng, 1, 5)}, dt, rng), randn64({ch}, dt, rng),
                               positive({ch}, dt, rng), randn64({ch}, dt, rng), randn64({ch}, dt, rng)};
               },
               [](const Inputs& in) {
                 Tensor y = Tensor::empty(in[0].shape(), in[0].dtype(), in[0].device());
                 const TensorView gamma = kernel_view(in[3]), beta = kernel_view(in[4]);
                 backend_for(y.device()).batch_norm_apply(kernel_view(in[0]), in[0].size(0), in[0].size(1), in[0].size(2),
                                                          kernel_view(in[1]), kernel_view(in[2]), &gamma, &beta,
                                                          kernel_view(y));
                 return y;
               },
               1e-6, 1e-6, false});
  // Float32 only: the 8-bit block codes and back (block 4 leaves a partial last block).
  c.push_back({"compress_decompress_min_max_uint8",
               [](Rng& rng, DType dt) { return Inputs{randn64({rand_dim(rng, 1, 23)}, dt, rng)}; },
               [](const Inputs& in) {
                 Tensor x = in[0].detach().to(DType::Float32);
                 const int64_t n = x.numel(), block = 4;
                 Tensor packed = Tensor::empty({min_max_uint8_bytes(n, block)}, DType::UInt8, x.device());
                 Tensor out = Tensor::empty({n}, DType::Float32, x.device());
                 Backend& be = backend_for(x.device());
                 be.compress_min_max_uint8(kernel_view(x), block, kernel_view(packed));
                 be.decompress_min_max_uint8(kernel_view(packed), block, kernel_view(out));
                 return out;
               },
               1e-6, 1e-6, false});
  // Philox draws: uniform on [-1, 3) and normal with mean 0.5, std 2 (the inputs give shape,
  // dtype and device only).
  c.push_back({"random_fill_uniform_normal",
               [](Rng& rng, DType dt) { return Inputs{randn64(random_shape(rng, 2, 1, 9), dt, rng)}; },
               [](const Inputs& in) {
                 Tensor u = Tensor::empty(in[0].shape(), in[0].dtype(), in[0].device()), g = u.clone();
                 backend_for(u.device()).random_fill(kernel_view(u), 1234, 0, /*normal=*/false, -1.0, 3.0);
                 backend_for(g.device()).random_fill(kernel_view(g), 1234, 64, /*normal=*/true, 0.5, 2.0);
                 return stack({u, g}, 0);
               },
               1e-6, 1e-6, false});
}

std::vector<OpCase> build_cases() {
  std::vector<OpCase> c;
  // ---- elementwise binary (broadcasting) ----
  c.push_back(binary("add", add));
  c.push_back(binary("sub", sub));
  c.push_back(binary("mul", mul));
  c.push_back(binary("div", div, true));
  c.push_back({"pow_tensor",
               [](Rng& rng, DType dt) {
                 auto [sa, sb] = broadcast_pair(rng);
                 return Inputs{positive(sa, dt, rng), randn64(sb, dt, rng)};
               },
               [](const Inputs& in) { return pow(in[0], in[1]); }});
  c.push_back(binary("maximum", maximum));
  c.push_back(binary("minimum", minimum));
  // ---- elementwise unary ----
  c.push_back(unary("neg", [](const Tensor& x) { return neg(x); }));
  c.push_back(unary("exp", [](const Tensor& x) { return exp(x); }));
  c.push_back(unary("log", [](const Tensor& x) { return log(x); }, true));
  c.push_back(unary("sqrt", [](const Tensor& x) { return sqrt(x); }, true));
  c.push_back(unary("pow_scalar", [](const Tensor& x) { return pow(x, 2.5); }, true));
  c.push_back(unary("abs", [](const Tensor& x) { return abs(x); }));
  c.push_back(unary("clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }));
  c.push_back(unary("relu", [](const Tensor& x) { return relu(x); }));
  c.push_back(unary("gelu", [](const Tensor& x) { return gelu(x); }));
  c.push_back(unary("gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }));
  c.push_back(unary("sigmoid", [](const Tensor& x) { return sigmoid(x); }));
  c.push_back(unary("tanh", [](const Tensor& x) { return tanh(x); }));
  c.push_back(unary("affine", [](const Tensor& x) { return 3.0 - x * 1.5 + 0.25; }));
  c.push_back(unary("reciprocal", [](const Tensor& x) { return 2.0 / x; }, true));
  {  // A real conversion: through float32 and back (the identity up to float32 rounding).
    OpCase round_trip = unary("cast_float32_round_trip",
                              [](const Tensor& x) { return cast(cast(x, DType::Float32), x.dtype()); });
    round_trip.fd_eps = 1e-2;    // exact for a linear map; float32 rounding stays ~1e-6 of it
    round_trip.grad_tol = 1e-4;
    c.push_back(round_trip);
  }
  // ---- selection ----
  c.push_back({"where",
               [](Rng& rng, DType dt) {
                 auto [sa, sb] = broadcast_pair(rng);
                 Tensor a = randn64(sa, dt, rng);
                 return Inputs{a, randn64(sb, dt, rng), gt(randn64(sa, dt, rng), Tensor::zeros({}, dt))};
               },
               [](const Inputs& in) { return where(in[2], in[0], in[1]); }});
  c.push_back({"masked_fill",
               [](Rng& rng, DType dt) {
                 Shape s = random_shape(rng, 3, 1, 4);
                 Shape ms{1, s[1], s[2]};
                 return Inputs{randn64(s, dt, rng), gt(randn64(ms, dt, rng), Tensor::zeros({}, dt))};
               },
               [](const Inputs& in) { return masked_fill(in[0], in[1], -2.5); }});
  // ---- reductions ----
  auto reduce_input = [](Rng& rng, DType dt) { return Inputs{randn64(random_shape(rng, 3, 1, 5), dt, rng)}; };
  c.push_back({"sum_all", reduce_input, [](const Inputs& in) { return sum(in[0]); }});
  c.push_back({"sum_dim0_keep", reduce_input, [](const Inputs& in) { return sum(in[0], {0}, true); }});
  c.push_back({"sum_dims_0_2", reduce_input, [](const Inputs& in) { return sum(in[0], {0, 2}); }});
  c.push_back({"mean_all", reduce_input, [](const Inputs& in) { return mean(in[0]); }});
  c.push_back({"mean_last", reduce_input, [](const Inputs& in) { return mean(in[0], {-1}); }});
  c.push_back({"amax_dim1", reduce_input, [](const Inputs& in) { return amax(in[0], {1}, true); }});
  c.push_back({"amin_dims", reduce_input, [](const Inputs& in) { return amin(in[0], {0, 2}); }});
  c.push_back({"mean_dims_keep", reduce_input, [](const Inputs& in) { return mean(in[0], {0, 1}, true); }});
  c.push_back({"max_all", reduce_input, [](const Inputs& in) { return max(in[0]); }});
  c.push_back({"min_all", reduce_input, [](const Inputs& in) { return min(in[0]); }});
  // Integer outputs: no gradient (the check is that none is recorded); the backend
  // comparison checks the indices.
  c.push_back({"argmax_dim1_keep", reduce_input, [](const Inputs& in) { return argmax(in[0], 1, true); }});
  c.push_back({"argmin_last", reduce_input, [](const Inputs& in) { return argmin(in[0], -1); }});
  // ---- linear algebra ----
  c.push_back({"matmul_2d",
               [](Rng& rng, DType dt) {
                 int64_t m = rand_dim(rng, 1, 5), k = rand_dim(rng, 1, 6), n = rand_dim(rng, 1, 5);
                 return Inputs{randn64({m, k}, dt, rng), randn64({k, n}, dt, rng)};
               },
               [](const Inputs& in) { return matmul(in[0], in[1]); }});
  c.push_back({"matmul_batched_broadcast",
               [](Rng& rng, DType dt) {
                 int64_t b = rand_dim(rng, 2, 3), m = rand_dim(rng, 1, 4), k = rand_dim(rng, 1, 5), n = rand_dim(rng, 1, 4);
                 return Inputs{randn64({b, 1, m, k}, dt, rng), randn64({2, k, n}, dt, rng)};
               },
               [](const Inputs& in) { return matmul(in[0], in[1]); }});
  c.push_back({"matmul_3d_by_2d",
               [](Rng& rng, DType dt) {
                 int64_t b = rand_dim(rng, 2, 3), m = rand_dim(rng, 1, 4), k = rand_dim(rng, 2, 5), n = rand_dim(rng, 1, 4);
                 return Inputs{randn64({b, m, k}, dt, rng), randn64({k, n}, dt, rng)};
               },
               [](const Inputs& in) { return matmul(in[0], in[1]); }});
  // The tied-head shape: a batch of rows times a transposed matrix (GPT's wte.t()), whose
  // gradient is made in the matrix's own layout.
  c.push_back({"matmul_3d_by_transposed_2d",
               [](Rng& rng, DType dt) {
                 int64_t b = rand_dim(rng, 2, 3), m = rand_dim(rng, 1, 4), k = rand_dim(rng, 2, 5), n = rand_dim(rng, 2, 4);
                 return Inputs{randn64({b, m, k}, dt, rng), randn64({n, k}, dt, rng)};
               },
               [](const Inputs& in) { return matmul(in[0], in[1].t()); }});
  c.push_back({"matmul_transposed_operands",
               [](Rng& rng, DType dt) {
                 int64_t m = rand_dim(rng, 2, 5), k = rand_dim(rng, 2, 6), n = rand_dim(rng, 2, 5);
                 return Inputs{randn64({k, m}, dt, rng), randn64({n, k}, dt, rng)};
               },
               [](const Inputs& in) { return matmul(in[0].t(), in[1].t()); }});
  c.push_back({"matmul_vec",
               [](Rng& rng, DType dt) {
                 int64_t m = rand_dim(rng, 1, 5), k = rand_dim(rng, 1, 6);
                 return Inputs{randn64({m, k}, dt, rng), randn64({k}, dt, rng), randn64({m}, dt, rng)};
               },
               [](const Inputs& in) { return matmul(in[2], matmul(in[0], in[1]).unsqueeze(1)); }});
  c.push_back({"linear_bias_3d",
               [](Rng& rng, DType dt) {
                 int64_t in_f = rand_dim(rng, 1, 6), out_f = rand_dim(rng, 1, 5);
                 return Inputs{randn64({2, rand_dim(rng, 1, 3), in_f}, dt, rng), randn64({out_f, in_f}, dt, rng),
                               randn64({out_f}, dt, rng)};
               },
               [](const Inputs& in) { return linear(in[0], in[1], in[2]); }});
  c.push_back({"linear_no_bias",
               [](Rng& rng, DType dt) {
                 int64_t in_f = rand_dim(rng, 1, 6), out_f = rand_dim(rng, 1, 5);
                 return Inputs{randn64({rand_dim(rng, 1, 4), in_f}, dt, rng), randn64({out_f, in_f}, dt, rng)};
               },
               [](const Inputs& in) { return linear(in[0], in[1]); }});
  // The fused activations (linear_forward's act, linear_activation_backward): rows past one
  // register tile and columns past one 16-column block, so tiles and column blocks have edges.
  for (const char* act : {"relu", "gelu_tanh"}) {
    c.push_back({std::string("linear_") + act,
                 [](Rng& rng, DType dt) {
                   int64_t in_f = rand_dim(rng, 1, 6), out_f = rand_dim(rng, 15, 35);
                   return Inputs{randn64({rand_dim(rng, 1, 20), in_f}, dt, rng), randn64({out_f, in_f}, dt, rng),
                                 randn64({out_f}, dt, rng)};
                 },
                 [act](const Inputs& in) { return linear(in[0], in[1], in[2], act); }});
  }
  c.push_back({"linear_relu_no_bias_3d",
               [](Rng& rng, DType dt) {
                 int64_t in_f = rand_dim(rng, 1, 6), out_f = rand_dim(rng, 1, 5);
                 return Inputs{randn64({2, rand_dim(rng, 1, 3), in_f}, dt, rng), randn64({out_f, in_f}, dt, rng)};
               },
               [](const Inputs& in) { return linear(in[0], in[1], Tensor(), "relu"); }});
  // ---- softmax family and losses ----
  c.push_back({"softmax_dim1", reduce_input, [](const Inputs& in) { return softmax(in[0], 1); }});
  c.push_back({"log_softmax_last", reduce_input, [](const Inputs& in) { return log_softmax(in[0], -1); }});
  auto ce_inputs = [](bool ignored) {
    return [ignored](Rng& rng, DType dt) {
      int64_t n = rand_dim(rng, 2, 6), classes = rand_dim(rng, 2, 7);
      return Inputs{randn64({n, classes}, dt, rng), class_targets(rng, {n}, classes, -100, ignored)};
    };
  };
  c.push_back({"cross_entropy_mean", ce_inputs(false), [](const Inputs& in) { return cross_entropy(in[0], in[1]); }});
  c.push_back({"cross_entropy_sum_ignore", ce_inputs(true),
               [](const Inputs& in) { return cross_entropy(in[0], in[1], Reduction::Sum); }});
  c.push_back({"cross_entropy_none_smoothing", ce_inputs(true),
               [](const Inputs& in) { return cross_entropy(in[0], in[1], Reduction::None, -100, 0.2); }});
  c.push_back({"cross_entropy_mean_ignore_smoothing", ce_inputs(true),
               [](const Inputs& in) { return cross_entropy(in[0], in[1], Reduction::Mean, -100, 0.1); }});
  c.push_back({"cross_entropy_spatial",
               [](Rng& rng, DType dt) {
                 int64_t n = rand_dim(rng, 1, 3), classes = rand_dim(rng, 2, 4), d = rand_dim(rng, 1, 3);
                 return Inputs{randn64({n, classes, d}, dt, rng), class_targets(rng, {n, d}, classes)};
               },
               [](const Inputs& in) { return cross_entropy(in[0], in[1]); }});
  c.push_back({"nll_loss_mean", ce_inputs(true),
               [](const Inputs& in) { return nll_loss(log_softmax(in[0], 1), in[1]); }});
  c.push_back({"nll_loss_none_spatial",
               [](Rng& rng, DType dt) {
                 int64_t n = rand_dim(rng, 1, 3), classes = rand_dim(rng, 2, 5), d = rand_dim(rng, 1, 3);
                 return Inputs{randn64({n, classes, d}, dt, rng), class_targets(rng, {n, d}, classes)};
               },
               [](const Inputs& in) { return nll_loss(log_softmax(in[0], 1), in[1], Reduction::None); }});
  auto mse_inputs = [](Rng& rng, DType dt) {
    Shape s = random_shape(rng, 2, 1, 6);
    return Inputs{randn64(s, dt, rng), randn64(s, dt, rng)};
  };
  c.push_back({"mse_loss", mse_inputs, [](const Inputs& in) { return mse_loss(in[0], in[1]); }});
  c.push_back({"mse_loss_sum", mse_inputs, [](const Inputs& in) { return mse_loss(in[0], in[1], Reduction::Sum); }});
  c.push_back({"mse_loss_none", mse_inputs, [](const Inputs& in) { return mse_loss(in[0], in[1], Reduction::None); }});
  // ---- attention: odd T and D, T = 1, a KV cache (Tq < Tk), q/k/v as views of one fused
  // projection, dropout ----
  auto attention_inputs = [](int64_t tq_lo, int64_t tq_hi, int64_t extra_keys_hi) {
    return [=](Rng& rng, DType dt) {
      const int64_t b = rand_dim(rng, 1, 2), h = rand_dim(rng, 1, 2), d = rand_dim(rng, 1, 5);
      const int64_t tq = rand_dim(rng, tq_lo, tq_hi), tk = tq + rand_dim(rng, 0, extra_keys_hi);
      return Inputs{randn64({b, h, tq, d}, dt, rng), randn64({b, h, tk, d}, dt, rng), randn64({b, h, tk, d}, dt, rng)};
    };
  };
  auto attention = [](bool causal, double dropout_p = 0.0) {
    return [=](const Inputs& in) {
      if (dropout_p > 0) manual_seed(77);  // the same mask on every evaluation
      return scaled_dot_product_attention(in[0], in[1], in[2], dropout_p, causal);
    };
  };
  c.push_back({"attention_causal", attention_inputs(1, 7, 0), attention(true)});
  c.push_back({"attention_causal_one_query_one_key", attention_inputs(1, 1, 0), attention(true)});
  c.push_back({"attention_causal_kv_cache", attention_inputs(1, 3, 5), attention(true)});
  c.push_back({"attention_full_cross", attention_inputs(1, 4, 4), attention(false)});
  c.push_back({"attention_dropout", attention_inputs(2, 7, 2), attention(true, 0.3)});
  c.push_back({"attention_fused_qkv",
               [](Rng& rng, DType dt) {
                 const int64_t t = rand_dim(rng, 1, 6), h = rand_dim(rng, 1, 3), d = rand_dim(rng, 1, 4);
                 return Inputs{randn64({rand_dim(rng, 1, 2), t, 3 * h * d}, dt, rng),
                               Tensor::zeros({h}, DType::Int64)};  // carries H in its shape
               },
               [](const Inputs& in) {
                 // [B, T, 3 * H * D] -> [B, T, 3, H, D] -> q, k, v as [B, H, T, D] strided views.
                 const int64_t h = in[1].size(0), d = in[0].size(2) / (3 * h);
                 Tensor qkv = in[0].view({in[0].size(0), in[0].size(1), 3, h, d});
                 auto heads = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };
                 return scaled_dot_product_attention(heads(0), heads(1), heads(2));
               }});
  // ---- convolution and pooling ----
  c.push_back({"conv2d_stride_pad_bias",
               [](Rng& rng, DType dt) {
                 int64_t n = rand_dim(rng, 1, 2), cin = rand_dim(rng, 1, 3), cout = rand_dim(rng, 1, 3);
                 return Inputs{randn64({n, cin, rand_dim(rng, 4, 6), rand_dim(rng, 4, 7)}, dt, rng),
                               randn64({cout, cin, 3, 2}, dt, rng), randn64({cout}, dt, rng)};
               },
               [](const Inputs& in) { return conv2d(in[0], in[1], in[2], {2, 1}, {1, 1}); }});
  c.push_back({"conv2d_dilation_no_bias",
               [](Rng& rng, DType dt) {
                 int64_t cin = rand_dim(rng, 1, 2), cout = rand_dim(rng, 1, 3);
                 return Inputs{randn64({2, cin, 6, 5}, dt, rng), randn64({cout, cin, 2, 2}, dt, rng)};
               },
               [](const Inputs& in) { return conv2d(in[0], in[1], Tensor(), {1, 1}, {0, 1}, {2, 1}); }});
  c.push_back({"max_pool2d",
               [](Rng& rng, DType dt) { return Inputs{randn64({2, rand_dim(rng, 1, 2), 5, rand_dim(rng, 4, 6)}, dt, rng)}; },
               [](const Inputs& in) { return max_pool2d(in[0], {2, 2}); }});
  c.push_back({"max_pool2d_pad_stride",
               [](Rng& rng, DType dt) { return Inputs{randn64({1, 2, rand_dim(rng, 4, 6), 5}, dt, rng)}; },
               [](const Inputs& in) { return max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}); }});
  c.push_back({"avg_pool2d",
               [](Rng& rng, DType dt) { return Inputs{randn64({2, 2, rand_dim(rng, 4, 6), 4}, dt, rng)}; },
               [](const Inputs& in) { return avg_pool2d(in[0], {2, 2}); }});
  c.push_back({"avg_pool2d_pad_exclude",
               [](Rng& rng, DType dt) { return Inputs{randn64({1, 2, 5, rand_dim(rng, 4, 6)}, dt, rng)}; },
               [](const Inputs& in) { return avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, false); }});
  // ---- normalization ----
  c.push_back({"batch_norm_train_affine",
               [](Rng& rng, DType dt) {
                 int64_t ch = rand_dim(rng, 1, 3);
                 return Inputs{randn64({3, ch, rand_dim(rng, 1, 3), 2}, dt, rng), positive({ch}, dt, rng),
                               randn64({ch}, dt, rng)};
               },
               [](const Inputs& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); }});
  c.push_back({"batch_norm_train_1d_no_affine",
               [](Rng& rng, DType dt) { return Inputs{randn64({rand_dim(rng, 2, 6), rand_dim(rng, 1, 4)}, dt, rng)}; },
               [](const Inputs& in) { return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }});
  c.push_back({"batch_norm_eval",
               [](Rng& rng, DType dt) {
                 int64_t ch = rand_dim(rng, 1, 3);
                 return Inputs{randn64({2, ch, 3}, dt, rng), randn64({ch}, dt, rng), randn64({ch}, dt, rng)};
               },
               [](const Inputs& in) {
                 Tensor rm = Tensor::full({in[0].size(1)}, 0.3, in[0].dtype(), in[0].device());
                 Tensor rv = Tensor::full({in[0].size(1)}, 1.7, in[0].dtype(), in[0].device());
                 return batch_norm(in[0], rm, rv, in[1], in[2], false);
               }});
  c.push_back({"layer_norm",
               [](Rng& rng, DType dt) {
                 int64_t d = rand_dim(rng, 2, 6);
                 return Inputs{randn64({rand_dim(rng, 1, 3), 2, d}, dt, rng), positive({2, d}, dt, rng),
                               randn64({2, d}, dt, rng)};
               },
               [](const Inputs& in) { return layer_norm(in[0], {2, in[0].size(2)}, in[1], in[2]); }});
  c.push_back({"layer_norm_no_affine",
               [](Rng& rng, DType dt) { return Inputs{randn64({rand_dim(rng, 1, 4), rand_dim(rng, 2, 7)}, dt, rng)}; },
               [](const Inputs& in) { return layer_norm(in[0], {in[0].size(1)}); }});
  // ---- random, indexing, joining ----
  c.push_back({"dropout",
               [](Rng& rng, DType dt) { return Inputs{randn64(random_shape(rng, 2, 2, 9), dt, rng)}; },
               [](const Inputs& in) {
                 manual_seed(77);  // the same mask on every evaluation
                 return dropout(in[0], 0.4, true);
               }});
  c.push_back({"embedding",
               [](Rng& rng, DType dt) {
                 int64_t vocab = rand_dim(rng, 2, 6);
                 return Inputs{randn64({vocab, rand_dim(rng, 1, 4)}, dt, rng), class_targets(rng, {2, 3}, vocab)};
               },
               [](const Inputs& in) { return embedding(in[1], in[0]); }});
  c.push_back({"cat_dim1",
               [](Rng& rng, DType dt) {
                 int64_t a = rand_dim(rng, 1, 3);
                 return Inputs{randn64({a, rand_dim(rng, 1, 3)}, dt, rng), randn64({a, rand_dim(rng, 1, 4)}, dt, rng)};
               },
               [](const Inputs& in) { return cat({in[0], in[1], in[0]}, 1); }});
  c.push_back({"stack_dim0",
               [](Rng& rng, DType dt) {
                 Shape s = random_shape(rng, 2, 1, 4);
                 return Inputs{randn64(s, dt, rng), randn64(s, dt, rng)};
               },
               [](const Inputs& in) { return stack({in[0], in[1]}, 0); }});
  // ---- views (differentiable, no copies) ----
  auto view_input = [](Rng& rng, DType dt) { return Inputs{randn64({rand_dim(rng, 2, 4), 3, rand_dim(rng, 2, 5)}, dt, rng)}; };
  c.push_back({"reshape_permute", view_input, [](const Inputs& in) { return in[0].permute({2, 0, 1}).reshape({-1, 3}); }});
  c.push_back({"transpose_contiguous", view_input, [](const Inputs& in) { return in[0].transpose(0, 2).contiguous(); }});
  c.push_back({"narrow_select", view_input, [](const Inputs& in) { return in[0].narrow(2, 1, 1).select(1, 2); }});
  c.push_back({"slice_step", view_input, [](const Inputs& in) { return in[0].slice(2, 0, -1, 2); }});
  c.push_back({"expand", view_input,
               [](const Inputs& in) { return in[0].narrow(1, 0, 1).expand({-1, 4, -1}) * in[0].narrow(1, 1, 1); }});
  c.push_back({"split_chunk", view_input,
               [](const Inputs& in) {
                 auto parts = in[0].split(2, 2);
                 auto halves = in[0].chunk(2, 0);
                 return sum(parts.back()) + sum(halves.front() * 2.0);
               }});
  c.push_back({"flatten_unsqueeze", view_input,
               [](const Inputs& in) { return flatten(in[0], 1).unsqueeze(0).squeeze(0); }});
  add_kernel_cases(c);
  return c;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_cases();
  return cases;
}

}  // namespace tandem::testing
