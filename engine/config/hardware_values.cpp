#include "engine/config/hardware_values.h"

#include "base/error.h"
#include "engine/accelerators/device_parsing.h"
#include "engine/config/config_schema.h"

namespace tandem {

std::pair<std::string, InitParams> strategy_from_yaml(const YAML::Node& value, const std::string& key) {
  if (value && value.IsScalar()) return {value.Scalar(), {}};
  const std::string expected = "; expected a strategy name (ddp, bagua, ...) or a mapping like "
                               "{name: bagua, algorithm: bytegrad} whose values are single values";
  if (!value || !value.IsMap()) throw ConfigError("--" + key + "=" + yaml_to_text(value) + " is not valid" + expected);
  std::string name;
  InitParams options;
  for (const auto& entry : value) {
    const std::string option = entry.first.as<std::string>();
    if (!entry.second.IsScalar()) {
      throw ConfigError("--" + key + "." + option + "=" + yaml_to_text(entry.second) + " is not valid" + expected);
    }
    if (option == "name") {
      name = entry.second.Scalar();
    } else {
      options[option] = entry.second.Scalar();
    }
  }
  if (name.empty()) {
    throw ConfigError("--" + key + "=" + yaml_to_text(value) + " names no strategy: add name, like " +
                      "{name: bagua, ...} or --" + key + "=bagua");
  }
  return {name, options};
}

DevicesSpec devices_from_yaml(const YAML::Node& value) {
  if (value && value.IsScalar()) {
    int n = 0;
    if (parse_int_strict(value.Scalar(), &n)) return DevicesSpec(n);
    return DevicesSpec(value.Scalar());
  }
  if (value && value.IsSequence()) {
    // Non-integer items are judged by the accelerator, whose error also says what the machine has.
    std::vector<std::string> items;
    for (const auto& item : value) {
      if (!item.IsScalar()) break;
      items.push_back(item.Scalar());
    }
    if (items.size() == value.size()) return DevicesSpec::list_of_text(items);
  }
  throw ConfigError("devices=" + yaml_to_text(value) + " is not valid: expected an int, a string "
                    "like \"1, 3\" or \"auto\", or a list like [1, 3]");
}

}  // namespace tandem
