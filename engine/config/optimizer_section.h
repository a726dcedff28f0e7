// The `optimizer` and `lr_scheduler` config sections (LightningCLI's `--optimizer=AdamW
// --optimizer.lr=1e-3`, `--lr_scheduler=StepLR --lr_scheduler.step_size=5`) and the factories
// that build engine/optim objects from a resolved section. Models call the factories in
// configure_optimizers, so any model gets every optimizer and scheduler without code of its own.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/config/class_section.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"

namespace tandem {

// SGD, Adam, AdamW with torch.optim's defaults (Adam is the section's default, lr 1e-3), and
// QAdam (engine/optim/qadam.h; only with bagua's qadam algorithm).
const std::vector<ClassSpec>& optimizer_classes();
// StepLR, CosineAnnealingLR, LinearLR, WarmupCosine (linear warmup then cosine), each with
// interval (epoch | step) and frequency, Lightning's lr_scheduler dict keys. Default: none.
const std::vector<ClassSpec>& lr_scheduler_classes();

SectionSpec optimizer_section();
SectionSpec lr_scheduler_section();

// An optimizer from a resolved `optimizer` section (a map with name and the class's options).
std::shared_ptr<optim::Optimizer> make_optimizer(const YAML::Node& section, std::vector<Tensor> params);
// The same over parameter groups whose options override the section's (optim::weight_decay_groups).
// QAdam keeps one group (bagua's qadam compresses one momentum): a group with overrides is a ConfigError.
std::shared_ptr<optim::Optimizer> make_optimizer(const YAML::Node& section, std::vector<optim::ParamGroup> groups);

struct SchedulerChoice {
  std::shared_ptr<optim::LRScheduler> scheduler;  // null when the section is null
  std::string interval = "epoch";
  int64_t frequency = 1;
};
// How long the run is, for schedules whose length defaults to the whole run (T_max: null).
// -1: no limit (then such a schedule is a ConfigError asking for its length).
struct RunLength {
  int64_t max_epochs = -1;
  int64_t max_steps = -1;
};
// A scheduler from a resolved `lr_scheduler` section (null section: no scheduler).
SchedulerChoice make_lr_scheduler(const YAML::Node& section, optim::Optimizer& optimizer, const RunLength& run = {});

// Resolves both sections of a parsed config (class defaults filled in), then builds them once on
// a throwaway parameter so values the classes reject (a negative lr, beta1 = 1) are reported
// as ConfigError before any data is read.
// Also checks check_optimizer_fits_strategy.
void resolve_optimizer_sections(YAML::Node& config);

// QAdam and bagua's qadam algorithm need each other: --optimizer=QAdam with any other strategy or
// algorithm, and algorithm=qadam with any other optimizer, are ConfigErrors (exit 2 from `tandem
// plan` and `tandem fit` before anything trains).
void check_optimizer_fits_strategy(const YAML::Node& config);

}  // namespace tandem
