// The `trainer` section of the configuration: Lightning's Trainer arguments with Lightning's
// defaults. The hardware ones (accelerator, devices, strategy, num_nodes, precision,
// auto_select_gpus) are resolved by plan_execution; the loop ones are read by the Trainer.
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "engine/config/config_schema.h"
#include "engine/config/hardware_values.h"
#include "engine/strategies/execution_plan.h"

namespace tandem {

// The declared trainer section.
SectionSpec trainer_section();

// A schema holding the trainer section. Subcommands add their own sections (model, data,
// optimizer, ...) and top-level options to it before parsing.
ConfigSchema make_trainer_schema();

// The hardware options from a resolved configuration tree (as made by parse_args).
// Throws ConfigError when a value has the wrong shape.
HardwareOptions hardware_options_from_config(const YAML::Node& config);

}  // namespace tandem
