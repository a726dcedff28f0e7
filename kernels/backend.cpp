// The composed kernels of kernels/backend.h: linear layers by gemm (and reduce), multi-tensor
// optimizer updates by the single-tensor kernel. A backend without a fused version implements
// its list entry by calling these.
#include "kernels/backend.h"

#include <initializer_list>
#include <string>

#include "base/error.h"

namespace tandem {

UnaryOp unary_op_of(LinearActivation act) {
  switch (act) {
    case LinearActivation::Relu: return UnaryOp::Relu;
    case LinearActivation::GeluTanh: return UnaryOp::GeluTanh;
    case LinearActivation::None: break;
  }
  throw ValueError("unary_op_of: LinearActivation::None has no unary op");
}

void linear_forward_by_gemm(Backend& backend, const TensorView& x, const TensorView& w, const TensorView* bias,
                            const TensorView& y, LinearActivation act, const TensorView* pre) {
  const int64_t rows = x.shape[0], in_f = x.shape[1], out_f = w.shape[0];
  const TensorView& affine = pre ? *pre : y;
  double beta = 0.0;
  if (bias) {  // every row = bias: the [out] vector read with row stride 0
    backend.copy_strided(TensorView{bias->data, bias->dtype, {rows, out_f}, {0, 1}}, affine);
    beta = 1.0;
  }
  backend.gemm(x.dtype, false, true, rows, out_f, in_f, 1.0, x.data, 0, w.data, 0, beta, affine.data, 0, 1);
  if (act != LinearActivation::None) backend.unary(unary_op_of(act), affine, y, UnaryParams{});
}

void linear_activation_backward_by_kernels(Backend& backend, LinearActivation act, const TensorView& g,
                                           const TensorView& y, const TensorView* pre, const TensorView& dz,
                                           const TensorView* db) {
  // ReLU's mask from y (> 0 exactly where its input is); the GELU's derivative from its input.
  const TensorView& x = act == LinearActivation::Relu ? y : *pre;
  backend.unary_backward(unary_op_of(act), x, y, g, dz, UnaryParams{});
  if (!db) return;
  const int64_t rows = g.shape[0], out_f = g.shape[1];
  if (rows == 0) backend.fill(*db, 0.0);
  else backend.reduce(ReduceOp::Sum, dz, 1, rows, out_f, *db);
}

void linear_weight_grad_by_gemm(Backend& backend, const TensorView& g, const TensorView& x, const TensorView& dw,
                                const TensorView* db) {
  const int64_t rows = g.shape[0], out_f = g.shape[1], in_f = x.shape[1];
  backend.gemm(g.dtype, true, false, out_f, in_f, rows, 1.0, g.data, 0, x.data, 0, 0.0, dw.data, 0, 1);
  if (!db) return;
  if (rows == 0) backend.fill(*db, 0.0);  // an empty sum
  else backend.reduce(ReduceOp::Sum, g, 1, rows, out_f, *db);
}

namespace {
void check_lists(const char* kernel, size_t n, std::initializer_list<size_t> sizes) {
  for (size_t s : sizes)
    if (s != n)
      throw ShapeError(std::string(kernel) + ": every list must have one entry per parameter (" +
                       std::to_string(n) + "), got a list of " + std::to_string(s));
}
}  // namespace

void sgd_step_each(Backend& backend, const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                   const std::vector<TensorView>& momentum_bufs, double lr, double momentum, double dampening,
                   double weight_decay, bool nesterov, bool first_step) {
  check_lists("sgd_step_multi", params.size(), {grads.size()});
  if (!momentum_bufs.empty()) check_lists("sgd_step_multi", params.size(), {momentum_bufs.size()});
  for (size_t i = 0; i < params.size(); ++i)
    backend.sgd_step(params[i], grads[i], momentum_bufs.empty() ? nullptr : &momentum_bufs[i], lr, momentum,
                     dampening, weight_decay, nesterov, first_step);
}

void adam_step_each(Backend& backend, const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                    const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs, double lr,
                    double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) {
  check_lists("adam_step_multi", params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size()});
  for (size_t i = 0; i < params.size(); ++i)
    backend.adam_step(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], lr, beta1, beta2, eps, weight_decay,
                      decoupled, step);
}

}  // namespace tandem
