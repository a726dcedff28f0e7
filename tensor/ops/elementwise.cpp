// Unary elementwise front ends: math (neg, exp, log, sqrt, abs, relu, sigmoid, tanh, gelu,
// clamp, pow by a scalar, affine, a scalar divided by a tensor). Each backward sits under its
// forward. Binary ops, comparisons and where: elementwise_binary.cpp.
#include <cmath>

#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;
using ops::raw;

namespace {

Tensor unary_raw(UnaryOp op, const char* name, const Tensor& x, const UnaryParams& p) {
  ops::check_float(name, x);
  Tensor xc = raw(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend_of(x).unary(op, xc.view_desc(), y.view_desc(), p);
  return y;
}

// y = op(x) with the backward kernel of op; saves x and (for ops whose derivative uses it) y.
Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, const UnaryParams& p = {}) {
  Tensor y = unary_raw(op, name, x, p);
  const bool save_y = op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Sigmoid || op == UnaryOp::Tanh;
  Tensor xs = raw(x), ys = save_y ? y.detach() : Tensor();
  autograd::record(name, y, {x}, [op, p, xs, ys](const Tensor& g) {
    Tensor gc = raw(g);
    Tensor gx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
    backend_of(xs).unary_backward(op, xs.view_desc(), ys.defined() ? ys.view_desc() : TensorView{},
                                  gc.view_desc(), gx.view_desc(), p);
    return std::vector<Tensor>{gx};
  });
  return y;
}

}  // namespace

Tensor affine(const Tensor& x, double alpha, double beta) {
  UnaryParams p;
  p.alpha = alpha;
  p.beta = beta;
  return unary_op(UnaryOp::Affine, "affine", x, p);
}

Tensor operator/(double s, const Tensor& a) {
  UnaryParams p;
  p.alpha = s;
  return unary_op(UnaryOp::Reciprocal, "reciprocal", a, p);
}

Tensor pow(const Tensor& a, double exponent) {
  UnaryParams p;
  p.scalar = exponent;
  return unary_op(UnaryOp::Pow, "pow", a, p);
}

Tensor neg(const Tensor& x) { return unary_op(UnaryOp::Neg, "neg", x); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::Exp, "exp", x); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::Log, "log", x); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::Sqrt, "sqrt", x); }
Tensor abs(const Tensor& x) { return unary_op(UnaryOp::Abs, "abs", x); }
Tensor relu(const Tensor& x) { return unary_op(UnaryOp::Relu, "relu", x); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::Sigmoid, "sigmoid", x); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::Tanh, "tanh", x); }

Tensor clamp(const Tensor& x, double lo, double hi) {
  if (lo > hi) throw ValueError("clamp: min " + std::to_string(lo) + " is greater than max " + std::to_string(hi));
  UnaryParams p;
  p.lo = lo;
  p.hi = hi;
  return unary_op(UnaryOp::Clamp, "clamp", x, p);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return unary_op(UnaryOp::Gelu, "gelu", x);
  if (approximate == "tanh") return unary_op(UnaryOp::GeluTanh, "gelu", x);
  throw ValueError("gelu: approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

}  // namespace tandem
