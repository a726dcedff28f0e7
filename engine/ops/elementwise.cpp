// Elementwise front ends: binary arithmetic with broadcasting, unary math, comparisons, where,
// masked_fill and cast. Each backward sits under its forward.
#include <cmath>

#include "engine/ops/autocast.h"
#include "engine/ops/op_utils.h"

namespace tandem {

using ops::backend_of;
using ops::raw;
using ops::wants_grad;

namespace {

// out = a op b with broadcasting; both operands share device and dtype.
Tensor binary_raw(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  ops::check_same_device(name, a, b);
  ops::check_same_dtype(name, a, b);
  const Shape shape = ops::broadcast_shapes(name, a.shape(), b.shape());
  const bool compare = op >= BinaryOp::Eq;
  Tensor out = Tensor::empty(shape, compare ? DType::Bool : a.dtype(), a.device());
  backend_of(a).binary(op, a.detach().expand(shape).view_desc(), b.detach().expand(shape).view_desc(),
                       out.view_desc());
  return out;
}

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

Tensor add(const Tensor& a, const Tensor& b) {
  if (auto p = autocast::promoted(a, b)) return add(p->first, p->second);
  Tensor out = binary_raw(BinaryOp::Add, "add", a, b);
  Shape sa = a.shape(), sb = b.shape();
  autograd::record("Add", out, {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to_shape(g, sa), sum_to_shape(g, sb)};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (auto p = autocast::promoted(a, b)) return sub(p->first, p->second);
  Tensor out = binary_raw(BinaryOp::Sub, "sub", a, b);
  Shape sa = a.shape(), sb = b.shape();
  autograd::record("Sub", out, {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to_shape(g, sa), sum_to_shape(neg(g), sb)};
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (auto p = autocast::promoted(a, b)) return mul(p->first, p->second);
  Tensor out = binary_raw(BinaryOp::Mul, "mul", a, b);
  Tensor as = a.detach(), bs = b.detach();
  bool ga = wants_grad(a), gb = wants_grad(b);
  autograd::record("Mul", out, {a, b}, [as, bs, ga, gb](const Tensor& g) {
    return std::vector<Tensor>{ga ? sum_to_shape(g * bs, as.shape()) : Tensor(),
                               gb ? sum_to_shape(g * as, bs.shape()) : Tensor()};
  });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (auto p = autocast::promoted(a, b)) return div(p->first, p->second);
  Tensor out = binary_raw(BinaryOp::Div, "div", a, b);
  Tensor as = a.detach(), bs = b.detach(), os = out.detach();
  bool ga = wants_grad(a), gb = wants_grad(b);
  autograd::record("Div", out, {a, b}, [as, bs, os, ga, gb](const Tensor& g) {
    return std::vector<Tensor>{ga ? sum_to_shape(g / bs, as.shape()) : Tensor(),
                               gb ? sum_to_shape(neg(g * os / bs), bs.shape()) : Tensor()};
  });
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::Pow, "pow", a, b);
  Tensor as = a.detach(), bs = b.detach(), os = out.detach();
  bool ga = wants_grad(a), gb = wants_grad(b);
  autograd::record("Pow", out, {a, b}, [as, bs, os, ga, gb](const Tensor& g) {
    return std::vector<Tensor>{ga ? sum_to_shape(g * bs * pow(as, bs - 1.0), as.shape()) : Tensor(),
                               gb ? sum_to_shape(g * os * log(as), bs.shape()) : Tensor()};
  });
  return out;
}

namespace {
// maximum/minimum: the gradient goes to the selected operand; ties split it evenly (PyTorch).
Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(op, name, a, b);
  Tensor as = a.detach(), bs = b.detach();
  bool is_max = op == BinaryOp::Maximum;
  autograd::record(name, out, {a, b}, [as, bs, is_max](const Tensor& g) {
    Tensor win_a = cast(is_max ? gt(as, bs) : lt(as, bs), g.dtype());
    Tensor tie = cast(eq(as, bs), g.dtype());
    Tensor share_a = win_a + tie * 0.5;
    Tensor share_b = (1.0 - win_a) - tie * 0.5;
    return std::vector<Tensor>{sum_to_shape(g * share_a, as.shape()), sum_to_shape(g * share_b, bs.shape())};
  });
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::Maximum, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::Minimum, "minimum", a, b); }

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

Tensor eq(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::Eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::Ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::Lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::Le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::Gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::Ge, "ge", a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (cond.dtype() != DType::Bool)
    throw DTypeError(std::string("where: condition must be bool, got ") + dtype_name(cond.dtype()));
  ops::check_same_device("where", cond, a);
  ops::check_same_device("where", a, b);
  ops::check_same_dtype("where", a, b);
  const Shape shape = ops::broadcast_shapes("where", ops::broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  backend_of(a).where(cond.detach().expand(shape).view_desc(), a.detach().expand(shape).view_desc(),
                      b.detach().expand(shape).view_desc(), out.view_desc());
  Tensor cs = cond.detach();
  Shape sa = a.shape(), sb = b.shape();
  autograd::record("Where", out, {a, b}, [cs, sa, sb](const Tensor& g) {
    Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
    return std::vector<Tensor>{sum_to_shape(where(cs, g, zero), sa), sum_to_shape(where(cs, zero, g), sb)};
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return where(mask, Tensor::full({}, value, x.dtype(), x.device()), x);
}

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  backend_of(x).copy_strided(x.view_desc(), out.view_desc());
  if (is_floating(dtype) && is_floating(x.dtype())) {
    DType from = x.dtype();
    autograd::record("Cast", out, {x}, [from](const Tensor& g) { return std::vector<Tensor>{cast(g, from)}; });
  }
  return out;
}

}  // namespace tandem
