// linear: y = x w^T + bias over the last dim of x, through Backend::linear_forward; its backward
// runs gemm for dx and Backend::linear_weight_grad for dw and db.
#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast::should_lower({&x, &weight, &bias}))
    return linear(autocast::lower(x), autocast::lower(weight), autocast::lower(bias));
  if (autocast::should_round_on_host({&x, &weight, &bias})) {
    autocast::Guard off(std::nullopt);
    return autocast::round_to_bfloat16(linear(autocast::round_to_bfloat16(x), autocast::round_to_bfloat16(weight),
                                              autocast::round_to_bfloat16(bias)));
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
  // y = x w^T + bias in every row: Backend::linear_forward (a bias copy and a GEMM, or one
  // GEMM with the bias fused where the backend can).
  const Tensor bd = bias.defined() ? bias.detach().contiguous() : Tensor();
  const TensorView bias_view = bd.defined() ? bd.view_desc() : TensorView{};
  backend_of(x).linear_forward(xd.view_desc(), wd.view_desc(), bd.defined() ? &bias_view : nullptr, y.view_desc());
  y = y.view(out_shape);
  bool gx = ops::wants_grad(x), gw = ops::wants_grad(weight), gb = ops::wants_grad(bias);
  Shape x_shape = x.shape();
  autograd::record("Linear", y, {x, weight, bias}, [xd, wd, x_shape, gx, gw, gb](const Tensor& g) {
    Tensor g2 = g.detach().reshape({-1, wd.size(0)}).contiguous();
    const int64_t rows = g2.size(0), out_f = wd.size(0), in_f = wd.size(1);
    Backend& be = backend_of(g2);
    Tensor dx, dw, db;
    if (gx) {  // dx [rows, in] = g [rows, out] @ w [out, in]
      dx = Tensor::empty({rows, in_f}, g2.dtype(), g2.device());
      be.gemm(g2.dtype(), false, false, rows, in_f, out_f, 1.0, g2.raw_data(), 0, wd.raw_data(), 0, 0.0,
              dx.raw_data(), 0, 1);
      dx = dx.view(x_shape);
    }
    if (gw) {  // dw [out, in] = g^T [out, rows] @ x [rows, in]; db [out] = column sums of g, with it
      dw = Tensor::empty({out_f, in_f}, g2.dtype(), g2.device());
      if (gb) db = Tensor::empty({out_f}, g2.dtype(), g2.device());
      const TensorView db_view = gb ? db.view_desc() : TensorView{};
      be.linear_weight_grad(g2.view_desc(), xd.view_desc(), dw.view_desc(), gb ? &db_view : nullptr);
    } else if (gb) {  // frozen weight: only the bias gradient
      db = sum(g2, {0});
    }
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

}  // namespace tandem
