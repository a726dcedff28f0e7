// `tandem plan`: the same flags and --config files as `tandem fit` (the whole run schema, so
// model and data flags are checked too), with the hardware options resolved without training.
// Prints exactly one JSON object on stdout (the notes about what "auto" picked go to stderr);
// invalid input prints nothing on stdout and one error on stderr.
#include <iostream>

#include "apps/tandem/plan_predict.h"
#include "apps/tandem/run_config.h"
#include "apps/tandem/subcommands.h"
#include "engine/accelerators/accelerator_registry.h"
#include "engine/config/config_args.h"
#include "engine/strategies/execution_plan.h"
#include "engine/trainer/trainer_section.h"

namespace tandem::cli {

namespace {

// "  name  description", one line per registered class.
template <typename Entry>
std::string registry_listing(const std::vector<Entry>& entries) {
  std::string out;
  for (const auto& e : entries) out += "  " + e.name + "  " + e.description + "\n";
  return out;
}

// The trainer options with the defaults `tandem fit` runs with (the run schema's, e.g.
// max_epochs 10), so both helps show the same values.
std::string plan_help(const ConfigSchema& run_schema) {
  ConfigSchema trainer_only;
  trainer_only.add_section(*run_schema.section("trainer"));
  return "usage: tandem plan [--config run.yaml] [--trainer.KEY=VALUE ...] [--plugin=lib.so] "
               "[--print_config]\n\n"
               "Resolves accelerator, devices, strategy, num_nodes and precision as `tandem fit` "
               "would, and prints the plan as one JSON object. Nothing is trained. It takes every "
               "flag and --config file `tandem fit` takes (see `tandem fit --help`); the trainer's "
               "hardware options are the ones it resolves.\n\n"
               "  --config FILE      YAML with the same keys (flags override it)\n"
               "  --print_config     print the resolved configuration as YAML and stop\n"
               "  --plugin=lib.so    load accelerators exported by tandem_register_accelerators()\n"
               "  --predict          add \"prediction\": the step time and scaling efficiency at this\n"
               "                     plan's nodes and processes (docs/SCALING.md), measured on one device\n"
               "                     here unless --predict_step_ms=F,B,O; links --predict_intra and\n"
               "                     --predict_inter=LATENCY_US,GBPS, --predict_host_ns_per_byte (CPU the\n"
               "                     transfers cost the computing cores), --predict_averaging, --predict_bucket_mb\n"
               "Environment: TANDEM_SIMULATE_CUDA_DEVICES=N plans as if N GPUs were visible;\n"
               "TANDEM_SIMULATE_BUSY_CUDA_DEVICES=1,3 marks GPUs busy for auto_select_gpus.\n\n" +
         trainer_only.help_text() + "\nregistered accelerators (and auto, gpu = cuda):\n" +
         registry_listing(accelerator_registry().entries()) + "registered strategies (and auto):\n" +
         registry_listing(strategy_registry().entries());
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  // fit's schema, so a fit command line or a run's saved config.yaml plans as it is.
  const std::optional<ParsedRun> run =
      parse_run(args, predict_flags(), [](const ConfigSchema& schema) { return plan_help(schema); });
  if (!run) return 0;
  // The command a launcher would run in every process: this program with the same flags, under `fit`.
  std::string program = shell_quote(invoked_program()) + " fit";
  for (const auto& arg : args) program += " " + shell_quote(arg);

  const ExecutionPlan plan = plan_execution(hardware_options_from_config(run->config), program);
  for (const auto& note : plan.notes) std::cerr << "tandem plan: " << note << "\n";
  if (!wants_prediction(*run)) {
    std::cout << plan.to_json() << std::endl;
    return 0;
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(plan.to_json());
  out["prediction"] = predict_scaling(*run, plan);
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace tandem::cli
