// The `trainer` section of the configuration: Lightning's Trainer arguments with Lightning's
// defaults. The hardware ones (accelerator, devices, strategy, num_nodes, precision,
// auto_select_gpus) are resolved by plan_execution; the loop ones are read by the Trainer.
#pragma once
#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "engine/accelerators/devices_spec.h"
#include "engine/config/config_schema.h"
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

// A strategy value from YAML: a name, or a mapping {name: ..., option: value, ...} -> the name
// and its options. `key` names the value in messages. Throws ConfigError for another shape.
std::pair<std::string, InitParams> strategy_from_yaml(const YAML::Node& value, const std::string& key);

// A devices value from YAML: an int scalar -> int, another scalar -> string, a sequence of
// ints -> list. Throws ConfigError for anything else.
DevicesSpec devices_from_yaml(const YAML::Node& value);

}  // namespace tandem
