#include "apps/tandem/run_config.h"

#include <iostream>
#include <sstream>

#include "base/join.h"
#include "engine/accelerators/accelerator_registry.h"
#include "engine/config/data_section.h"
#include "engine/config/optimizer_section.h"
#include "engine/strategies/bagua/bagua_algorithm.h"
#include "engine/strategies/strategy.h"
#include "engine/trainer/callbacks/callback_config.h"
#include "engine/trainer/trainer_section.h"
#include "models/registry.h"

namespace tandem::cli {

namespace {

// trainer.strategy's one-line help, from the strategy registry (plugins' strategies included).
std::string strategy_option_help() {
  return "auto, " + join(strategy_registry().names()) +
         "; with options: --trainer.strategy.<option>=VALUE or {name: bagua, algorithm: bytegrad} (listed below; "
         "docs/STRATEGIES.md)";
}

// Every registered strategy with its description and options, and bagua's algorithms with theirs.
std::string strategies_help() {
  std::ostringstream out;
  out << "\ntrainer.strategy: auto (Lightning's choice), or one of these; options as "
         "--trainer.strategy.OPTION=VALUE\n";
  for (const auto& entry : strategy_registry().entries()) {
    out << "  " << entry.name << "  " << entry.description << "\n";
    if (entry.name != "bagua") continue;
    out << "      algorithm  (default: gradient_allreduce)  one of:\n";
    for (const auto& algorithm : bagua::bagua_algorithm_registry().entries()) {
      out << "        " << algorithm.name << "  " << algorithm.description << "\n";
      for (const auto& [option, value] : algorithm.default_params) {
        out << "            " << option << "  (default: " << (value.empty() ? "unset" : value) << ")\n";
      }
    }
  }
  return out.str();
}

// The strategy name and options --print_config shows are the ones plan and fit accept: the
// registry builds the strategy (and throws ConfigError) just as planning does.
void check_strategy(const YAML::Node& config) {
  const YAML::Node strategy = get_config_value(config, "trainer.strategy");
  if (!strategy || strategy.IsNull()) return;  // a tree without a trainer section (the C interface's model flags)
  const auto [name, options] = strategy_from_yaml(strategy, "trainer.strategy");
  check_strategy_request(name, strategy_registry(), options);
}

}  // namespace

ConfigSchema make_run_schema() {
  ConfigSchema schema;
  OptionSpec seed = make_option("seed_everything", ValueKind::Int, YAML::Node(42),
                                "seed of parameter init and dropout (the Philox stream); the data split and "
                                "shuffle use --data.seed");
  seed.nullable = true;
  seed.validate = [](const YAML::Node& value, const std::string& key) {
    uint64_t parsed = 0;
    if (!YAML::convert<uint64_t>::decode(value, parsed)) {
      throw ConfigError("--" + key + "=" + value.Scalar() + " is not valid: expected an integer from 0 to " +
                        std::to_string(UINT64_MAX) + ", or null for the default stream");
    }
  };
  schema.add_option(seed);
  OptionSpec ckpt = make_option("ckpt_path", ValueKind::String, YAML::Node(YAML::NodeType::Null),
                                "checkpoint to start from: a .safetensors path, \"last\" or \"best\" (fit: resume)");
  ckpt.nullable = true;
  schema.add_option(ckpt);
  SectionSpec trainer = trainer_section();
  for (OptionSpec& option : trainer.options) {
    if (option.name == "strategy") option.help = strategy_option_help();
  }
  schema.add_section(trainer);
  schema.add_section(models::model_section());
  schema.add_section(data_section());
  schema.add_section(optimizer_section());
  schema.add_section(lr_scheduler_section());
  // Tandem's CLI defaults where Lightning's would not make a sensible run on their own: 1000
  // epochs (Lightning's max_epochs=None) is not a job, batch 256 (data_section.cpp) is the workload, and a
  // constant rate ends a run on whatever its last noisy steps left (on Fashion-MNIST the MLP
  // loses about a point of test accuracy to that; docs/PERFORMANCE.md), so the rate follows a
  // cosine over the run (T_max null: max_epochs). --lr_scheduler=null keeps it constant.
  schema.set_default("trainer.max_epochs", YAML::Node(10));
  schema.set_default("lr_scheduler.name", YAML::Node("CosineAnnealingLR"));
  return schema;
}

void resolve_run_config(YAML::Node& config) {
  check_strategy(config);
  models::resolve_model_section(config);
  resolve_data_section(config);
  resolve_optimizer_sections(config);
  trainer::resolve_callbacks_config(config);
}

std::string run_help(const std::string& stage, const ConfigSchema& schema) {
  std::ostringstream out;
  const std::string what = stage == "fit" ? "Trains a model (validating as it goes) and saves checkpoints."
                         : stage == "validate" ? "Runs the validation set through a model (--ckpt_path to load weights)."
                         : stage == "test" ? "Evaluates a model on the test set (--ckpt_path=PATH|last|best)."
                                           : "Writes the model's predicted class for each test example.";
  out << "usage: tandem " << stage << " [--config run.yaml] [--print_config] [--model=NAME] [--KEY=VALUE ...]\n\n"
      << what << "\n\n"
      << "  --config FILE      YAML with the same keys as --print_config shows (repeatable; flags override)\n"
      << "  --print_config     print the full resolved configuration as YAML and stop\n"
      << "  --plugin=lib.so    load accelerators exported by tandem_register_accelerators() (repeatable)\n";
  if (stage == "predict") out << "  --predictions FILE where to write index,class lines (default: predictions.csv under default_root_dir)\n";
  out << "\n";
  // The class sections read better per class than as the union the parser accepts.
  ConfigSchema plain;
  plain.add_option(*schema.top_option("seed_everything"));
  plain.add_option(*schema.top_option("ckpt_path"));
  plain.add_section(*schema.section("trainer"));
  out << plain.help_text() << "\nmodel: the LightningModule (--model=NAME, default mlp)\n"
      << class_section_help("model", models::model_classes())
      << "\ndata: the data module (--data=NAME, default fashion_mnist)\n"
      << class_section_help("data", data_classes())
      << "\noptimizer: built by configure_optimizers (--optimizer=NAME, default Adam)\n"
      << class_section_help("optimizer", optimizer_classes())
      << "\nlr_scheduler: optional (--lr_scheduler=NAME, default CosineAnnealingLR over the run; null: none)\n"
      << class_section_help("lr_scheduler", lr_scheduler_classes()) << strategies_help()
      << "\ntrainer.callbacks: a list of {name: CLASS, OPTION: VALUE, ...}, e.g.\n"
      << "  --trainer.callbacks='[LearningRateMonitor, {name: EarlyStopping, monitor: val_loss, patience: 3}]'\n";
  for (const auto& c : trainer::callback_classes()) {
    out << "  " << c.name << "  " << c.help << "\n";
    for (const auto& o : c.options) {
      const bool required = (!o.default_value || o.default_value.IsNull()) && !o.nullable;
      out << "      " << o.name << "  (default: " << (required ? "required" : yaml_to_text(o.default_value)) << ")  "
          << o.help << "\n";
    }
  }
  return out.str();
}

std::optional<ParsedRun> parse_run(const std::vector<std::string>& args, std::vector<AppFlag> extra_flags,
                                   const std::function<std::string(const ConfigSchema&)>& help) {
  const ConfigSchema schema = make_run_schema();
  extra_flags.push_back({"plugin", "load a shared library that registers accelerators (repeatable)", true});
  ParsedRun run{parse_args(schema, args, extra_flags), {}};
  // Plugins first, so that --help can list what they register.
  if (auto it = run.args.app_flags.find("plugin"); it != run.args.app_flags.end()) {
    for (const auto& path : it->second) load_accelerator_plugin(path);
  }
  if (run.args.help) {
    std::cout << help(schema);
    return std::nullopt;
  }
  run.config = YAML::Clone(run.args.config);
  resolve_run_config(run.config);
  if (run.args.print_config) {
    std::cout << config_to_yaml(run.config);
    return std::nullopt;
  }
  return run;
}

}  // namespace tandem::cli
