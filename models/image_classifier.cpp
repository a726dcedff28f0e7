#include "models/image_classifier.h"

#include "engine/autograd/grad_mode.h"
#include "engine/config/optimizer_section.h"
#include "engine/config/yaml_json.h"
#include "engine/ops/ops.h"

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
  log("train_loss", loss, {.prog_bar = true});
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
  log(stage + "_loss", cross_entropy(logits, batch.target), {.prog_bar = true, .sync_dist = true});
  log(stage + "_acc", accuracy(logits, batch.target), {.prog_bar = true, .sync_dist = true});
}

void ImageClassifier::validation_step(const data::Batch& batch, int64_t) { evaluate(batch, "val"); }
void ImageClassifier::test_step(const data::Batch& batch, int64_t) { evaluate(batch, "test"); }

trainer::OptimizerConfig ImageClassifier::configure_optimizers() {
  trainer::OptimizerConfig out;
  out.optimizer = make_optimizer(optimization_.optimizer, parameters());
  const SchedulerChoice scheduler = make_lr_scheduler(optimization_.lr_scheduler, *out.optimizer);
  out.scheduler = scheduler.scheduler;
  out.interval = scheduler.interval;
  out.frequency = scheduler.frequency;
  return out;
}

}  // namespace tandem::models
