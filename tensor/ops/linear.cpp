// linear: y = act(x w^T + bias) over the last dim of x (act none, relu or the tanh gelu), through
// Backend::linear_forward; its backward runs Backend::linear_activation_backward for the
// activation (and db with it), gemm for dx and Backend::linear_weight_grad for dw (and db
// without an activation).
#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

namespace {

LinearActivation parse_activation(const std::string& activation) {
  if (activation == "none") return LinearActivation::None;
  if (activation == "relu") return LinearActivation::Relu;
  if (activation == "gelu_tanh") return LinearActivation::GeluTanh;
  throw ValueError("linear: activation must be \"none\", \"relu\" or \"gelu_tanh\", got \"" + activation + "\"");
}

// The activation as its own op, after an unfused linear (the autocast paths).
Tensor activate(const Tensor& z, LinearActivation act) {
  switch (act) {
    case LinearActivation::Relu: return relu(z);
    case LinearActivation::GeluTanh: return gelu(z, "tanh");
    case LinearActivation::None: break;
  }
  return z;
}

const char* node_name(LinearActivation act) {
  switch (act) {
    case LinearActivation::Relu: return "LinearRelu";
    case LinearActivation::GeluTanh: return "LinearGeluTanh";
    case LinearActivation::None: break;
  }
  return "Linear";
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return linear(x, weight, bias, "none"); }

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::string& activation) {
  const LinearActivation act = parse_activation(activation);
  // Under autocast the activation stays its own op: what the lowered or rounded linear returns
  // is what it reads, as without fusion.
  if (autocast::should_lower({&x, &weight, &bias}))
    return activate(linear(autocast::lower(x), autocast::lower(weight), autocast::lower(bias)), act);
  if (autocast::should_round_on_host({&x, &weight, &bias})) {
    const Tensor z = [&] {
      autocast::Guard off(std::nullopt);
      return autocast::round_to_bfloat16(linear(autocast::round_to_bfloat16(x), autocast::round_to_bfloat16(weight),
                                                autocast::round_to_bfloat16(bias)));
    }();
    return activate(z, act);
  }
  ops::check_same_device("linear", x, weight);
  ops::check_same_dtype("linear", x, weight);
  ops::check_float("linear", x);
  if (weight.dim() != 2) throw ShapeError("linear: weight must be [out_features, in_features], got " + weight.shape_str());
  if (x.dim() < 1 || x.size(-1) != weight.size(1))
    throw ShapeError("linear: input " + x.shape_str() + " does not end in in_features = " +
                     std::to_string(weight.size(1)) + " (weight " + weight.shape_str() + ")");
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  ops::check_companion("linear", x, bias, "bias");
  if (bias.defined() && bias.shape() != Shape{out_f})
    throw ShapeError("linear: bias must be [" + std::to_string(out_f) + "], got " + bias.shape_str());
  Tensor xd = x.detach().reshape({-1, in_f}).contiguous();
  Tensor wd = weight.detach().contiguous();
  const int64_t rows = xd.size(0);
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(out_f);
  Tensor y = Tensor::empty({rows, out_f}, x.dtype(), x.device());
  // The tanh GELU's backward reads its input, kept as `pre`; ReLU's reads y.
  const Tensor pre = act == LinearActivation::GeluTanh ? Tensor::empty({rows, out_f}, x.dtype(), x.device()) : Tensor();
  // y = act(x w^T + bias) in every row: Backend::linear_forward (a bias copy, a GEMM and the
  // activation, or one GEMM with them fused where the backend can).
  const Tensor bd = bias.defined() ? bias.detach().contiguous() : Tensor();
  const TensorView bias_view = bd.defined() ? bd.view_desc() : TensorView{};
  const TensorView pre_view = pre.defined() ? pre.view_desc() : TensorView{};
  backend_of(x).linear_forward(xd.view_desc(), wd.view_desc(), bd.defined() ? &bias_view : nullptr, y.view_desc(), act,
                               pre.defined() ? &pre_view : nullptr);
  const Tensor y_saved = act == LinearActivation::Relu ? y : Tensor();
  y = y.view(out_shape);
  bool gx = ops::wants_grad(x), gw = ops::wants_grad(weight), gb = ops::wants_grad(bias);
  Shape x_shape = x.shape();
  auto backward = [xd, wd, x_shape, gx, gw, gb, act, y_saved, pre](const Tensor& g) {
    Tensor g2 = g.detach().reshape({-1, wd.size(0)}).contiguous();
    const int64_t rows = g2.size(0), out_f = wd.size(0), in_f = wd.size(1);
    Backend& be = backend_of(g2);
    Tensor dx, dw, db;
    // dz, the gradient of the affine map: g itself, or g through the activation in one pass that
    // also sums db.
    Tensor dz = g2;
    if (act != LinearActivation::None) {
      dz = Tensor::empty({rows, out_f}, g2.dtype(), g2.device());
      if (gb) db = Tensor::empty({out_f}, g2.dtype(), g2.device());
      const TensorView y_view = y_saved.defined() ? y_saved.view_desc() : TensorView{};
      const TensorView pre_view = pre.defined() ? pre.view_desc() : TensorView{};
      const TensorView db_view = gb ? db.view_desc() : TensorView{};
      be.linear_activation_backward(act, g2.view_desc(), y_view, pre.defined() ? &pre_view : nullptr, dz.view_desc(),
                                    gb ? &db_view : nullptr);
    }
    if (gx) {  // dx [rows, in] = dz [rows, out] @ w [out, in]
      dx = Tensor::empty({rows, in_f}, g2.dtype(), g2.device());
      be.gemm(g2.dtype(), false, false, rows, in_f, out_f, 1.0, dz.raw_data(), 0, wd.raw_data(), 0, 0.0,
              dx.raw_data(), 0, 1);
      dx = dx.view(x_shape);
    }
    const bool db_pending = gb && !db.defined();
    if (gw) {  // dw [out, in] = dz^T [out, rows] @ x [rows, in]; db [out] = column sums of dz, with it
      dw = Tensor::empty({out_f, in_f}, g2.dtype(), g2.device());
      if (db_pending) db = Tensor::empty({out_f}, g2.dtype(), g2.device());
      const TensorView db_view = db_pending ? db.view_desc() : TensorView{};
      be.linear_weight_grad(dz.view_desc(), xd.view_desc(), dw.view_desc(), db_pending ? &db_view : nullptr);
    } else if (db_pending) {  // frozen weight: only the bias gradient
      db = sum(dz, {0});
    }
    return std::vector<Tensor>{dx, dw, db};
  };
  autograd::record(node_name(act), y, {x, weight, bias}, backward);
  return y;
}

}  // namespace tandem
