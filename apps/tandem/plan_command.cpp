// `tandem plan`: the same --trainer.* flags and --config files as `tandem fit`, resolved
// without training. Prints exactly one JSON object on stdout (the notes about what "auto"
// picked go to stderr); invalid input prints nothing on stdout and one error on stderr.
#include <iostream>

#include "apps/tandem/subcommands.h"
#include "engine/accelerators/accelerator_registry.h"
#include "engine/config/config_args.h"
#include "engine/config/trainer_section.h"
#include "engine/strategies/execution_plan.h"

namespace tandem::cli {

namespace {

const std::vector<AppFlag>& plan_flags() {
  static const std::vector<AppFlag> flags{
      {"plugin", "load a shared library that registers accelerators (repeatable)", true}};
  return flags;
}

void print_help(const ConfigSchema& schema) {
  std::cout << "usage: tandem plan [--config run.yaml] [--trainer.KEY=VALUE ...] [--plugin=lib.so] "
               "[--print_config]\n\n"
               "Resolves accelerator, devices, strategy, num_nodes and precision as `tandem fit` "
               "would, and prints the plan as one JSON object. Nothing is trained.\n\n"
               "  --config FILE      YAML with the same keys (flags override it)\n"
               "  --print_config     print the resolved configuration as YAML and stop\n"
               "  --plugin=lib.so    load accelerators exported by tandem_register_accelerators()\n"
               "Environment: TANDEM_SIMULATE_CUDA_DEVICES=N plans as if N GPUs were visible;\n"
               "TANDEM_SIMULATE_BUSY_CUDA_DEVICES=1,3 marks GPUs busy for auto_select_gpus.\n\n"
            << schema.help_text();
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  const ConfigSchema schema = make_trainer_schema();
  const ParsedArgs parsed = parse_args(schema, args, plan_flags());
  if (parsed.help) {
    print_help(schema);
    return 0;
  }
  if (auto it = parsed.app_flags.find("plugin"); it != parsed.app_flags.end()) {
    for (const auto& path : it->second) load_accelerator_plugin(path);
  }
  if (parsed.print_config) {
    std::cout << config_to_yaml(parsed.config);
    return 0;
  }
  // The command a launcher would run in every process: the same flags, under `fit`.
  std::string program = "tandem fit";
  for (const auto& arg : args) program += " " + shell_quote(arg);

  const ExecutionPlan plan = plan_execution(hardware_options_from_config(parsed.config), program);
  for (const auto& note : plan.notes) std::cerr << "tandem plan: " << note << "\n";
  std::cout << plan.to_json() << std::endl;
  return 0;
}

}  // namespace tandem::cli
