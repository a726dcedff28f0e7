// batch_norm and layer_norm front ends.
#include <cmath>

#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

namespace {
Tensor per_channel_view(const Tensor& v, int ndim) {  // [C] -> [1, C, 1, ...]
  Shape s(size_t(ndim), 1);
  s[1] = v.numel();
  return v.reshape(s);
}
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  if (autocast::should_raise(x))
    return batch_norm(autocast::raise(x), running_mean, running_var, weight, bias, training, momentum, eps);
  ops::check_float("batch_norm", x);
  if (x.dim() < 2) throw ShapeError("batch_norm: input must be [N, C, ...], got " + x.shape_str());
  const int64_t C = x.size(1), N = x.size(0);
  const int64_t inner = x.numel() / std::max<int64_t>(N * C, 1);
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias})
    if (t->defined() && t->shape() != Shape{C})
      throw ShapeError("batch_norm: per-channel tensors must be [" + std::to_string(C) + "], got " + t->shape_str());
  ops::check_companion("batch_norm", x, running_mean, "running_mean");
  ops::check_companion("batch_norm", x, running_var, "running_var");
  ops::check_companion("batch_norm", x, weight, "weight");
  ops::check_companion("batch_norm", x, bias, "bias");
  const bool use_batch_stats = training || !running_mean.defined() || !running_var.defined();
  if (!use_batch_stats) {
    // Eval: y = (x - running_mean) * invstd * weight + bias, differentiable through ordinary ops.
    Tensor invstd;
    {
      NoGradGuard no_grad;
      invstd = 1.0 / sqrt(running_var.detach() + eps);
    }
    Tensor y = (x - per_channel_view(running_mean.detach(), x.dim())) * per_channel_view(invstd, x.dim());
    if (weight.defined()) y = y * per_channel_view(weight, x.dim());
    if (bias.defined()) y = y + per_channel_view(bias, x.dim());
    return y;
  }
  const int64_t M = N * inner;
  if (M <= 1)
    throw ShapeError("batch_norm: expected more than 1 value per channel when training, got input " + x.shape_str());
  Tensor xd = ops::raw(x);
  Tensor wd = weight.defined() ? ops::raw(weight) : Tensor(), bd = bias.defined() ? ops::raw(bias) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({C}, x.dtype(), x.device()), invstd = Tensor::empty({C}, x.dtype(), x.device());
  TensorView wv = wd.defined() ? wd.view_desc() : TensorView{}, bv = bd.defined() ? bd.view_desc() : TensorView{};
  backend_of(x).batch_norm_train(xd.view_desc(), N, C, inner, wd.defined() ? &wv : nullptr,
                                 bd.defined() ? &bv : nullptr, eps, y.view_desc(), mean.view_desc(),
                                 invstd.view_desc());
  if (training && running_mean.defined() && running_var.defined()) {
    NoGradGuard no_grad;  // running = (1 - m) running + m batch, with the unbiased batch variance
    Tensor var_unbiased = (1.0 / (invstd * invstd) - eps) * (double(M) / double(M - 1));
    Tensor rm = running_mean, rv = running_var;
    rm.copy_(rm.detach() * (1.0 - momentum) + mean * momentum);
    rv.copy_(rv.detach() * (1.0 - momentum) + var_unbiased.to(rv.dtype()) * momentum);
  }
  bool gw = ops::wants_grad(weight), gb = ops::wants_grad(bias);
  autograd::record("BatchNorm", y, {x, weight, bias}, [xd, wd, mean, invstd, N, C, inner, gw, gb](const Tensor& g) {
    Tensor gc = ops::raw(g);
    Tensor dx = Tensor::empty(xd.shape(), xd.dtype(), xd.device());
    Tensor dw = gw ? Tensor::empty({C}, xd.dtype(), xd.device()) : Tensor();
    Tensor db = gb ? Tensor::empty({C}, xd.dtype(), xd.device()) : Tensor();
    TensorView wv = wd.defined() ? wd.view_desc() : TensorView{};
    TensorView vw = gw ? dw.view_desc() : TensorView{}, vb = gb ? db.view_desc() : TensorView{};
    backend_of(gc).batch_norm_backward(xd.view_desc(), gc.view_desc(), N, C, inner, mean.view_desc(),
                                       invstd.view_desc(), wd.defined() ? &wv : nullptr, dx.view_desc(),
                                       gw ? &vw : nullptr, gb ? &vb : nullptr);
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (autocast::should_raise(x)) return layer_norm(autocast::raise(x), normalized_shape, weight, bias, eps);
  ops::check_float("layer_norm", x);
  const int nd = int(normalized_shape.size());
  bool ok = nd >= 1 && nd <= x.dim();
  for (int i = 0; ok && i < nd; ++i) ok = x.shape()[size_t(x.dim() - nd + i)] == normalized_shape[size_t(i)];
  if (!ok)
    throw ShapeError("layer_norm: normalized_shape " + shape_to_string(normalized_shape) +
                     " must match the trailing dims of input " + x.shape_str());
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && t->shape() != normalized_shape)
      throw ShapeError("layer_norm: weight and bias must have shape " + shape_to_string(normalized_shape) + ", got " +
                       t->shape_str());
  ops::check_companion("layer_norm", x, weight, "weight");
  ops::check_companion("layer_norm", x, bias, "bias");
  const int64_t cols = shape_numel(normalized_shape), rows = cols ? x.numel() / cols : 0;
  Tensor xd = ops::raw(x);
  Tensor wd = weight.defined() ? ops::raw(weight) : Tensor(), bd = bias.defined() ? ops::raw(bias) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({rows}, x.dtype(), x.device()), invstd = Tensor::empty({rows}, x.dtype(), x.device());
  TensorView wv = wd.defined() ? wd.view_desc() : TensorView{}, bv = bd.defined() ? bd.view_desc() : TensorView{};
  backend_of(x).layer_norm(xd.view_desc(), rows, cols, wd.defined() ? &wv : nullptr, bd.defined() ? &bv : nullptr,
                           eps, y.view_desc(), mean.view_desc(), invstd.view_desc());
  bool gw = ops::wants_grad(weight), gb = ops::wants_grad(bias);
  Shape wshape = normalized_shape;
  autograd::record("LayerNorm", y, {x, weight, bias}, [xd, wd, mean, invstd, rows, cols, gw, gb, wshape](const Tensor& g) {
    Tensor gc = ops::raw(g);
    Tensor dx = Tensor::empty(xd.shape(), xd.dtype(), xd.device());
    Tensor dw = gw ? Tensor::empty(wshape, xd.dtype(), xd.device()) : Tensor();
    Tensor db = gb ? Tensor::empty(wshape, xd.dtype(), xd.device()) : Tensor();
    TensorView wv = wd.defined() ? wd.view_desc() : TensorView{};
    TensorView vw = gw ? dw.view_desc() : TensorView{}, vb = gb ? db.view_desc() : TensorView{};
    backend_of(gc).layer_norm_backward(xd.view_desc(), gc.view_desc(), rows, cols, mean.view_desc(),
                                       invstd.view_desc(), wd.defined() ? &wv : nullptr, dx.view_desc(),
                                       gw ? &vw : nullptr, gb ? &vb : nullptr);
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

}  // namespace tandem
