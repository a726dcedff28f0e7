#include "engine/nn/normalization.h"

#include <sstream>

#include "engine/nn/init.h"
#include "tensor/ops/ops.h"

namespace tandem::nn {

namespace {
std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

BatchNormBase::BatchNormBase(int64_t n, double eps_, std::optional<double> momentum_, bool affine_, bool track,
                             DType dtype, Device device)
    : num_features(n), eps(eps_), momentum(momentum_), affine(affine_), track_running_stats(track) {
  if (n <= 0) throw ValueError("BatchNorm: num_features must be > 0, got " + std::to_string(n));
  if (!(eps > 0)) throw ValueError("BatchNorm: eps must be > 0, got " + num(eps));
  if (momentum && !(*momentum >= 0 && *momentum <= 1))
    throw ValueError("BatchNorm: momentum must be in [0, 1] (or nullopt for a cumulative average), got " +
                     num(*momentum));
  if (affine) {
    weight = register_parameter("weight", Tensor::empty({n}, dtype, device));
    bias = register_parameter("bias", Tensor::empty({n}, dtype, device));
  }
  if (track) {
    running_mean = register_buffer("running_mean", Tensor::zeros({n}, dtype, device));
    running_var = register_buffer("running_var", Tensor::ones({n}, dtype, device));
    num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::Int64, device));
  }
  reset_parameters();
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats) return;
  running_mean.fill_(0.0);
  running_var.fill_(1.0);
  num_batches_tracked.fill_(0.0);
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input(x);
  if (x.size(1) != num_features)
    throw ShapeError(name() + "(" + std::to_string(num_features) + "): expected " + std::to_string(num_features) +
                     " channels in dim 1, got input " + x.shape_str());
  double factor = momentum.value_or(0.0);
  if (training_ && track_running_stats) {
    // The count lives in a tensor (it is saved with the model); reading it back costs a
    // host sync on a GPU, which is the price of PyTorch's layout.
    const double count = num_batches_tracked.item() + 1;
    num_batches_tracked.fill_(count);
    if (!momentum) factor = 1.0 / count;
  }
  // Batch statistics in training, or always when no running statistics are kept (the op
  // also falls back to them when running_mean is undefined); the op updates running stats
  // in place when training with them.
  return batch_norm(x, running_mean, running_var, weight, bias, training_ || !track_running_stats, factor, eps);
}

std::string BatchNormBase::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + num(eps) + ", momentum=" + (momentum ? num(*momentum) : "None") +
         ", affine=" + (affine ? "True" : "False") + ", track_running_stats=" + (track_running_stats ? "True" : "False");
}

void BatchNorm1d::check_input(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError("BatchNorm1d: input must be [N, C] or [N, C, L], got " + x.shape_str());
}

void BatchNorm2d::check_input(const Tensor& x) const {
  if (x.dim() != 4) throw ShapeError("BatchNorm2d: input must be [N, C, H, W], got " + x.shape_str());
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, bool with_bias, DType dtype, Device device)
    : normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  if (normalized_shape.empty()) throw ValueError("LayerNorm: normalized_shape must have at least one dim");
  for (int64_t s : normalized_shape)
    if (s <= 0) throw ValueError("LayerNorm: normalized_shape dims must be > 0, got " + shape_to_string(normalized_shape));
  if (!(eps > 0)) throw ValueError("LayerNorm: eps must be > 0, got " + num(eps));
  if (affine) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape, dtype, device));
    if (with_bias) bias = register_parameter("bias", Tensor::zeros(normalized_shape, dtype, device));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  std::string s = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) s += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  if (normalized_shape.size() == 1) s += ",";
  return s + "), eps=" + num(eps) + ", elementwise_affine=" + (elementwise_affine ? "True" : "False");
}

}  // namespace tandem::nn
