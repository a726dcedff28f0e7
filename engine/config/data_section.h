// The `data` config section: data::FashionMNISTOptions as --data.<key> flags. The keys and
// defaults come from the options struct itself (to_json), so the CLI cannot drift from the
// library; the struct's from_json/validate judge the values.
#pragma once
#include <yaml-cpp/yaml.h>

#include "engine/config/config_schema.h"
#include "engine/data/fashion_mnist.h"

namespace tandem {

SectionSpec data_section();

// The options a resolved config's `data` section describes; ConfigError for invalid values.
data::FashionMNISTOptions data_options_from_config(const YAML::Node& config);

}  // namespace tandem
