// Public op front ends. Each checks shapes and dtypes, records its backward (written next to
// its forward in the op's .cpp) and dispatches to the tensor's backend. Gradients flow to
// every floating input; integer and bool inputs (targets, masks, indices) get none.
#pragma once
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tandem {

enum class Reduction { None, Mean, Sum };
Reduction parse_reduction(const std::string& s);  // "none" | "mean" | "sum"

// ---- elementwise (PyTorch broadcasting) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor affine(const Tensor& x, double alpha, double beta);  // alpha * x + beta
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // "none" | "tanh"
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
// Comparisons return Bool and carry no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor cast(const Tensor& x, DType dtype);

// ---- reductions ----
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int>& dims, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int>& dims, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int>& dims, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int dim, bool keepdim = false);
// Sums g over broadcast dims so it has `shape` (the backward of broadcasting).
Tensor sum_to_shape(const Tensor& g, const Shape& shape);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);  // 1-D, 2-D and batched with broadcasting
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());  // w [out,in]
// act(linear(x, weight, bias)) as one op, activation "none", "relu" or "gelu_tanh" (gelu with
// approximate "tanh"): the values of the two ops, with one pass over memory fewer forward (the
// CPU applies it to each tile its GEMM finishes) and backward (the activation's gradient and the
// bias's in one pass). The bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::string& activation);

// ---- activations and losses ----
Tensor softmax(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);
Tensor nll_loss(const Tensor& logp, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100, double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// ---- attention ----
// q [B, H, Tq, D], k and v [B, H, Tk, D] -> [B, H, Tq, D]: softmax(q k^T / sqrt(D) + mask) v per
// (batch, head), as torch.nn.functional.scaled_dot_product_attention. With is_causal, query i
// attends keys j <= i + (Tk - Tq) (the mask aligned bottom-right: Tq == Tk is the usual causal
// mask, Tq == 1 after a KV cache sees every key) and Tq > Tk is a ShapeError. dropout_p drops
// attention probabilities with the default Philox generator (pass 0 in eval). Inputs may be
// strided views (heads split from one fused qkv projection); the output is a view stored
// [B, Tq, H, D], so out.transpose(1, 2) is contiguous. float32/float64 on the CPU; float16 and
// bfloat16 too on CUDA (float accumulation).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p = 0.0,
                                    bool is_causal = true);

// ---- convolution, pooling, normalization ----
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool count_include_pad = true);
// x is [N, C, ...]. In training mode, normalizes with batch statistics and updates the
// running buffers in place (running = (1-m)*running + m*batch, unbiased variance);
// in eval mode, uses the running buffers.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor dropout(const Tensor& x, double p, bool training);
Tensor embedding(const Tensor& indices, const Tensor& weight);

// ---- joining ----
Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);
Tensor flatten(const Tensor& x, int start_dim = 0, int end_dim = -1);

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double s) { return affine(a, 1.0, s); }
inline Tensor operator+(double s, const Tensor& a) { return affine(a, 1.0, s); }
inline Tensor operator-(const Tensor& a, double s) { return affine(a, 1.0, -s); }
inline Tensor operator-(double s, const Tensor& a) { return affine(a, -1.0, s); }
inline Tensor operator*(const Tensor& a, double s) { return affine(a, s, 0.0); }
inline Tensor operator*(double s, const Tensor& a) { return affine(a, s, 0.0); }
inline Tensor operator/(const Tensor& a, double s) { return affine(a, 1.0 / s, 0.0); }
Tensor operator/(double s, const Tensor& a);

}  // namespace tandem
