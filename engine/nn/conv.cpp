#include "engine/nn/conv.h"

#include <cmath>

#include "engine/nn/init.h"
#include "tensor/ops/ops.h"

namespace tandem::nn {

namespace {
void check_pair(const char* module, const char* what, const Size2& s, int64_t min) {
  if (s.h < min || s.w < min)
    throw ValueError(std::string(module) + ": " + what + " must be >= " + std::to_string(min) + ", got " + s.str());
}
// Pooling windows as PyTorch accepts them: positive kernel and stride, padding >= 0 and at
// most half the kernel.
void check_pool_args(const char* module, const Size2& kernel, const Size2& stride, const Size2& padding) {
  check_pair(module, "kernel_size", kernel, 1);
  check_pair(module, "stride", stride, 1);
  check_pair(module, "padding", padding, 0);
  if (2 * padding.h > kernel.h || 2 * padding.w > kernel.w)
    throw ValueError(std::string(module) + ": padding " + padding.str() + " must be at most half of kernel_size " +
                     kernel.str());
}
void check_nchw(const char* module, const Tensor& x) {
  if (x.dim() != 4) throw ShapeError(std::string(module) + ": input must be [N, C, H, W], got " + x.shape_str());
}
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Size2 s, Size2 p, Size2 d, int64_t g, bool with_bias,
               DType dtype, Device device)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), dilation(d), groups(g) {
  if (in <= 0 || out <= 0)
    throw ValueError("Conv2d: in_channels and out_channels must be > 0, got " + std::to_string(in) + " and " +
                     std::to_string(out));
  check_pair("Conv2d", "kernel_size", k, 1);
  check_pair("Conv2d", "stride", s, 1);
  check_pair("Conv2d", "padding", p, 0);
  check_pair("Conv2d", "dilation", d, 1);
  if (g != 1) throw ValueError("Conv2d: groups = " + std::to_string(g) + " is not supported yet; only groups = 1");
  weight = register_parameter("weight", Tensor::empty({out, in / g, k.h, k.w}, dtype, device));
  if (with_bias) bias = register_parameter("bias", Tensor::empty({out}, dtype, device));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = 1.0 / std::sqrt(double(fan_in));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  check_nchw("Conv2d", x);
  if (x.size(1) != in_channels)
    throw ShapeError("Conv2d: expected " + std::to_string(in_channels) + " input channels, got input " + x.shape_str());
  return conv2d(x, weight, bias, stride.vec(), padding.vec(), dilation.vec(), groups);
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.str() + ", stride=" + stride.str();
  if (padding.h || padding.w) s += ", padding=" + padding.str();
  if (dilation.h != 1 || dilation.w != 1) s += ", dilation=" + dilation.str();
  if (!bias.defined()) s += ", bias=False";
  return s;
}

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p)
    : kernel_size(k), stride(s.value_or(k)), padding(p) {
  check_pool_args("MaxPool2d", kernel_size, stride, padding);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  check_nchw("MaxPool2d", x);
  return max_pool2d(x, kernel_size.vec(), stride.vec(), padding.vec());
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() + ", padding=" + padding.str();
}

AvgPool2d::AvgPool2d(Size2 k, std::optional<Size2> s, Size2 p, bool include_pad)
    : kernel_size(k), stride(s.value_or(k)), padding(p), count_include_pad(include_pad) {
  check_pool_args("AvgPool2d", kernel_size, stride, padding);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  check_nchw("AvgPool2d", x);
  return avg_pool2d(x, kernel_size.vec(), stride.vec(), padding.vec(), count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() + ", padding=" + padding.str();
}

}  // namespace tandem::nn
