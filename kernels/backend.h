// Backend: the dispatch seam between op front ends (engine/ops) and kernels.
// One virtual method per kernel family; the CPU backend (kernels/cpu, Eigen) is the
// reference, the CUDA backend (kernels/cuda) implements the same signatures. An op front
// end calls backend_for(device).<kernel>(...); nothing outside this seam uses #ifdef.
//
// Conventions: outputs are allocated by the caller; unless a comment says otherwise,
// inputs and outputs are contiguous; `n` counts elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/tensor/device.h"
#include "kernels/tensor_view.h"

namespace tandem {

enum class UnaryOp : uint8_t {
  Neg, Exp, Log, Sqrt, Abs, Relu, Sigmoid, Tanh, Gelu, GeluTanh, Pow /*scalar exponent*/,
  Clamp, Affine /*alpha*x + beta*/, Reciprocal /*alpha / x*/
};
enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge
};
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min };

struct UnaryParams {
  double scalar = 0;               // Pow: exponent
  double lo = -1e308, hi = 1e308;  // Clamp bounds
  double alpha = 1, beta = 0;      // Affine, Reciprocal
};

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};
struct Pool2dParams {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // avg pool only
};

// ---- attention (scaled-dot-product attention; engine/ops/attention.cpp) ----
// Query row i of a head attends key j when !causal, or when j <= i + (Tk - Tq) (the causal mask
// aligned bottom-right, so a query row appended to a KV cache sees every cached key). Dropout
// on the probabilities: element (b, h, i, j) is kept when philox::uniform01(bits(seed, offset,
// ((b * H + h) * Tq + i) * Tk + j)) >= dropout_p, and kept ones are scaled by 1 / (1 - p).
struct AttentionParams {
  double scale = 1.0;  // multiplies q k^T (1/sqrt(D) from the op)
  bool causal = true;
  double dropout_p = 0.0;
  uint64_t seed = 0, offset = 0;  // the Philox draw of the dropout mask
};

