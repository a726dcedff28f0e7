// Default kernel methods: each throws a DeviceError naming the kernel and the backend, so a
// partially implemented backend (the CUDA one while it grows) fails loudly, never silently.
#include "kernels/backend.h"

#include <initializer_list>
#include <string>

#include "engine/core/error.h"

namespace tandem {

namespace {
[[noreturn]] void unsupported(const Backend& b, const char* kernel) {
  throw DeviceError(std::string(kernel) + " is not implemented on the " + b.name() +
                    " backend yet; run this op on the CPU");
}
}  // namespace

void Backend::copy_strided(const TensorView& src, const TensorView& out) { unsupported(*this, "copy_strided"); }
void Backend::fill(const TensorView& out, double value) { unsupported(*this, "fill"); }
void Backend::unary(UnaryOp op, const TensorView& x, const TensorView& y, const UnaryParams& p) { unsupported(*this, "unary"); }
void Backend::unary_backward(UnaryOp op, const TensorView& x, const TensorView& y, const TensorView& gy, const TensorView& gx, const UnaryParams& p) { unsupported(*this, "unary_backward"); }
void Backend::binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) { unsupported(*this, "binary"); }
void Backend::where(const TensorView& cond, const TensorView& a, const TensorView& b, const TensorView& out) { unsupported(*this, "where"); }
void Backend::reduce(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out) { unsupported(*this, "reduce"); }
void Backend::argmax(const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out, bool is_min) { unsupported(*this, "argmax"); }
void Backend::gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c, int64_t stride_c, int64_t batch) { unsupported(*this, "gemm"); }
void Backend::softmax(const TensorView& x, int64_t rows, int64_t cols, const TensorView& y, bool log) { unsupported(*this, "softmax"); }
void Backend::softmax_backward(const TensorView& y, const TensorView& gy, int64_t rows, int64_t cols, const TensorView& gx, bool log) { unsupported(*this, "softmax_backward"); }
void Backend::conv2d(const TensorView& x, const TensorView& w, const TensorView* bias, const Conv2dParams& p, const TensorView& y) { unsupported(*this, "conv2d"); }
void Backend::conv2d_backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p, const TensorView* gx, const TensorView* gw, const TensorView* gb) { unsupported(*this, "conv2d_backward"); }
void Backend::max_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y, const TensorView& indices) { unsupported(*this, "max_pool2d"); }
void Backend::max_pool2d_backward(const TensorView& gy, const TensorView& indices, const TensorView& gx) { unsupported(*this, "max_pool2d_backward"); }
void Backend::avg_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y) { unsupported(*this, "avg_pool2d"); }
void Backend::avg_pool2d_backward(const TensorView& gy, const Pool2dParams& p, const TensorView& gx) { unsupported(*this, "avg_pool2d_backward"); }
void Backend::batch_norm_train(const TensorView& x, int64_t outer, int64_t c, int64_t inner, const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean, const TensorView& save_invstd) { unsupported(*this, "batch_norm_train"); }
void Backend::batch_norm_apply(const TensorView& x, int64_t outer, int64_t c, int64_t inner, const TensorView& mean, const TensorView& invstd, const TensorView* gamma, const TensorView* beta, const TensorView& y) { unsupported(*this, "batch_norm_apply"); }
void Backend::batch_norm_backward(const TensorView& x, const TensorView& gy, int64_t outer, int64_t c, int64_t inner, const TensorView& save_mean, const TensorView& save_invstd, const TensorView* gamma, const TensorView& gx, const TensorView* ggamma, const TensorView* gbeta) { unsupported(*this, "batch_norm_backward"); }
void Backend::layer_norm(const TensorView& x, int64_t rows, int64_t cols, const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean, const TensorView& save_invstd) { unsupported(*this, "layer_norm"); }
void Backend::layer_norm_backward(const TensorView& x, const TensorView& gy, int64_t rows, int64_t cols, const TensorView& save_mean, const TensorView& save_invstd, const TensorView* gamma, const TensorView& gx, const TensorView* ggamma, const TensorView* gbeta) { unsupported(*this, "layer_norm_backward"); }
void Backend::random_fill(const TensorView& out, uint64_t seed, uint64_t offset, bool normal, double a, double b) { unsupported(*this, "random_fill"); }
void Backend::dropout(const TensorView& x, double p, uint64_t seed, uint64_t offset, const TensorView& y, const TensorView& mask) { unsupported(*this, "dropout"); }
void Backend::embedding(const TensorView& weight, const TensorView& idx, const TensorView& y) { unsupported(*this, "embedding"); }
void Backend::embedding_backward(const TensorView& gy, const TensorView& idx, const TensorView& gw) { unsupported(*this, "embedding_backward"); }
void Backend::nll_rows(const TensorView& logp, const TensorView& target, int64_t ignore_index, double label_smoothing, const TensorView& loss, const TensorView& valid) { unsupported(*this, "nll_rows"); }
void Backend::nll_rows_backward(const TensorView& gloss, const TensorView& target, int64_t ignore_index, double label_smoothing, const TensorView& glogp) { unsupported(*this, "nll_rows_backward"); }
void Backend::sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf, double lr, double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) { unsupported(*this, "sgd_step"); }
void Backend::adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg, const TensorView& exp_avg_sq, double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) { unsupported(*this, "adam_step"); }
void Backend::compress_min_max_uint8(const TensorView& x, int64_t block, const TensorView& packed) { unsupported(*this, "compress_min_max_uint8"); }
void Backend::decompress_min_max_uint8(const TensorView& packed, int64_t block, const TensorView& out) { unsupported(*this, "decompress_min_max_uint8"); }
// attention
void Backend::attention_forward(const TensorView& q, const TensorView& k, const TensorView& v, const AttentionParams& p, const TensorView& out, const TensorView& lse) { unsupported(*this, "attention_forward"); }
void Backend::attention_backward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out, const TensorView& gout, const TensorView& lse, const AttentionParams& p, const TensorView& gq, const TensorView& gk, const TensorView& gv) { unsupported(*this, "attention_backward"); }

