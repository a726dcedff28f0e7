// The hardware options' values that YAML may give as a mapping or a list: a strategy with its
// options and a devices spec (the trainer section's strategy and devices; the optimizer section
// reads the strategy too).
#pragma once
#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "base/named_registry.h"
#include "engine/accelerators/devices_spec.h"

namespace tandem {

// A strategy value from YAML: a name, or a mapping {name: ..., option: value, ...} -> the name
// and its options. `key` names the value in messages. Throws ConfigError for another shape.
std::pair<std::string, InitParams> strategy_from_yaml(const YAML::Node& value, const std::string& key);

// A devices value from YAML: an int scalar -> int, another scalar -> string, a sequence of
// ints -> list. Throws ConfigError for anything else.
DevicesSpec devices_from_yaml(const YAML::Node& value);

}  // namespace tandem
