// BatchNorm1d, BatchNorm2d and LayerNorm with PyTorch's parameters, buffers and names:
// weight (ones), bias (zeros), running_mean (zeros), running_var (ones) and
// num_batches_tracked (int64 scalar, counted in training mode).
#pragma once
#include <cstdint>
#include <optional>

#include "engine/nn/module.h"

namespace tandem::nn {

// Shared by BatchNorm1d and BatchNorm2d, which differ only in the input ranks they accept.
// Training: normalizes with the batch's mean and biased variance and updates
// running = (1 - m) * running + m * batch (unbiased variance), m = momentum, or
// 1 / num_batches_tracked (a cumulative average) when momentum is nullopt.
// Eval: normalizes with the running statistics (the batch's when track_running_stats=false).
class BatchNormBase : public Module {
 public:
  BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                bool track_running_stats, DType dtype, Device device);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_running_stats();
  void reset_parameters();

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;                                      // undefined unless affine
  Tensor running_mean, running_var, num_batches_tracked;    // undefined unless tracking

 protected:
  virtual void check_input(const Tensor& x) const = 0;
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, DType dtype = DType::Float32,
                       Device device = Device::cpu())
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats, dtype, device) {}
  std::string name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, DType dtype = DType::Float32,
                       Device device = Device::cpu())
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats, dtype, device) {}
  std::string name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

// Normalizes over the trailing dims given by normalized_shape; weight (ones) and bias (zeros)
// have that shape.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true, DType dtype = DType::Float32, Device device = Device::cpu());
  std::string name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

}  // namespace tandem::nn
