// conv2d, max_pool2d and avg_pool2d front ends (NCHW). Shape rules follow PyTorch:
// out = floor((in + 2*pad - dilation*(kernel-1) - 1) / stride) + 1.
#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

namespace {

std::vector<int64_t> pair_arg(const char* op, const char* what, std::vector<int64_t> v, int64_t min_value) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    throw ValueError(std::string(op) + ": " + what + " must have 1 or 2 values, got " + std::to_string(v.size()));
  for (int64_t x : v)
    if (x < min_value)
      throw ValueError(std::string(op) + ": " + what + " must be >= " + std::to_string(min_value) + ", got " +
                       std::to_string(x));
  return v;
}

int64_t out_size(const char* op, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t o = (in + 2 * p - d * (k - 1) - 1) / s + 1;
  if (in + 2 * p - d * (k - 1) - 1 < 0 || o <= 0)
    throw ShapeError(std::string(op) + ": input size " + std::to_string(in) + " (padded " + std::to_string(in + 2 * p) +
                     ") is smaller than the kernel extent " + std::to_string(d * (k - 1) + 1));
  return o;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  if (autocast::should_lower({&x, &weight, &bias}))
    return conv2d(autocast::lower(x), autocast::lower(weight), autocast::lower(bias), stride, padding, dilation, groups);
  if (autocast::should_round_on_host({&x, &weight, &bias})) {
    autocast::Guard off(std::nullopt);
    return autocast::round_to_bfloat16(conv2d(autocast::round_to_bfloat16(x), autocast::round_to_bfloat16(weight),
                                              autocast::round_to_bfloat16(bias), stride, padding, dilation, groups));
  }
  ops::check_float("conv2d", x);
  ops::check_same_device("conv2d", x, weight);
  ops::check_same_dtype("conv2d", x, weight);
  ops::check_dim("conv2d", x, 4, "[N, C, H, W]");
  ops::check_dim("conv2d", weight, 4, "weight [out_channels, in_channels, kH, kW]");
  if (groups != 1) throw ValueError("conv2d: groups = " + std::to_string(groups) + " is not supported; only groups = 1");
  if (x.size(1) != weight.size(1))
    throw ShapeError("conv2d: input has " + std::to_string(x.size(1)) + " channels but weight " + weight.shape_str() +
                     " expects " + std::to_string(weight.size(1)));
  if (bias.defined() && bias.shape() != Shape{weight.size(0)})
    throw ShapeError("conv2d: bias must be [" + std::to_string(weight.size(0)) + "], got " + bias.shape_str());
  ops::check_companion("conv2d", x, bias, "bias");
  stride = pair_arg("conv2d", "stride", stride, 1);
  padding = pair_arg("conv2d", "padding", padding, 0);
  dilation = pair_arg("conv2d", "dilation", dilation, 1);
  Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]};
  const int64_t OH = out_size("conv2d", x.size(2), weight.size(2), p.stride_h, p.pad_h, p.dil_h);
  const int64_t OW = out_size("conv2d", x.size(3), weight.size(3), p.stride_w, p.pad_w, p.dil_w);
  Tensor xd = ops::raw(x), wd = ops::raw(weight), bd = bias.defined() ? ops::raw(bias) : Tensor();
  Tensor y = Tensor::empty({x.size(0), weight.size(0), OH, OW}, x.dtype(), x.device());
  TensorView bv = bd.defined() ? bd.view_desc() : TensorView{};
  backend_of(x).conv2d(xd.view_desc(), wd.view_desc(), bd.defined() ? &bv : nullptr, p, y.view_desc());
  bool gx = ops::wants_grad(x), gw = ops::wants_grad(weight), gb = ops::wants_grad(bias);
  autograd::record("Conv2d", y, {x, weight, bias}, [xd, wd, p, gx, gw, gb](const Tensor& g) {
    Tensor gc = ops::raw(g);
    Tensor dx = gx ? Tensor::empty(xd.shape(), xd.dtype(), xd.device()) : Tensor();
    Tensor dw = gw ? Tensor::empty(wd.shape(), wd.dtype(), wd.device()) : Tensor();
    Tensor db = gb ? Tensor::empty({wd.size(0)}, wd.dtype(), wd.device()) : Tensor();
    TensorView vx = gx ? dx.view_desc() : TensorView{}, vw = gw ? dw.view_desc() : TensorView{},
               vb = gb ? db.view_desc() : TensorView{};
    backend_of(gc).conv2d_backward(xd.view_desc(), wd.view_desc(), gc.view_desc(), p, gx ? &vx : nullptr,
                                   gw ? &vw : nullptr, gb ? &vb : nullptr);
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

namespace {

Pool2dParams pool_params(const char* op, const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                         std::vector<int64_t> padding) {
  ops::check_float(op, x);
  ops::check_dim(op, x, 4, "[N, C, H, W]");
  kernel = pair_arg(op, "kernel_size", kernel, 1);
  stride = stride.empty() ? kernel : pair_arg(op, "stride", stride, 1);
  padding = pair_arg(op, "padding", padding, 0);
  if (padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1])
    throw ValueError(std::string(op) + ": padding must be at most half the kernel size, got padding " +
                     std::to_string(padding[0]) + "x" + std::to_string(padding[1]) + " for kernel " +
                     std::to_string(kernel[0]) + "x" + std::to_string(kernel[1]));
  return {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], true};
}

Shape pool_out_shape(const char* op, const Tensor& x, const Pool2dParams& p) {
  return {x.size(0), x.size(1), out_size(op, x.size(2), p.kernel_h, p.stride_h, p.pad_h, 1),
          out_size(op, x.size(3), p.kernel_w, p.stride_w, p.pad_w, 1)};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding) {
  Pool2dParams p = pool_params("max_pool2d", x, kernel, stride, padding);
  Shape out_shape = pool_out_shape("max_pool2d", x, p);
  Tensor xd = ops::raw(x);
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor idx = Tensor::empty(out_shape, DType::Int64, x.device());
  backend_of(x).max_pool2d(xd.view_desc(), p, y.view_desc(), idx.view_desc());
  Shape in_shape = x.shape();
  autograd::record("MaxPool2d", y, {x}, [idx, in_shape](const Tensor& g) {
    Tensor gc = ops::raw(g);
    Tensor gx = Tensor::empty(in_shape, g.dtype(), g.device());
    backend_of(gc).max_pool2d_backward(gc.view_desc(), idx.view_desc(), gx.view_desc());
    return std::vector<Tensor>{gx};
  });
  return y;
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool count_include_pad) {
  Pool2dParams p = pool_params("avg_pool2d", x, kernel, stride, padding);
  p.count_include_pad = count_include_pad;
  Tensor xd = ops::raw(x);
  Tensor y = Tensor::empty(pool_out_shape("avg_pool2d", x, p), x.dtype(), x.device());
  backend_of(x).avg_pool2d(xd.view_desc(), p, y.view_desc());
  Shape in_shape = x.shape();
  autograd::record("AvgPool2d", y, {x}, [p, in_shape](const Tensor& g) {
    Tensor gc = ops::raw(g);
    Tensor gx = Tensor::empty(in_shape, g.dtype(), g.device());
    backend_of(gc).avg_pool2d_backward(gc.view_desc(), p, gx.view_desc());
    return std::vector<Tensor>{gx};
  });
  return y;
}

}  // namespace tandem
