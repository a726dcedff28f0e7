// Conv2d, MaxPool2d, AvgPool2d on NCHW inputs, with PyTorch's layouts
// (weight [out_channels, in_channels, kh, kw]) and default initialization.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/module.h"

namespace tandem::nn {

// A (height, width) pair that also accepts one number for both, like PyTorch's int-or-tuple
// arguments: Conv2d(3, 8, 3) or Conv2d(3, 8, {3, 5}).
struct Size2 {
  int64_t h, w;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  std::vector<int64_t> vec() const { return {h, w}; }
  std::string str() const {  // appends, as "(" + to_string(...) trips a GCC 12 -Wrestrict false positive
    std::string s = "(";
    s += std::to_string(h);
    s += ", ";
    s += std::to_string(w);
    s += ")";
    return s;
  }
};

// weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels * kh * kw.
// groups must be 1 (the conv2d op supports no other yet).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1,
         Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1, bool bias = true,
         DType dtype = DType::Float32, Device device = Device::cpu());
  std::string name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  Size2 kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

// stride defaults to kernel_size (PyTorch's stride=None).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0);
  std::string name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     bool count_include_pad = true);
  std::string name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size, stride, padding;
  bool count_include_pad;
};

}  // namespace tandem::nn
