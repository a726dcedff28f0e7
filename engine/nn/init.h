// Parameter initializers, as torch.nn.init: each fills a tensor in place, records no
// gradient, and draws from the default Philox generator (manual_seed reproduces a model).
#pragma once
#include <string>
#include <utility>

#include "tensor/tensor.h"

namespace tandem::nn::init {

enum class FanMode { FanIn, FanOut };

// Recommended gain for a nonlinearity: "linear", "conv2d", "sigmoid" -> 1; "tanh" -> 5/3;
// "relu" -> sqrt(2); "leaky_relu" -> sqrt(2 / (1 + slope^2)); "selu" -> 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight [out, in, k...]: in * prod(k), out * prod(k). Needs dim >= 2.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

void uniform_(const Tensor& t, double low = 0.0, double high = 1.0);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// U(-bound, bound), bound = gain(nonlinearity, a) * sqrt(3 / fan). With a = sqrt(5) and
// leaky_relu (PyTorch's Linear/Conv default) the bound is 1 / sqrt(fan_in).
void kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                      const std::string& nonlinearity = "leaky_relu");
void kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                     const std::string& nonlinearity = "leaky_relu");
// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, double gain = 1.0);
void xavier_normal_(const Tensor& t, double gain = 1.0);

}  // namespace tandem::nn::init
