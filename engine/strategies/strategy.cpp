// The Strategy base: one process on its devices' root, the plain step (autocast, training_step,
// training_step_end), backward through the precision plugin, and the optimizer step.
#include "engine/strategies/strategy.h"

#include <cmath>

#include "base/error.h"
#include "engine/optim/clip_grad.h"
#include "engine/strategies/cuda_graph_step.h"
#include "engine/strategies/execution_plan.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/ops.h"

namespace tandem {

data::Batch move_batch(const data::Batch& batch, Device device, DType dtype) {
  data::Batch out = batch.to(device);
  // 64-true runs the model in float64, so float inputs follow; class indices stay int64.
  if (out.input.defined() && is_floating(out.input.dtype()) && out.input.dtype() != dtype) out.input = out.input.to(dtype);
  if (out.target.defined() && is_floating(out.target.dtype()) && out.target.dtype() != dtype) {
    out.target = out.target.to(dtype);
  }
  return out;
}

Strategy::Strategy() = default;
Strategy::~Strategy() = default;

void Strategy::launch(const ExecutionPlan& plan, const std::vector<std::string>& /*argv*/) {
  throw ConfigError("strategy=" + name() + " planned " + std::to_string(plan.world_size) + " processes, but it has no "
                    "way to start them; start the job with " + plan.launch.value_or("mpirun -np N ..."));
}

void Strategy::setup_environment(const StrategyEnvironment& env) {
  env_ = env;
  TANDEM_CHECK(!env.tensor_devices.empty(), ValueError, "strategy=" + name() + ": setup_environment got no devices");
  devices_ = env.tensor_devices;
  precision_.setup(env.precision, devices_.front());
}

void Strategy::setup_module(trainer::LightningModule& module) {
  module.to(root_device());
  module.to(compute_dtype());
}

data::Batch Strategy::batch_to_device(const data::Batch& batch) const { return move_batch(batch, root_device(), compute_dtype()); }

void Strategy::setup_step_executor(bool cuda_graph, trainer::MetricsSink& logs) {
  cuda_graph_ = cuda_graph ? std::make_unique<trainer::CudaGraphStep>(root_device().index, logs) : nullptr;
}

void Strategy::release_step_executor() {
  if (cuda_graph_) cuda_graph_->release();
}

namespace {

void check_loss_shape(const Tensor& loss) {
  TANDEM_CHECK(loss.numel() == 1, ValueError,
               "training_step returned a tensor of shape " + loss.shape_str() + "; return the scalar loss (e.g. mean(...))");
}

}  // namespace

void Strategy::backward_with_hooks(const Tensor& loss, const TrainingStepRequest& step, TrainingStepHooks& hooks) {
  hooks.enter("backward", false);
  hooks.on_before_backward(loss);
  // The precision plugin scales the loss further for 16-mixed.
  backward(loss, step.loss_factor, step.will_step);
  hooks.on_after_backward();
}

TrainingStepResult Strategy::run_training_step(trainer::LightningModule& module, optim::Optimizer& optimizer,
                                               const data::Batch& host_batch, const TrainingStepRequest& step,
                                               TrainingStepHooks& hooks) {
  TrainingStepResult result;
  const data::Batch moved = batch_to_device(host_batch);
  // The graph's static tensors, refilled, when it keeps some and they fit; else the batch as it is.
  const std::optional<data::Batch> staged = cuda_graph_ ? cuda_graph_->stage(moved) : std::nullopt;
  result.batch = staged ? *staged : moved;
  const data::Batch& batch = result.batch;
  hooks.on_batch_start(batch);
  hooks.enter("before_training_step (buffer broadcast)", true);
  before_training_step(module);
  hooks.enter("training_step", false);

  bool backward_done = false;
  if (staged) {
    const trainer::CudaGraphStep::Outcome outcome = cuda_graph_->run([&] {
      const Tensor loss = training_step(module, batch, step.batch_idx);
      if (!loss.defined()) return loss;
      check_loss_shape(loss);
      backward_with_hooks(loss, step, hooks);
      return loss;
    });
    backward_done = outcome.ran;
    result.loss = outcome.loss;
  }
  if (backward_done) {
    // Backward already ran (in the graph or its warm-up): check the loss now, and when it is not
    // finite run the step's forward once more eagerly, with the host checks the executor
    // deferred (an out-of-range class index), so the error names the cause.
    if (result.loss.defined()) {
      const double value = result.loss.item();
      if (!std::isfinite(value)) {
        const Tensor eager = training_step(module, batch, step.batch_idx);
        if (eager.defined() && eager.numel() == 1) hooks.check_finite_loss(eager.item());
      }
      hooks.check_finite_loss(value);
    }
  } else {
    result.loss = training_step(module, batch, step.batch_idx);
    if (result.loss.defined()) {
      check_loss_shape(result.loss);
      hooks.check_finite_loss(result.loss.item());
      backward_with_hooks(result.loss, step, hooks);
    }
  }
  if (!step.will_step) return result;
  hooks.enter("the optimizer step (gradient allreduce, clipping, update)", true);
  optimizer_step(optimizer, [&](bool skipping) { hooks.on_before_optimizer_step(optimizer, skipping); });
  hooks.on_before_zero_grad(optimizer);
  // A graph accumulates into the gradient buffers it captured, so they stay allocated and are
  // zeroed in place.
  optimizer.zero_grad(/*set_to_none=*/cuda_graph_ == nullptr);
  result.stepped = true;
  return result;
}

Tensor Strategy::call_training_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  autocast::Guard autocast(precision_.autocast_dtype());
  return module.training_step(batch, batch_idx);
}

