#include "engine/trainer/training_strategy.h"

#include "engine/accelerators/precision.h"
#include "engine/core/error.h"

namespace tandem::trainer {

void SingleDeviceTrainingStrategy::setup_module(LightningModule& module) {
  module.to(device_);
  module.to(dtype_);
}

data::Batch SingleDeviceTrainingStrategy::batch_to_device(const data::Batch& batch) const {
  data::Batch out = batch.to(device_);
  // 64-true runs the model in float64, so float inputs follow; class indices stay int64.
  if (out.input.defined() && is_floating(out.input.dtype()) && out.input.dtype() != dtype_) {
    out.input = out.input.to(dtype_);
  }
  if (out.target.defined() && is_floating(out.target.dtype()) && out.target.dtype() != dtype_) {
    out.target = out.target.to(dtype_);
  }
  return out;
}

void SingleDeviceTrainingStrategy::backward(const Tensor& loss, bool /*will_step*/) { loss.backward(); }

void SingleDeviceTrainingStrategy::optimizer_step(optim::Optimizer& optimizer,
                                                  const std::function<void()>& before_step) {
  if (before_step) before_step();
  optimizer.step();
}

std::unique_ptr<TrainingStrategy> make_training_strategy(const ExecutionPlan& plan) {
  if (!plan.strategy_implemented) {
    throw ConfigError("strategy=" + plan.strategy + " is planned but cannot train yet (it lands with the "
                      "DDP/DP issue); train with --trainer.strategy=single_device (or auto with one device), "
                      "or run `tandem plan` to see what the flags resolve to");
  }
  if (plan.world_size != 1 || plan.devices.size() != 1) {
    throw ConfigError("the plan asks for " + std::to_string(plan.world_size) + " process(es) on " +
                      std::to_string(plan.devices.size()) + " device(s) with strategy=" + plan.strategy +
                      "; only one process on one device can train so far: use --trainer.devices=1");
  }
  if (plan.accelerator != "cpu") {
    throw ConfigError("accelerator=" + plan.accelerator + " cannot train yet: the Trainer runs on the CPU "
                      "until the CUDA issue lands; use --trainer.accelerator=cpu");
  }
  DType dtype = DType::Float32;
  switch (plan.precision) {
    case Precision::Float32True: dtype = DType::Float32; break;
    case Precision::Float64True: dtype = DType::Float64; break;
    default:
      throw ConfigError("precision=" + precision_name(plan.precision) + " cannot train yet; supported now: "
                        "32-true (the default) and 64-true (CPU); mixed precision lands with the CUDA issue");
  }
  return std::make_unique<SingleDeviceTrainingStrategy>(Device::cpu(), dtype);
}

}  // namespace tandem::trainer
