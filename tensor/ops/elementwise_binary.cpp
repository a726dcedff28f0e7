// Binary elementwise front ends: arithmetic with broadcasting (add, sub, mul, div, pow,
// maximum, minimum), comparisons, where and masked_fill. Each backward sits under its forward.
#include <cmath>

#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;
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

}  // namespace tandem
