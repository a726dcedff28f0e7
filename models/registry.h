// Models by name, for `--model=cnn`. Each entry declares its init arguments as a ClassSpec
// (defaults, kinds, checks: `--model.hidden=[512,256]`) and builds the module from a resolved
// `model` section plus the optimizer/lr_scheduler sections. A program adds its own models with
// register_model before parsing, and the CLI accepts them with no other change.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/config/class_section.h"
#include "models/image_classifier.h"

namespace tandem::models {

// spec.name is the selector value: "mlp"; build makes the module from a resolved model section.
using ModelEntry = ConfigClass<std::shared_ptr<trainer::LightningModule>(const YAML::Node& model_section,
                                                                         const OptimizationConfig& optimization)>;

// mlp and cnn, then anything registered, in registration order.
const std::vector<ModelEntry>& model_registry();
// Adds or replaces (by name, case-insensitively) an entry.
void register_model(ModelEntry entry);
std::vector<ClassSpec> model_classes();

// The `model` config section (default: mlp).
SectionSpec model_section();

// Fills the model section's defaults for the chosen model; ConfigError for options it does not take.
void resolve_model_section(YAML::Node& config);

// The model a resolved config names (sections model, optimizer, lr_scheduler; the latter two
// may be absent, meaning Adam lr 1e-3 and no scheduler).
std::shared_ptr<trainer::LightningModule> make_model(const YAML::Node& config);

}  // namespace tandem::models
