#include "engine/strategies/precision_plugin.h"

#include "base/error.h"

namespace tandem {

void PrecisionPlugin::setup(Precision precision, Device root) {
  precision_ = precision;
  autocast_.reset();
  scaler_.reset();
  if (precision == Precision::Float16Mixed || precision == Precision::BFloat16Mixed) {
    if (precision == Precision::Float16Mixed && !root.is_cuda()) {
      throw ConfigError("precision=16-mixed trains on CUDA only (the CPU autocasts to bfloat16, as torch's CPU "
                        "autocast); use --trainer.precision=bf16-mixed, 32-true or 64-true on " + root.str());
    }
    autocast_ = precision == Precision::BFloat16Mixed ? DType::BFloat16 : DType::Float16;
  }
  if (precision == Precision::Float16Mixed) scaler_ = std::make_shared<trainer::GradScaler>();
}

Tensor PrecisionPlugin::scale_loss(const Tensor& loss) const { return scaler_ ? scaler_->scale_loss(loss) : loss; }

bool PrecisionPlugin::unscale(const std::vector<Tensor>& params) const { return scaler_ ? scaler_->unscale(params) : true; }

void PrecisionPlugin::update(bool skipped) {
  if (scaler_) scaler_->update(skipped);
}

nlohmann::json PrecisionPlugin::state_dict() const {
  nlohmann::json s = nlohmann::json::object();
  if (scaler_) s["grad_scaler"] = scaler_->state_dict();
  return s;
}

void PrecisionPlugin::load_state_dict(const nlohmann::json& state) {
  if (scaler_ && state.contains("grad_scaler")) scaler_->load_state_dict(state.at("grad_scaler"));
}

}  // namespace tandem
