#include "engine/config/trainer_section.h"

#include <tuple>

#include "engine/accelerators/device_parsing.h"
#include "engine/accelerators/precision.h"
#include "engine/config/class_section.h"
#include "engine/config/config_args.h"
#include "engine/core/error.h"

namespace tandem {

namespace {

YAML::Node null_node() { return YAML::Node(YAML::NodeType::Null); }

// Integers at or above `min`, with the option's own words when they are not.
std::function<void(const YAML::Node&, const std::string&)> at_least(int min, std::string meaning) {
  return [min, meaning](const YAML::Node& v, const std::string& key) {
    if (!v.IsScalar()) return;
    int n = 0;
    if (parse_int_strict(v.Scalar(), &n) && n < min) {
      throw ConfigError("--" + key + "=" + v.Scalar() + " is not valid: " + meaning);
    }
  };
}

}  // namespace

SectionSpec trainer_section() {
  SectionSpec s;
  s.name = "trainer";
  s.help = "how and where to train (Lightning's Trainer arguments)";
  auto add = [&](OptionSpec o) { s.options.push_back(std::move(o)); };

  add(make_option("accelerator", ValueKind::String, YAML::Node("auto"),
             "auto, cpu, gpu (= cuda), cuda, or a registered accelerator"));
  add(make_option("devices", ValueKind::Devices, YAML::Node("auto"),
             "which devices: k (first k), -1 or auto (all), [1, 3] or \"1, 3\" (those GPUs); on "
             "cpu, the number of processes"));
  OptionSpec strategy = make_option("strategy", ValueKind::Any, YAML::Node("auto"),
                                    "auto, or a registered strategy (the command line lists them from the "
                                    "registry); with options: --trainer.strategy.<option>=VALUE or "
                                    "{name: bagua, algorithm: bytegrad} (docs/STRATEGIES.md)");
  strategy.takes_sub_options = true;
  strategy.validate = [](const YAML::Node& v, const std::string& key) { strategy_from_yaml(v, key); };
  add(strategy);
  OptionSpec nodes = make_option("num_nodes", ValueKind::Int, YAML::Node(1), "number of machines");
  nodes.validate = at_least(1, "num_nodes must be a positive integer (the number of machines)");
  add(nodes);
  OptionSpec precision = make_option("precision", ValueKind::String, YAML::Node("32-true"),
                                "32-true (32), 16-mixed (16), bf16-mixed (bf16), 64-true (64, CPU only)");
  precision.validate = [](const YAML::Node& v, const std::string&) { parse_precision(v.Scalar()); };
  add(precision);
  add(make_option("allow_tf32", ValueKind::Bool, YAML::Node(false),
             "let float32 matmuls and convolutions on GPUs use TF32 tensor cores (faster, 10-bit mantissa products)"));
  add(make_option("cuda_graph", ValueKind::Bool, YAML::Node(false),
             "capture each training step's forward and backward into a CUDA graph and replay it (one GPU; docs/CUDA.md)"));
  add(make_option("auto_select_gpus", ValueKind::Bool, YAML::Node(false),
             "with devices=k, use the first k GPUs that are free now"));
  OptionSpec backend = make_option("process_group_backend", ValueKind::String, YAML::Node("auto"),
                              "DDP transport: auto (nccl for GPUs when built, else mpi), mpi, nccl");
  backend.choices = {"auto", "mpi", "nccl", "local"};
  add(backend);
  add(make_option("collective_timeout", ValueKind::Float, YAML::Node(600.0),
             "seconds a collective may take before the job fails with an error naming the missing ranks"));
  OptionSpec step_timeout = make_option("step_timeout", ValueKind::Float, null_node(),
                                        "seconds a rank may go without progress (a step phase, an evaluation batch) "
                                        "before it ends the job (null: collective_timeout + 10 s with several "
                                        "processes, off in one; 0: off)");
  step_timeout.nullable = true;
  add(step_timeout);
  OptionSpec restarts = make_option("max_restarts", ValueKind::Int, YAML::Node(0),
                                    "fit: relaunch a job that lost a rank or timed out this many times, from its "
                                    "newest complete checkpoint (docs/ELASTIC.md)");
  restarts.validate = at_least(0, "max_restarts must be >= 0 (0: no restarts)");
  add(restarts);
  OptionSpec min_processes = make_option("min_processes", ValueKind::Int, null_node(),
                                         "elastic size: a restart runs at the processes still available, never fewer "
                                         "than this (null: always the full size)");
  min_processes.nullable = true;
  min_processes.validate = at_least(1, "min_processes must be a positive number of processes, or null");
  add(min_processes);
  OptionSpec elastic_batch = make_option("elastic_batch", ValueKind::String, YAML::Node("per_rank"),
                                         "after an elastic restart at fewer processes keep the per-rank batch "
                                         "(per_rank) or the global batch (global: accumulate_grad_batches makes up "
                                         "the difference)");
  elastic_batch.choices = {"per_rank", "global"};
  add(elastic_batch);

  OptionSpec max_epochs = make_option("max_epochs", ValueKind::Int, null_node(),
                                 "stop after this many epochs (null: 1000 unless max_steps is set; -1: no limit)");
  max_epochs.nullable = true;
  max_epochs.validate = at_least(-1, "max_epochs must be >= -1 (-1 means no limit)");
  add(max_epochs);
  OptionSpec max_steps = make_option("max_steps", ValueKind::Int, YAML::Node(-1), "stop after this many optimizer steps (-1: no limit)");
  max_steps.validate = at_least(-1, "max_steps must be >= -1 (-1 means no limit)");
  add(max_steps);
  for (const char* stage : {"train", "val", "test", "predict"}) {
    add(make_option(std::string("limit_") + stage + "_batches", ValueKind::Number, YAML::Node("1.0"),
               std::string("batches per ") + stage + " epoch: a count (int) or a fraction (float)"));
  }
  add(make_option("val_check_interval", ValueKind::Number, YAML::Node("1.0"),
             "validate every this many training batches (int) or fraction of an epoch (float)"));
  OptionSpec every_n = make_option("check_val_every_n_epoch", ValueKind::Int, YAML::Node(1),
                              "validate every n epochs (null: only by val_check_interval)");
  every_n.nullable = true;
  every_n.validate = at_least(1, "check_val_every_n_epoch must be >= 1 or null");
  add(every_n);
  OptionSpec sanity = make_option("num_sanity_val_steps", ValueKind::Int, YAML::Node(2), "validation batches run before training (-1: all)");
  sanity.validate = at_least(-1, "num_sanity_val_steps must be >= -1 (-1 means all)");
  add(sanity);
  OptionSpec accumulate = make_option("accumulate_grad_batches", ValueKind::Int, YAML::Node(1), "batches per optimizer step");
  accumulate.validate = at_least(1, "accumulate_grad_batches must be a positive integer");
  add(accumulate);
  OptionSpec clip = make_option("gradient_clip_val", ValueKind::Float, null_node(), "clip gradients at this value (null: off)");
  clip.nullable = true;
  add(clip);
  OptionSpec algorithm = make_option("gradient_clip_algorithm", ValueKind::String, YAML::Node("norm"), "how to clip");
  algorithm.choices = {"norm", "value"};
  add(algorithm);
  OptionSpec log_every = make_option("log_every_n_steps", ValueKind::Int, YAML::Node(50), "log metrics every n steps");
  log_every.validate = at_least(1, "log_every_n_steps must be a positive integer");
  add(log_every);
  OptionSpec root = make_option("default_root_dir", ValueKind::String, null_node(), "where logs and checkpoints go (null: the current directory)");
  root.nullable = true;
  add(root);
  add(make_option("enable_checkpointing", ValueKind::Bool, YAML::Node(true), "save checkpoints"));
  add(make_option("enable_progress_bar", ValueKind::Bool, YAML::Node(true), "show a progress bar on rank 0"));
  add(make_option("enable_model_summary", ValueKind::Bool, YAML::Node(true), "print the parameter table"));
  OptionSpec fast = make_option("fast_dev_run", ValueKind::Any, YAML::Node(false),
                           "run n (true: 1) batches of each stage to check the code, no logging or checkpoints");
  fast.validate = [](const YAML::Node& v, const std::string& key) {
    int n = 0;
    const std::string text = v.IsScalar() ? v.Scalar() : "";
    if (text == "true" || text == "false" || (parse_int_strict(text, &n) && n >= 0)) return;
    throw ConfigError("--" + key + "=" + yaml_to_text(v) + " is not valid: expected true, false, "
                      "or a number of batches >= 0");
  };
  add(fast);
  add(make_option("deterministic", ValueKind::Bool, YAML::Node(false), "accepted; every kernel is deterministic anyway"));
  OptionSpec callbacks = make_option("callbacks", ValueKind::List, null_node(),
                               "callbacks by class: [LearningRateMonitor, {name: EarlyStopping, monitor: val_loss, "
                               "patience: 3}, {name: ModelCheckpoint, monitor: val_acc, mode: max}] (docs/CLI.md)");
  callbacks.nullable = true;
  add(callbacks);
  return s;
}

ConfigSchema make_trainer_schema() {
  ConfigSchema schema;
  schema.add_section(trainer_section());
  return schema;
}

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

HardwareOptions hardware_options_from_config(const YAML::Node& config) {
  auto scalar = [&](const std::string& key) {
    const YAML::Node v = get_config_value(config, "trainer." + key);
    if (!v.IsScalar()) throw ConfigError("--trainer." + key + "=" + yaml_to_text(v) + " is not valid: expected a single value");
    return v.Scalar();
  };
  HardwareOptions options;
  options.accelerator = scalar("accelerator");
  options.devices = devices_from_yaml(get_config_value(config, "trainer.devices"));
  std::tie(options.strategy, options.strategy_options) =
      strategy_from_yaml(get_config_value(config, "trainer.strategy"), "trainer.strategy");
  if (!parse_int_strict(scalar("num_nodes"), &options.num_nodes)) {
    throw ConfigError("--trainer.num_nodes=" + scalar("num_nodes") + " is not valid: expected a positive integer");
  }
  options.precision = scalar("precision");
  options.auto_select_gpus = get_config_value(config, "trainer.auto_select_gpus").as<bool>();
  return options;
}

}  // namespace tandem