// Linear defaults: exactly what the op front end did before these methods existed (a bias
// copied into every row, then a GEMM adding x w^T; dw by GEMM, db by the Sum reduction), so
// a backend without a fused version computes the same bits as before.
void Backend::linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y) {
  const int64_t rows = x.shape[0], in_f = x.shape[1], out_f = w.shape[0];
  double beta = 0.0;
  if (bias) {  // every row of y = bias: the [out] vector read with row stride 0
    copy_strided(TensorView{bias->data, bias->dtype, {rows, out_f}, {0, 1}}, y);
    beta = 1.0;
  }
  gemm(x.dtype, false, true, rows, out_f, in_f, 1.0, x.data, 0, w.data, 0, beta, y.data, 0, 1);
}

void Backend::linear_weight_grad(const TensorView& g, const TensorView& x, const TensorView& dw, const TensorView* db) {
  const int64_t rows = g.shape[0], out_f = g.shape[1], in_f = x.shape[1];
  gemm(g.dtype, true, false, out_f, in_f, rows, 1.0, g.data, 0, x.data, 0, 0.0, dw.data, 0, 1);
  if (!db) return;
  if (rows == 0) fill(*db, 0.0);  // an empty sum
  else reduce(ReduceOp::Sum, g, 1, rows, out_f, *db);
}

// Multi-tensor defaults: one single-tensor update per list entry, in list order.
namespace {
void check_lists(const char* kernel, size_t n, std::initializer_list<size_t> sizes) {
  for (size_t s : sizes)
    if (s != n)
      throw ShapeError(std::string(kernel) + ": every list must have one entry per parameter (" +
                       std::to_string(n) + "), got a list of " + std::to_string(s));
}
}  // namespace

void Backend::sgd_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                             const std::vector<TensorView>& momentum_bufs, double lr, double momentum,
                             double dampening, double weight_decay, bool nesterov, bool first_step) {
  check_lists("sgd_step_multi", params.size(), {grads.size()});
  if (!momentum_bufs.empty()) check_lists("sgd_step_multi", params.size(), {momentum_bufs.size()});
  for (size_t i = 0; i < params.size(); ++i)
    sgd_step(params[i], grads[i], momentum_bufs.empty() ? nullptr : &momentum_bufs[i], lr, momentum, dampening,
             weight_decay, nesterov, first_step);
}

void Backend::adam_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                              const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs,
                              double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                              int64_t step) {
  check_lists("adam_step_multi", params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size()});
  for (size_t i = 0; i < params.size(); ++i)
    adam_step(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], lr, beta1, beta2, eps, weight_decay, decoupled, step);
}

}  // namespace tandem
