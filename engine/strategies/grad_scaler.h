// GradScaler: dynamic loss scaling for "16-mixed" (float16 has 5 exponent bits, so small
// gradients underflow to zero unless the loss is multiplied up before backward). PyTorch's
// torch.cuda.amp.GradScaler semantics and defaults:
//   - backward runs on loss * scale;
//   - before the optimizer step every gradient is divided by scale (so callbacks and gradient
//     clipping see true gradients) and checked: one inf or NaN anywhere skips the step;
//   - a skipped step multiplies scale by backoff_factor (0.5); growth_interval (2000)
//     consecutive good steps multiply it by growth_factor (2).
// "bf16-mixed" needs none of this (bfloat16 has float32's exponent range).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/tensor.h"

namespace tandem::trainer {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  double scale() const { return scale_; }
  // loss times a 0-d tensor holding scale() on the loss's device, refreshed in place when the
  // scale changes: a CUDA graph step captures the multiply once and replays it with the
  // tensor's value at that time.
  Tensor scale_loss(const Tensor& loss) const;
  // Divides the gradient of every parameter that has one by scale(), in place (the buffers keep
  // their addresses: DDP's bucket views and CUDA graph replays write into them); true when all
  // of them are finite (one host sync for the whole set).
  bool unscale(const std::vector<Tensor>& params) const;
  // After the step decision: backs off after a skipped step, grows after growth_interval good ones.
  void update(bool found_inf);

  // {"scale", "growth_tracker"} plus the options, for checkpoints (Lightning saves the scaler too).
  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);  // ConfigError/DataError on bad entries

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  // Writes scale_ into scale_tensor_ (when it exists) after the scale changed.
  void refresh_scale_tensor();

  mutable Tensor scale_tensor_;   // scale_ on the loss's device (scale_loss)
  mutable double tensor_holds_ = 0.0;
};

}  // namespace tandem::trainer