// Kernel methods have a default that throws DeviceError("<kernel> is not implemented on the
// <backend> backend"), so a backend can grow op by op; the CPU backend implements them all.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  virtual const char* name() const = 0;

  // ---- memory ----
  virtual void* allocate(size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* p, size_t nbytes, int device_index) = 0;
  // Copies nbytes between host memory and this backend's device (or within it).
  virtual void copy_bytes(void* dst, const void* src, size_t nbytes, bool dst_on_host,
                          bool src_on_host, int device_index) = 0;
  virtual void synchronize(int device_index) = 0;

  // ---- layout ----
  // out[i...] = cast(src[i...]); same shape, any strides, any dtypes (float16/bf16 included).
  virtual void copy_strided(const TensorView& src, const TensorView& out);
  virtual void fill(const TensorView& out, double value);  // contiguous out

  // ---- elementwise ----
  // y = op(x), contiguous, float dtypes.
  virtual void unary(UnaryOp op, const TensorView& x, const TensorView& y, const UnaryParams& p);
  // gx = gy * d op(x)/dx, given x and (for Exp, Sigmoid, Tanh, Sqrt) the forward result y.
  virtual void unary_backward(UnaryOp op, const TensorView& x, const TensorView& y,
                              const TensorView& gy, const TensorView& gx, const UnaryParams& p);
  // out = a op b; a and b are broadcast to out's shape through their strides (stride 0 on
  // broadcast dims); out is contiguous. Comparisons write Bool.
  virtual void binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out);
  // out = cond ? a : b, all broadcast-strided to out's shape like binary.
  virtual void where(const TensorView& cond, const TensorView& a, const TensorView& b,
                     const TensorView& out);

  // ---- reductions over the middle axis of x viewed as [outer, r, inner] ----
  virtual void reduce(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner,
                      const TensorView& out);
  // Index (int64) of the first max along r; out has outer*inner elements.
  virtual void argmax(const TensorView& x, int64_t outer, int64_t r, int64_t inner,
                      const TensorView& out, bool is_min);

  // ---- linear algebra ----
  // Row-major batched GEMM: C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], op = transpose if
  // trans_*; A is [m,k] (or [k,m] when trans_a), B is [k,n] (or [n,k]), C is [m,n], each
  // contiguous per batch with the given batch strides (0 broadcasts one matrix).
  virtual void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b,
                    double beta, void* c, int64_t stride_c, int64_t batch);
  // Linear layer forward: y[rows, out] = x[rows, in] w[out, in]^T + bias[out], the bias added
  // to every row (bias null: no bias). One float dtype; x, w, bias and y contiguous; rows, in
  // and out read from x's and w's shapes (in may be 0: y = bias, or 0). The default copies the
  // bias into every row of y and runs gemm with beta = 1 (beta = 0 without a bias); a backend
  // may fuse the bias into its GEMM (CUDA: cuBLASLt's bias epilogue).
  virtual void linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias,
                              const TensorView& y);
  // Linear layer weight gradients from the output gradient g[rows, out] and the input
  // x[rows, in]: dw[out, in] = g^T x and, when db is not null, db[out] = sum over rows of g
  // (column sums; 0 when rows == 0). Contiguous, one float dtype. The default runs gemm and
  // reduce(Sum) over [1, rows, out] (fill 0 when rows == 0).
  virtual void linear_weight_grad(const TensorView& g, const TensorView& x, const TensorView& dw,
                                  const TensorView* db);

  // ---- softmax family, rows of length `cols` ----
  virtual void softmax(const TensorView& x, int64_t rows, int64_t cols, const TensorView& y, bool log);
  // gx = softmax backward given y (softmax or log_softmax output) and gy.
  virtual void softmax_backward(const TensorView& y, const TensorView& gy, int64_t rows, int64_t cols,
                                const TensorView& gx, bool log);

  // ---- convolution and pooling, NCHW ----
  virtual void conv2d(const TensorView& x, const TensorView& w, const TensorView* bias,
                      const Conv2dParams& p, const TensorView& y);
  // Any of gx, gw, gb may be null (not needed).
  virtual void conv2d_backward(const TensorView& x, const TensorView& w, const TensorView& gy,
                               const Conv2dParams& p, const TensorView* gx, const TensorView* gw,
                               const TensorView* gb);
  // Max pool writes y and the flat argmax index (int64, within each H*W plane) per output.
  virtual void max_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y,
                          const TensorView& indices);
  virtual void max_pool2d_backward(const TensorView& gy, const TensorView& indices,
                                   const TensorView& gx);
  virtual void avg_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y);
  virtual void avg_pool2d_backward(const TensorView& gy, const Pool2dParams& p, const TensorView& gx);

  // ---- normalization, x viewed as [outer, c, inner] normalized per channel c (batch norm)
  // or [rows, cols] normalized per row (layer norm) ----
  // Batch norm training: computes per-channel mean and inverse std (biased variance) into
  // save_mean/save_invstd and y = (x - mean) * invstd * gamma + beta (gamma/beta may be null).
  virtual void batch_norm_train(const TensorView& x, int64_t outer, int64_t c, int64_t inner,
                                const TensorView* gamma, const TensorView* beta, double eps,
                                const TensorView& y, const TensorView& save_mean,
                                const TensorView& save_invstd);
  // y = (x - mean) * invstd * gamma + beta with given per-channel mean/invstd (eval mode too).
  virtual void batch_norm_apply(const TensorView& x, int64_t outer, int64_t c, int64_t inner,
                                const TensorView& mean, const TensorView& invstd,
                                const TensorView* gamma, const TensorView* beta, const TensorView& y);
  // Training-mode backward (statistics depend on x). gx required; ggamma/gbeta may be null.
  virtual void batch_norm_backward(const TensorView& x, const TensorView& gy, int64_t outer, int64_t c,
                                   int64_t inner, const TensorView& save_mean,
                                   const TensorView& save_invstd, const TensorView* gamma,
                                   const TensorView& gx, const TensorView* ggamma,
                                   const TensorView* gbeta);
  virtual void layer_norm(const TensorView& x, int64_t rows, int64_t cols, const TensorView* gamma,
                          const TensorView* beta, double eps, const TensorView& y,
                          const TensorView& save_mean, const TensorView& save_invstd);
  virtual void layer_norm_backward(const TensorView& x, const TensorView& gy, int64_t rows, int64_t cols,
                                   const TensorView& save_mean, const TensorView& save_invstd,
                                   const TensorView* gamma, const TensorView& gx,
                                   const TensorView* ggamma, const TensorView* gbeta);

  // ---- random, indexing ----
  // Uniform [0,1) (normal=false) or standard normal from Philox (seed, offset); see philox.h.
  virtual void random_fill(const TensorView& out, uint64_t seed, uint64_t offset, bool normal,
                           double a, double b);  // uniform on [a,b) or normal mean a std b
  // Dropout: mask[i] = uniform(i) >= p; y = x * mask / (1 - p). mask is UInt8.
  virtual void dropout(const TensorView& x, double p, uint64_t seed, uint64_t offset,
                       const TensorView& y, const TensorView& mask);
  // Embedding rows: y[i,:] = weight[idx[i],:]; idx int64 (validated by the caller).
  virtual void embedding(const TensorView& weight, const TensorView& idx, const TensorView& y);
  // gw[idx[i],:] += gy[i,:], deterministic (serial over i per row block).
  virtual void embedding_backward(const TensorView& gy, const TensorView& idx, const TensorView& gw);
  // Cross-entropy pieces: per-row loss from log-probabilities logp [rows, classes] and int64
  // targets; rows whose target == ignore_index get loss 0 and weight 0.
  // loss_i = -(1-ls) * logp[i,t_i] - ls/C * sum_c logp[i,c].
  virtual void nll_rows(const TensorView& logp, const TensorView& target, int64_t ignore_index,
                        double label_smoothing, const TensorView& loss, const TensorView& valid);
  // g logp[i,c] = gloss_i * -( (1-ls) [c == t_i] + ls/C ), zero for ignored rows.
  virtual void nll_rows_backward(const TensorView& gloss, const TensorView& target, int64_t ignore_index,
                                 double label_smoothing, const TensorView& glogp);

  // ---- optimizer updates (PyTorch's formulas), contiguous, n elements, float dtypes ----
  // SGD: g' = g + wd*p; buf = first ? g' : momentum*buf + (1-dampening)*g';
  // d = nesterov ? g' + momentum*buf : buf (d = g' without momentum); p -= lr*d.
  virtual void sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf,
                        double lr, double momentum, double dampening, double weight_decay,
                        bool nesterov, bool first_step);
  // Adam (decoupled=false: g += wd*p) / AdamW (decoupled=true: p *= 1 - lr*wd), then
  // m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps),
  // bc_i = 1 - b_i^step.
  virtual void adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                         const TensorView& exp_avg_sq, double lr, double beta1, double beta2,
                         double eps, double weight_decay, bool decoupled, int64_t step);
  // Multi-tensor forms: the same update, with the same hyper-parameters, applied to every
  // tensor i of a list (params[i], grads[i], ...; equal lengths; each i contiguous with one
  // shape; all on one device with one dtype). momentum_bufs is empty when momentum == 0.
  // The default loops over the single-tensor method; a backend may fuse the list into a
  // few launches (the CUDA one does). Results equal the single-tensor method's.
  virtual void sgd_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                              const std::vector<TensorView>& momentum_bufs, double lr, double momentum,
                              double dampening, double weight_decay, bool nesterov, bool first_step);
  virtual void adam_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                               const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs,
                               double lr, double beta1, double beta2, double eps, double weight_decay,
                               bool decoupled, int64_t step);

  // ---- compression: 8-bit codes with a min/max per block (kernels/min_max_uint8_layout.h) ----
  // x float32 [n], packed uint8 [min_max_uint8_bytes(n, block)], both contiguous; block >= 1.
  // Per block: lo, hi = its min and max (among equal extremes, +0 and -0, the first in index
  // order), both NaN when it holds a NaN or an infinity; code = rint((x - lo) * (255 / (hi - lo)))
  // in double (round half to even), clamped to [0, 255]; 0 when hi == lo or the block is flagged.
  virtual void compress_min_max_uint8(const TensorView& x, int64_t block, const TensorView& packed);
  // out float32 [n]: hi where the code is 255, else float(fma(code, (hi - lo) / 255, lo)) in
  // double (one rounding for the product and sum: no compiler may contract it differently); NaN
  // in a flagged block.
  virtual void decompress_min_max_uint8(const TensorView& packed, int64_t block, const TensorView& out);

  // ---- attention (one block: attention_forward, attention_backward) ----
  // q [B, H, Tq, D], k and v [B, H, Tk, D], out [B, H, Tq, D]: any strides on the first three
  // dims, stride 1 on D; one float dtype. out = dropout(softmax(scale q k^T, masked)) v per head;
  // lse [B, H, Tq], contiguous, float32 (float64 for float64 inputs): the logsumexp of each row's
  // masked, scaled scores (before dropout). Needs Tk >= 1, and Tq <= Tk when causal.
  virtual void attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                                 const AttentionParams& p, const TensorView& out, const TensorView& lse);
  // Gradients from gout (out's layout rule) given the forward's inputs, out and lse: the
  // probabilities are recomputed from q, k and lse; gq, gk, gv are written (their shapes are
  // q's, k's, v's; same stride rule), never accumulated into.
  virtual void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                                  const TensorView& out, const TensorView& gout, const TensorView& lse,
                                  const AttentionParams& p, const TensorView& gq, const TensorView& gk,
                                  const TensorView& gv);
};

// The backend for a device type. For CUDA in a build without CUDA, throws DeviceError
// ("Tandem was built without CUDA ...").
Backend& backend_for(DeviceType type);
// Whether float32 GEMMs and convolutions on GPUs may use TF32 tensor cores (10-bit mantissa
// products). Off by default, as in PyTorch 1.12+ for matmul: "32-true" means float32 results;
// the Trainer's --trainer.allow_tf32 turns it on.
void set_allow_tf32(bool allow);
bool allow_tf32();
inline Backend& backend_for(const Device& d) { return backend_for(d.type); }
bool cuda_compiled();

}  // namespace tandem
