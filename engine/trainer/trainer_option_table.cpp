#include "engine/trainer/trainer_option_table.h"

#include <cmath>
#include <cstdlib>
#include <tuple>
#include <type_traits>

#include "base/error.h"
#include "base/named_registry.h"
#include "engine/accelerators/device_parsing.h"
#include "engine/accelerators/precision.h"
#include "engine/config/class_section.h"
#include "engine/config/config_args.h"
#include "engine/trainer/callbacks/callback_config.h"
#include "engine/trainer/trainer_section.h"

namespace tandem::trainer {

namespace {

std::string scalar_of(const YAML::Node& v, const std::string& key) {
  if (!v || !v.IsScalar()) throw ConfigError("--" + key + "=" + yaml_to_text(v) + " is not valid: expected a single value");
  return v.Scalar();
}

[[noreturn]] void wrong_shape(const std::string& key, const std::string& text, const std::string& expected) {
  throw ConfigError("--" + key + "=" + text + " is not valid: expected " + expected);
}

// The whole scalar read by parse (strtoll, strtod); ConfigError saying `expected` otherwise.
template <typename T, typename Parse>
T whole_scalar(const YAML::Node& v, const std::string& key, const char* expected, Parse parse) {
  const std::string s = scalar_of(v, key);
  char* end = nullptr;
  const T out = static_cast<T>(parse(s.c_str(), &end));
  if (s.empty() || *end != '\0') wrong_shape(key, s, expected);
  return out;
}

// How a member's type is declared, read from YAML and shown in messages.
template <typename T> struct OptionType;

template <> struct OptionType<bool> {
  static constexpr ValueKind kind = ValueKind::Bool;
  static YAML::Node yaml(bool v) { return YAML::Node(v); }
  static bool read(const YAML::Node& v, const std::string& key) {
    bool b = false;
    if (!YAML::convert<bool>::decode(v, b)) wrong_shape(key, scalar_of(v, key), "true or false");
    return b;
  }
  static std::string text(bool v) { return v ? "true" : "false"; }
};

template <> struct OptionType<int64_t> {
  static constexpr ValueKind kind = ValueKind::Int;
  static YAML::Node yaml(int64_t v) { return YAML::Node(v); }
  static int64_t read(const YAML::Node& v, const std::string& key) {
    return whole_scalar<int64_t>(v, key, "an integer", [](const char* s, char** end) { return std::strtoll(s, end, 10); });
  }
  static std::string text(int64_t v) { return std::to_string(v); }
};

template <> struct OptionType<int> {
  static constexpr ValueKind kind = ValueKind::Int;
  static YAML::Node yaml(int v) { return YAML::Node(v); }
  static int read(const YAML::Node& v, const std::string& key) {
    int n = 0;
    if (!parse_int_strict(scalar_of(v, key), &n)) wrong_shape(key, v.Scalar(), "an integer");
    return n;
  }
  static std::string text(int v) { return std::to_string(v); }
};

template <> struct OptionType<double> {
  static constexpr ValueKind kind = ValueKind::Float;
  static YAML::Node yaml(double v) { return YAML::Node(v); }
  static double read(const YAML::Node& v, const std::string& key) {
    return whole_scalar<double>(v, key, "a number", [](const char* s, char** end) { return std::strtod(s, end); });
  }
  static std::string text(double v) { return std::to_string(v); }
};

template <> struct OptionType<std::string> {
  static constexpr ValueKind kind = ValueKind::String;
  static YAML::Node yaml(const std::string& v) { return YAML::Node(v); }
  static std::string read(const YAML::Node& v, const std::string& key) { return scalar_of(v, key); }
  static std::string text(const std::string& v) { return v.empty() ? "''" : v; }
};

template <> struct OptionType<BatchCount> {
  static constexpr ValueKind kind = ValueKind::Number;
  static YAML::Node yaml(const BatchCount& v) { return YAML::Node(v.str()); }
  static BatchCount read(const YAML::Node& v, const std::string& key) {
    return BatchCount::parse(scalar_of(v, key), key.substr(key.find('.') + 1));
  }
  static std::string text(const BatchCount& v) { return v.str(); }
};

template <> struct OptionType<FastDevRun> {
  static constexpr ValueKind kind = ValueKind::Any;
  static YAML::Node yaml(const FastDevRun& v) { return v.batches == 0 ? YAML::Node(false) : YAML::Node(v.batches); }
  static FastDevRun read(const YAML::Node& v, const std::string& key) {
    const std::string text = v.IsScalar() ? v.Scalar() : yaml_to_text(v);
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
    int n = 0;
    if (!v.IsScalar() || !parse_int_strict(text, &n)) wrong_shape(key, text, "true, false, or a number of batches >= 0");
    return n;
  }
  static std::string text(const FastDevRun& v) { return std::to_string(v.batches); }
};

template <> struct OptionType<PrecisionSpec> {
  static constexpr ValueKind kind = ValueKind::String;
  static YAML::Node yaml(const PrecisionSpec& v) { return YAML::Node(v.str()); }
  static PrecisionSpec read(const YAML::Node& v, const std::string& key) { return scalar_of(v, key); }
  static std::string text(const PrecisionSpec& v) { return v.str(); }
};

template <> struct OptionType<DevicesSpec> {
  static constexpr ValueKind kind = ValueKind::Devices;
  static YAML::Node yaml(const DevicesSpec& v) {
    if (v.kind() == DevicesSpec::Kind::Int) return YAML::Node(v.as_int());
    if (v.kind() == DevicesSpec::Kind::String) return YAML::Node(v.as_string());
    YAML::Node list(YAML::NodeType::Sequence);
    for (int i : v.as_list()) list.push_back(i);
    list.SetStyle(YAML::EmitterStyle::Flow);
    return list;
  }
  static DevicesSpec read(const YAML::Node& v, const std::string&) { return devices_from_yaml(v); }
  static std::string text(const DevicesSpec& v) { return v.str(); }
};

template <typename T> struct OptionType<std::optional<T>> {
  static constexpr ValueKind kind = OptionType<T>::kind;
  static YAML::Node yaml(const std::optional<T>& v) { return v ? OptionType<T>::yaml(*v) : YAML::Node(YAML::NodeType::Null); }
  static std::optional<T> read(const YAML::Node& v, const std::string& key) {
    if (!v || v.IsNull()) return std::nullopt;
    return OptionType<T>::read(v, key);
  }
  static std::string text(const std::optional<T>& v) { return v ? OptionType<T>::text(*v) : "null"; }
};

template <typename T> constexpr bool kNullable = false;
template <typename T> constexpr bool kNullable<std::optional<T>> = true;

template <typename T> using Check = std::function<std::string(const T&)>;

// The row of member `member` (of TrainerOptions or its HardwareOptions base) under `key`.
template <typename T, typename Class>
TrainerOptionRow option(const std::string& key, T Class::*member, const std::string& help, Check<T> check = {}) {
  static_assert(std::is_base_of_v<Class, TrainerOptions>);
  using Type = OptionType<T>;
  TrainerOptionRow row;
  row.hardware = !std::is_same_v<Class, TrainerOptions>;
  const TrainerOptions defaults;
  row.spec = make_option(key, Type::kind, Type::yaml(defaults.*member), help);
  row.spec.nullable = kNullable<T>;
  const std::string dotted = "trainer." + key;
  row.read = [member, dotted](TrainerOptions& o, const YAML::Node& v) { o.*member = Type::read(v, dotted); };
  row.text = [member](const TrainerOptions& o) { return Type::text(o.*member); };
  if (check) {
    row.problem = [member, check](const TrainerOptions& o) { return check(o.*member); };
    row.spec.validate = [read = row.read, problem = row.problem](const YAML::Node& v, const std::string& key) {
      TrainerOptions scratch;
      read(scratch, v);
      const std::string wrong = problem(scratch);
      if (!wrong.empty()) throw ConfigError("--" + key + "=" + yaml_to_text(v) + " is not valid: " + wrong);
    };
  }
  return row;
}

TrainerOptionRow with_choices(TrainerOptionRow row, std::vector<std::string> choices) {
  row.spec.choices = std::move(choices);
  return row;
}

// Integers at or above `min` (an unset optional passes), with the option's own words.
template <typename T>
Check<T> at_least(int64_t min, std::string expected) {
  return [min, expected](const T& v) -> std::string {
    if constexpr (kNullable<T>) {
      return v && *v < min ? expected : "";
    } else {
      return v < min ? expected : "";
    }
  };
}

Check<std::string> one_of(std::vector<std::string> allowed, std::string expected) {
  return [allowed, expected](const std::string& v) {
    for (const auto& a : allowed) {
      if (v == a) return std::string();
    }
    return expected;
  };
}

Check<BatchCount> batch_limit() {
  return [](const BatchCount& limit) -> std::string {
    if (limit.is_count()) return limit.count() >= 0 ? "" : "expected a number of batches >= 0 (int) or a fraction in [0.0, 1.0] (float)";
    const double f = limit.fraction();
    return f >= 0.0 && f <= 1.0 ? "" : "a float is a fraction of the batches and must be in [0.0, 1.0]; write an int (e.g. 10) "
                                       "for a number of batches";
  };
}

Check<BatchCount> validation_interval() {
  return [](const BatchCount& v) -> std::string {
    if (v.is_count()) return v.count() >= 1 ? "" : "an int is a number of training batches and must be >= 1";
    const double f = v.fraction();
    return f > 0.0 && f <= 1.0 ? "" : "a float is a fraction of the training epoch and must be in (0.0, 1.0]; write an int "
                                      "(e.g. 100) to validate every that many batches";
  };
}

// An accepted option nothing reads.
TrainerOptionRow accepted(const std::string& key, ValueKind kind, YAML::Node default_value, const std::string& help) {
  TrainerOptionRow row;
  row.spec = make_option(key, kind, std::move(default_value), help);
  row.text = [](const TrainerOptions&) { return std::string(); };
  return row;
}

void add_hardware_rows(std::vector<TrainerOptionRow>& rows) {
  rows.push_back(option("accelerator", &HardwareOptions::accelerator, "auto, cpu, gpu (= cuda), cuda, or a registered accelerator"));
  rows.push_back(option("devices", &HardwareOptions::devices,
                        "which devices: k (first k), -1 or auto (all), [1, 3] or \"1, 3\" (those GPUs); on cpu, the "
                        "number of processes"));
  TrainerOptionRow strategy = option("strategy", &HardwareOptions::strategy,
                                     "auto, or a registered strategy (the command line lists them from the registry); with "
                                     "options: --trainer.strategy.<option>=VALUE or {name: bagua, algorithm: bytegrad} "
                                     "(docs/STRATEGIES.md)");
  strategy.spec.kind = ValueKind::Any;
  strategy.spec.takes_sub_options = true;
  strategy.spec.validate = [](const YAML::Node& v, const std::string& key) { strategy_from_yaml(v, key); };
  strategy.read = [](TrainerOptions& o, const YAML::Node& v) {
    std::tie(o.strategy, o.strategy_options) = strategy_from_yaml(v, "trainer.strategy");
  };
  rows.push_back(strategy);
  rows.push_back(option("num_nodes", &HardwareOptions::num_nodes, "number of machines",
                        at_least<int>(1, "expected a positive integer (the number of machines)")));
  rows.push_back(option("precision", &HardwareOptions::precision,
                        "32-true (32), 16-mixed (16), bf16-mixed (bf16), 64-true (64, CPU only)",
                        Check<PrecisionSpec>([](const PrecisionSpec& p) {
                          parse_precision(p);  // throws, naming the allowed values
                          return std::string();
                        })));
}

void add_device_and_job_rows(std::vector<TrainerOptionRow>& rows) {
  using O = TrainerOptions;
  rows.push_back(option("allow_tf32", &O::allow_tf32,
                        "let float32 matmuls and convolutions on GPUs use TF32 tensor cores (faster, 10-bit mantissa products)"));
  rows.push_back(option("cuda_graph", &O::cuda_graph,
                        "capture each training step's forward and backward into a CUDA graph and replay it (one GPU; docs/CUDA.md)"));
  rows.push_back(option("auto_select_gpus", &HardwareOptions::auto_select_gpus, "with devices=k, use the first k GPUs that are free now"));
  TrainerOptionRow backend = with_choices(option("process_group_backend", &O::process_group_backend,
                                                 "DDP transport: auto (nccl for GPUs when built, else mpi), mpi, nccl",
                                                 one_of({"auto", "mpi", "nccl", "local"}, "expected auto, mpi, nccl or local")),
                                          {"auto", "mpi", "nccl", "local"});
  backend.read = [](O& o, const YAML::Node& v) { o.process_group_backend = lower_case(scalar_of(v, "trainer.process_group_backend")); };
  rows.push_back(backend);
  rows.push_back(option("collective_timeout", &O::collective_timeout,
                        "seconds a collective may take before the job fails with an error naming the missing ranks",
                        Check<double>([](double v) {
                          return std::isfinite(v) && v > 0.0 ? "" : "expected a number of seconds > 0 (default 600)";
                        })));
  rows.push_back(option("step_timeout", &O::step_timeout,
                        "seconds a rank may go without progress (a step phase, an evaluation batch) before it ends the job "
                        "(null: collective_timeout + 10 s with several processes, off in one; 0: off)",
                        Check<std::optional<double>>([](const std::optional<double>& v) {
                          return !v || (std::isfinite(*v) && *v >= 0.0) ? "" : "expected a number of seconds > 0, 0 (off), "
                                                                              "or null (collective_timeout with several processes)";
                        })));
  rows.push_back(option("max_restarts", &O::max_restarts,
                        "fit: relaunch a job that lost a rank or timed out this many times, from its newest complete "
                        "checkpoint (docs/ELASTIC.md)",
                        at_least<int64_t>(0, "expected a number of restarts >= 0 (0: no restarts)")));
  rows.push_back(option("min_processes", &O::min_processes,
                        "elastic size: a restart runs at the processes still available, never fewer than this (null: "
                        "always the full size)",
                        at_least<std::optional<int64_t>>(1, "expected a number of processes >= 1, or null")));
  rows.push_back(with_choices(option("elastic_batch", &O::elastic_batch,
                                     "after an elastic restart at fewer processes keep the per-rank batch (per_rank) or the "
                                     "global batch (global: accumulate_grad_batches makes up the difference)",
                                     one_of({"per_rank", "global"}, "expected per_rank or global")),
                              {"per_rank", "global"}));
}

void add_loop_rows(std::vector<TrainerOptionRow>& rows) {
  using O = TrainerOptions;
  rows.push_back(option("max_epochs", &O::max_epochs,
                        "stop after this many epochs (null: 1000 unless max_steps is set; -1: no limit)",
                        at_least<std::optional<int64_t>>(-1, "expected -1 (no limit) or a number of epochs >= 0 (an int >= -1)")));
  rows.push_back(option("max_steps", &O::max_steps, "stop after this many optimizer steps (-1: no limit)",
                        at_least<int64_t>(-1, "expected -1 (no limit) or a number of optimizer steps >= 0")));
  rows.push_back(option("limit_train_batches", &O::limit_train_batches, "batches per train epoch: a count (int) or a fraction (float)", batch_limit()));
  rows.push_back(option("limit_val_batches", &O::limit_val_batches, "batches per val epoch: a count (int) or a fraction (float)", batch_limit()));
  rows.push_back(option("limit_test_batches", &O::limit_test_batches, "batches per test epoch: a count (int) or a fraction (float)", batch_limit()));
  rows.push_back(option("limit_predict_batches", &O::limit_predict_batches, "batches per predict epoch: a count (int) or a fraction (float)", batch_limit()));
  rows.push_back(option("val_check_interval", &O::val_check_interval,
                        "validate every this many training batches (int) or fraction of an epoch (float)", validation_interval()));
  rows.push_back(option("check_val_every_n_epoch", &O::check_val_every_n_epoch, "validate every n epochs (null: only by val_check_interval)",
                        at_least<std::optional<int64_t>>(1, "expected an int >= 1, or null to validate only by val_check_interval")));
  rows.push_back(option("num_sanity_val_steps", &O::num_sanity_val_steps, "validation batches run before training (-1: all)",
                        at_least<int64_t>(-1, "expected -1 (all) or a number of batches >= 0")));
  rows.push_back(option("accumulate_grad_batches", &O::accumulate_grad_batches, "batches per optimizer step",
                        at_least<int64_t>(1, "expected a number of batches >= 1")));
  rows.push_back(option("gradient_clip_val", &O::gradient_clip_val, "clip gradients at this value (null: off)",
                        Check<std::optional<double>>([](const std::optional<double>& v) {
                          return !v || (std::isfinite(*v) && *v >= 0.0) ? "" : "expected a finite number >= 0, or null for no clipping";
                        })));
  rows.push_back(with_choices(option("gradient_clip_algorithm", &O::gradient_clip_algorithm, "how to clip",
                                     one_of({"norm", "value"}, "expected 'norm' or 'value'")),
                              {"norm", "value"}));
  rows.push_back(option("log_every_n_steps", &O::log_every_n_steps, "log metrics every n steps",
                        at_least<int64_t>(1, "expected a number of steps >= 1")));
}

void add_output_rows(std::vector<TrainerOptionRow>& rows) {
  using O = TrainerOptions;
  TrainerOptionRow root = option("default_root_dir", &O::default_root_dir, "where logs and checkpoints go (null: the current directory)",
                                 Check<std::string>([](const std::string& v) {
                                   return v.empty() ? "expected a directory (\".\" for the current one)" : "";
                                 }));
  root.spec.default_value = YAML::Node(YAML::NodeType::Null);  // null: the member's "."
  root.spec.nullable = true;
  root.read = [](O& o, const YAML::Node& v) {
    if (v && !v.IsNull()) o.default_root_dir = scalar_of(v, "trainer.default_root_dir");
  };
  rows.push_back(root);
  rows.push_back(option("enable_checkpointing", &O::enable_checkpointing, "save checkpoints"));
  rows.push_back(option("enable_progress_bar", &O::enable_progress_bar, "show a progress bar on rank 0"));
  rows.push_back(option("enable_model_summary", &O::enable_model_summary, "print the parameter table"));
  rows.push_back(option("fast_dev_run", &O::fast_dev_run,
                        "run n (true: 1) batches of each stage to check the code, no logging or checkpoints",
                        Check<FastDevRun>([](const FastDevRun& v) {
                          return v.batches >= 0 ? "" : "expected true, false or a number of batches >= 0";
                        })));
  rows.push_back(accepted("deterministic", ValueKind::Bool, YAML::Node(false), "accepted; every kernel is deterministic anyway"));
  TrainerOptionRow callbacks = accepted("callbacks", ValueKind::List, YAML::Node(YAML::NodeType::Null),
                                        "callbacks by class: [LearningRateMonitor, {name: EarlyStopping, monitor: val_loss, "
                                        "patience: 3}, {name: ModelCheckpoint, monitor: val_acc, mode: max}] (docs/CLI.md)");
  callbacks.spec.nullable = true;
  callbacks.read = [](O& o, const YAML::Node& v) { o.callbacks = callbacks_from_config(v); };
  rows.push_back(callbacks);
}

}  // namespace

const std::vector<TrainerOptionRow>& trainer_option_table() {
  static const std::vector<TrainerOptionRow> rows = [] {
    std::vector<TrainerOptionRow> out;
    add_hardware_rows(out);
    add_device_and_job_rows(out);
    add_loop_rows(out);
    add_output_rows(out);
    return out;
  }();
  return rows;
}

}  // namespace tandem::trainer
