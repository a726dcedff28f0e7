#include "engine/strategies/grad_scaler.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::trainer {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  TANDEM_CHECK(options_.init_scale > 0 && std::isfinite(options_.init_scale), ConfigError,
               "GradScaler: init_scale must be a finite number > 0, got " + std::to_string(options_.init_scale));
  TANDEM_CHECK(options_.growth_factor > 1.0, ConfigError,
               "GradScaler: growth_factor must be > 1, got " + std::to_string(options_.growth_factor));
  TANDEM_CHECK(options_.backoff_factor > 0.0 && options_.backoff_factor < 1.0, ConfigError,
               "GradScaler: backoff_factor must be in (0, 1), got " + std::to_string(options_.backoff_factor));
  TANDEM_CHECK(options_.growth_interval > 0, ConfigError,
               "GradScaler: growth_interval must be > 0, got " + std::to_string(options_.growth_interval));
}

Tensor GradScaler::scale_loss(const Tensor& loss) const {
  const bool usable = scale_tensor_.defined() && scale_tensor_.device() == loss.device() &&
                      scale_tensor_.dtype() == loss.dtype();
  if (!usable) {  // update() and load_state_dict() keep an existing tensor current
    scale_tensor_ = Tensor::full({}, scale_, loss.dtype(), loss.device());
    tensor_holds_ = scale_;
  }
  return loss * scale_tensor_;  // recorded for backward; the scale needs no gradient
}

bool GradScaler::unscale(const std::vector<Tensor>& params) const {
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  // g * 0 is NaN exactly where g is inf or NaN, so the sum of those products over every
  // gradient is finite iff all gradients are: one device-side accumulation, one sync.
  Tensor poison;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.copy_(g.detach() * inv);
    Tensor probe = sum(g.detach() * 0.0).to(DType::Float32);
    poison = poison.defined() ? poison + probe : probe;
  }
  return !poison.defined() || std::isfinite(poison.item());
}

void GradScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // as PyTorch: never grow to inf
    growth_tracker_ = 0;
  }
  refresh_scale_tensor();
}

// A CUDA graph step replays the captured multiply by scale_tensor_ without calling scale_loss
// again, so a new scale must reach the tensor here, eagerly, before the next replay. (Left to
// scale_loss, the fill would also be captured and every replay would restore the old scale.)
void GradScaler::refresh_scale_tensor() {
  if (!scale_tensor_.defined() || tensor_holds_ == scale_) return;
  NoGradGuard no_grad;
  scale_tensor_.fill_(scale_);
  tensor_holds_ = scale_;
}

nlohmann::json GradScaler::state_dict() const {
  return {{"scale", scale_},
          {"growth_tracker", growth_tracker_},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", options_.growth_interval}};
}

void GradScaler::load_state_dict(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("scale") || !state["scale"].is_number() ||
      !state.contains("growth_tracker") || !state["growth_tracker"].is_number_integer())
    throw DataError("checkpoint: the grad scaler state must be an object with a number \"scale\" and an integer "
                    "\"growth_tracker\", got " + state.dump());
  const double scale = state["scale"].get<double>();
  const int64_t tracker = state["growth_tracker"].get<int64_t>();
  if (!(scale > 0) || !std::isfinite(scale) || tracker < 0)
    throw DataError("checkpoint: the grad scaler state has scale=" + std::to_string(scale) + " and growth_tracker=" +
                    std::to_string(tracker) + "; expected a finite scale > 0 and a tracker >= 0");
  scale_ = scale;
  growth_tracker_ = tracker;
  refresh_scale_tensor();
}

}  // namespace tandem::trainer
