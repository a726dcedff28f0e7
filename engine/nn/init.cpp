// Initializers: draw in the tensor's dtype on its device, then copy in place without a graph.
#include "engine/nn/init.h"

#include <cmath>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::nn::init {

namespace {
void check_float(const Tensor& t, const char* fn) {
  if (!t.defined()) throw ValueError(std::string(fn) + ": tensor is undefined");
  if (!is_floating(t.dtype()))
    throw DTypeError(std::string(fn) + " needs a floating point tensor, got " + dtype_name(t.dtype()));
}

int64_t fan_for(const Tensor& t, FanMode mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? fan_in : fan_out;
}
}  // namespace

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "conv3d" || nonlinearity == "sigmoid")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw ValueError("calculate_gain: unknown nonlinearity '" + nonlinearity +
                   "' (allowed: linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leaky_relu, selu)");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  if (t.dim() < 2)
    throw ValueError("fan in and fan out need a tensor with at least 2 dims, got shape " + t.shape_str());
  int64_t receptive = 1;
  for (int d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

void uniform_(const Tensor& t, double low, double high) {
  check_float(t, "uniform_");
  if (!(low <= high)) throw ValueError("uniform_: needs low <= high, got low=" + std::to_string(low) +
                                       ", high=" + std::to_string(high));
  NoGradGuard no_grad;
  Tensor draw = Tensor::rand(t.shape(), t.dtype(), t.device());
  t.detach().copy_(affine(draw, high - low, low));
}

void normal_(const Tensor& t, double mean, double std) {
  check_float(t, "normal_");
  if (!(std >= 0)) throw ValueError("normal_: std must be >= 0, got " + std::to_string(std));
  NoGradGuard no_grad;
  Tensor draw = Tensor::randn(t.shape(), t.dtype(), t.device());
  t.detach().copy_(affine(draw, std, mean));
}

void constant_(const Tensor& t, double value) {
  check_float(t, "constant_");
  t.detach().fill_(value);
}
void zeros_(const Tensor& t) { constant_(t, 0.0); }
void ones_(const Tensor& t) { constant_(t, 1.0); }

void kaiming_uniform_(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  check_float(t, "kaiming_uniform_");
  const int64_t fan = fan_for(t, mode);
  if (fan == 0) return;  // zero-element tensor: nothing to draw (PyTorch warns and skips)
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / double(fan));
  uniform_(t, -bound, bound);
}

void kaiming_normal_(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  check_float(t, "kaiming_normal_");
  const int64_t fan = fan_for(t, mode);
  if (fan == 0) return;
  normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(double(fan)));
}

void xavier_uniform_(const Tensor& t, double gain) {
  check_float(t, "xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  uniform_(t, -bound, bound);
}

void xavier_normal_(const Tensor& t, double gain) {
  check_float(t, "xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  normal_(t, 0.0, gain * std::sqrt(2.0 / double(fan_in + fan_out)));
}

}  // namespace tandem::nn::init
