#include "engine/trainer/trainer_section.h"

#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/trainer/trainer_option_table.h"

namespace tandem {

SectionSpec trainer_section() {
  SectionSpec s;
  s.name = "trainer";
  s.help = "how and where to train (Lightning's Trainer arguments)";
  for (const trainer::TrainerOptionRow& row : trainer::trainer_option_table()) s.options.push_back(row.spec);
  return s;
}

ConfigSchema make_trainer_schema() {
  ConfigSchema schema;
  schema.add_section(trainer_section());
  return schema;
}

HardwareOptions hardware_options_from_config(const YAML::Node& config) {
  trainer::TrainerOptions options;
  for (const trainer::TrainerOptionRow& row : trainer::trainer_option_table()) {
    if (row.hardware) row.read(options, get_config_value(config, "trainer." + row.spec.name));
  }
  return options;
}

}  // namespace tandem