Tensor Strategy::training_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  const Tensor out = call_training_step(module, batch, batch_idx);
  if (!out.defined()) return out;
  autocast::Guard autocast(precision_.autocast_dtype());
  if (std::optional<Tensor> loss = module.training_step_end(out, batch)) return *loss;
  return out;
}

void Strategy::validation_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  autocast::Guard autocast(precision_.autocast_dtype());
  const Tensor outputs = module.validation_step(batch, batch_idx);
  if (outputs.defined()) module.validation_step_end(outputs, batch);
}

void Strategy::test_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  autocast::Guard autocast(precision_.autocast_dtype());
  const Tensor outputs = module.test_step(batch, batch_idx);
  if (outputs.defined()) module.test_step_end(outputs, batch);
}

Tensor Strategy::predict_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  autocast::Guard autocast(precision_.autocast_dtype());
  return autocast::raise(module.predict_step(batch, batch_idx));  // predictions leave in float32
}

void Strategy::backward(const Tensor& loss, double factor, bool /*will_step*/) {
  precision_.scale_loss(factor == 1.0 ? loss : loss * factor).backward();
}

void Strategy::optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) {
  std::vector<Tensor> params;
  for (const auto& group : optimizer.param_groups()) params.insert(params.end(), group.params.begin(), group.params.end());
  // 16-mixed: hooks and clipping see true gradients; an inf or NaN skips this step (PyTorch's GradScaler).
  const bool skipping = !precision_.unscale(params);
  if (before_step) before_step(skipping);
  if (!skipping) optimizer.step();
  precision_.update(skipping);
}

double Strategy::clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  return optim::clip_grad_norm_(params, max_norm);
}

optim::OptimizerStateDict Strategy::optimizer_state(const optim::Optimizer& optimizer) const {
  return optimizer.state_dict();
}

void Strategy::load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerStateDict& state) {
  optimizer.load_state_dict(state);
}

int64_t Strategy::optimizer_state_bytes(const optim::Optimizer& optimizer) const { return optimizer.state_bytes(); }

nlohmann::json Strategy::state_dict() const { return precision_.state_dict(); }

void Strategy::load_state_dict(const nlohmann::json& state) { precision_.load_state_dict(state); }

std::string Strategy::describe_batch(int64_t batch_size, int64_t accumulate) const {
  const int64_t effective = batch_size * world_size() * accumulate;
  std::string line = name() + ": " + std::to_string(world_size()) + (world_size() == 1 ? " process" : " processes") +
                     " x batch " + std::to_string(batch_size);
  if (accumulate > 1) line += " x " + std::to_string(accumulate) + " accumulated";
  line += " = effective batch " + std::to_string(effective);
  if (devices_per_process() > 1) {
    line += "; each process splits its batch over " + std::to_string(devices_per_process()) + " devices";
  }
  return line;
}

}  // namespace tandem
