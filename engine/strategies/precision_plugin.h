// PrecisionPlugin: what a strategy's precision changes in a step. The weights' dtype (float64
// for 64-true, float32 otherwise), the autocast dtype of forward passes (bfloat16 / float16 for
// the mixed precisions, torch.autocast's rules in tensor/ops/autocast.h), and for 16-mixed the
// GradScaler: the loss is scaled before backward, gradients unscaled and checked before the
// optimizer step, and a step with an inf or NaN gradient is skipped.
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/accelerators/precision.h"
#include "engine/strategies/grad_scaler.h"
#include "tensor/tensor.h"

namespace tandem {

class PrecisionPlugin {
 public:
  // Throws ConfigError for 16-mixed on the CPU (bf16-mixed there rounds matmul, linear and conv2d
  // to bfloat16, autocast.h).
  void setup(Precision precision, Device root);

  Precision precision() const { return precision_; }
  DType compute_dtype() const { return precision_ == Precision::Float64True ? DType::Float64 : DType::Float32; }
  // bfloat16 or float16 while forward passes run under autocast; nullopt without mixed precision.
  std::optional<DType> autocast_dtype() const { return autocast_; }
  // loss (times the loss scale under 16-mixed).
  Tensor scale_loss(const Tensor& loss) const;
  // Unscales the gradients in place; false when one of them is inf or NaN (skip the step).
  bool unscale(const std::vector<Tensor>& params) const;
  void update(bool skipped);
  const trainer::GradScaler* grad_scaler() const { return scaler_.get(); }

  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);

 private:
  Precision precision_ = Precision::Float32True;
  std::optional<DType> autocast_;
  std::shared_ptr<trainer::GradScaler> scaler_;
};

}  // namespace tandem
