#include "models/image_classifier.h"

#include "engine/config/optimizer_section.h"
#include "engine/config/yaml_json.h"
#include "engine/trainer/trainer.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::models {

OptimizationConfig OptimizationConfig::defaults() {
  YAML::Node config(YAML::NodeType::Map);
  YAML::Node optimizer(YAML::NodeType::Map);
  optimizer["name"] = "Adam";
  config["optimizer"] = optimizer;
  resolve_optimizer_sections(config);
  return {config["optimizer"], config["lr_scheduler"]};
}

namespace {
bool has_optimizer(const OptimizationConfig& c) { return c.optimizer && c.optimizer.IsMap(); }

// Shown on the progress bar; the rest as Lightning's defaults for the hook. (Set by name: a
// designated initializer that leaves members out trips -Wmissing-field-initializers.)
trainer::LogOptions on_progress_bar() {
  trainer::LogOptions options;
  options.prog_bar = true;
  return options;
}
}  // namespace

ImageClassifier::ImageClassifier(OptimizationConfig optimization)
    : optimization_(has_optimizer(optimization) ? optimization : OptimizationConfig::defaults()) {}

void ImageClassifier::record_optimization_hparams() {
  hparams["optimizer"] = yaml_to_json(optimization_.optimizer);
  hparams["lr_scheduler"] = yaml_to_json(optimization_.lr_scheduler);
}

Tensor ImageClassifier::forward(const Tensor& input) { return net->forward(prepare_input(input)); }

Tensor ImageClassifier::training_step(const data::Batch& batch, int64_t) {
  Tensor loss = cross_entropy(forward(batch.input), batch.target);
  log("train_loss", loss, on_progress_bar());
  return loss;
}

Tensor accuracy(const Tensor& logits, const Tensor& target) {
  NoGradGuard no_grad;
  return mean(cast(eq(argmax(logits, 1), target), DType::Float32));
}

void ImageClassifier::evaluate(const data::Batch& batch, const std::string& stage) {
  const Tensor logits = forward(batch.input);
  // sync_dist: under DDP each rank sees a shard; the epoch values are means over all ranks'
  // examples, weighted by batch size.
  trainer::LogOptions synced = on_progress_bar();
  synced.sync_dist = true;
  log(stage + "_loss", cross_entropy(logits, batch.target), synced);
  log(stage + "_acc", accuracy(logits, batch.target), synced);
}

Tensor ImageClassifier::validation_step(const data::Batch& batch, int64_t) {
  evaluate(batch, "val");
  return Tensor();
}
Tensor ImageClassifier::test_step(const data::Batch& batch, int64_t) {
  evaluate(batch, "test");
  return Tensor();
}

trainer::OptimizerConfig OptimizationConfig::with_scheduler(std::shared_ptr<optim::Optimizer> optimizer,
                                                            const trainer::Trainer* trainer) const {
  trainer::OptimizerConfig out;
  out.optimizer = std::move(optimizer);
  RunLength run;
  if (trainer) {
    run.max_epochs = trainer->max_epochs();
    run.max_steps = trainer->max_steps();
  }
  const SchedulerChoice scheduler = make_lr_scheduler(lr_scheduler, *out.optimizer, run);
  out.scheduler = scheduler.scheduler;
  out.interval = scheduler.interval;
  out.frequency = scheduler.frequency;
  return out;
}

trainer::OptimizerConfig ImageClassifier::configure_optimizers() {
  return optimization_.with_scheduler(make_optimizer(optimization_.optimizer, parameters()), trainer());
}

}  // namespace tandem::models
