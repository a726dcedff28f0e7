#include "engine/trainer/callbacks/callback_config.h"

#include <functional>
#include <limits>
#include <string>

#include "base/error.h"
#include "base/named_registry.h"
#include "engine/trainer/callbacks/early_stopping.h"
#include "engine/trainer/callbacks/learning_rate_monitor.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/callbacks/model_summary.h"

namespace tandem::trainer {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

YAML::Node null_node() { return YAML::Node(YAML::NodeType::Null); }
bool is_null(const YAML::Node& v) { return !v || v.IsNull(); }

OptionSpec nullable_option(std::string name, ValueKind kind, std::string help) {
  OptionSpec o = make_option(std::move(name), kind, null_node(), std::move(help));
  o.nullable = true;
  return o;
}

OptionSpec int_at_least(std::string name, int64_t default_value, double min, std::string help) {
  OptionSpec o = make_option(std::move(name), ValueKind::Int, YAML::Node(default_value), std::move(help));
  o.validate = [min](const YAML::Node& v, const std::string& key) { require_range(v, key, min, kInf); };
  return o;
}

OptionSpec nullable_int_at_least(std::string name, double min, std::string help) {
  OptionSpec o = nullable_option(std::move(name), ValueKind::Int, std::move(help));
  o.validate = [min](const YAML::Node& v, const std::string& key) { require_range(v, key, min, kInf); };
  return o;
}

OptionSpec nullable_positive_float(std::string name, std::string help) {
  OptionSpec o = nullable_option(std::move(name), ValueKind::Float, std::move(help));
  o.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, kInf, /*lo_open=*/true); };
  return o;
}

OptionSpec mode_option(const std::string& what) {
  OptionSpec o = make_option("mode", ValueKind::String, YAML::Node("min"), "min: lower " + what + " is better; max: higher");
  o.choices = {"min", "max"};
  return o;
}

std::optional<double> optional_double(const YAML::Node& v) {
  return is_null(v) ? std::nullopt : std::optional<double>(v.as<double>());
}
std::optional<bool> optional_bool(const YAML::Node& v) {
  return is_null(v) ? std::nullopt : std::optional<bool>(v.as<bool>());
}
std::string string_or_empty(const YAML::Node& v) { return is_null(v) ? "" : v.Scalar(); }

// A class the configuration can name: its options, and how a resolved entry (every option
// present, validated) becomes the callback.
using CallbackClass = ConfigClass<std::shared_ptr<Callback>(const YAML::Node& entry)>;

CallbackClass model_checkpoint_class() {
  ClassSpec spec{"ModelCheckpoint",
          "saves checkpoints, keeping the best save_top_k by monitor (replaces the default one)",
          {nullable_option("dirpath", ValueKind::String, "directory (null: <log_dir>/checkpoints)"),
           nullable_option("filename", ValueKind::String, "template like 'epoch={epoch}-{val_acc:.3f}' (null: {epoch}-{step})"),
           nullable_option("monitor", ValueKind::String, "metric to rank checkpoints by (null: keep the latest)"),
           mode_option("monitor"),
           int_at_least("save_top_k", 1, -1, "checkpoints to keep (-1: all, 0: none)"),
           make_option("save_last", ValueKind::Bool, YAML::Node(false), "also write last.safetensors"),
           nullable_int_at_least("every_n_epochs", 0, "save every n epochs (0: never; null: 1 unless a step or time trigger is set)"),
           int_at_least("every_n_train_steps", 0, 0, "save after every n optimizer steps (0: not by steps)"),
           nullable_positive_float("train_time_interval", "save after the first step this many seconds after the last save (null: not by time)"),
           make_option("auto_insert_metric_name", ValueKind::Bool, YAML::Node(true), "write 'name=' before each value"),
           nullable_option("save_on_train_epoch_end", ValueKind::Bool,
                           "true: save at train epoch end; false: after validation (null: Lightning's rule)")}};
  return {std::move(spec), [](const YAML::Node& c) -> std::shared_ptr<Callback> {
    ModelCheckpointOptions o;
    o.dirpath = string_or_empty(c["dirpath"]);
    o.filename = string_or_empty(c["filename"]);
    o.monitor = string_or_empty(c["monitor"]);
    o.mode = lower_case(c["mode"].Scalar());
    o.save_top_k = c["save_top_k"].as<int64_t>();
    o.save_last = c["save_last"].as<bool>();
    if (!is_null(c["every_n_epochs"])) o.every_n_epochs = c["every_n_epochs"].as<int64_t>();
    o.every_n_train_steps = c["every_n_train_steps"].as<int64_t>();
    o.train_time_interval = optional_double(c["train_time_interval"]);
    o.auto_insert_metric_name = c["auto_insert_metric_name"].as<bool>();
    o.save_on_train_epoch_end = optional_bool(c["save_on_train_epoch_end"]);
    return std::make_shared<ModelCheckpoint>(o);
  }};
}

CallbackClass early_stopping_class() {
  OptionSpec monitor = make_option("monitor", ValueKind::String, null_node(), "metric to watch, e.g. val_loss");
  OptionSpec min_delta = make_option("min_delta", ValueKind::Float, YAML::Node("0.0"), "smallest change that counts as an improvement");
  min_delta.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, kInf); };
  ClassSpec spec{"EarlyStopping",
          "stops fit when monitor has not improved by more than min_delta for patience checks",
          {monitor, min_delta, int_at_least("patience", 3, 0, "checks without improvement before stopping"),
           mode_option("monitor"),
           make_option("strict", ValueKind::Bool, YAML::Node(true), "a missing monitor is an error"),
           make_option("check_finite", ValueKind::Bool, YAML::Node(true), "stop when monitor is NaN or infinite"),
           nullable_option("stopping_threshold", ValueKind::Float, "stop once monitor is this good"),
           nullable_option("divergence_threshold", ValueKind::Float, "stop once monitor is this bad"),
           nullable_option("check_on_train_epoch_end", ValueKind::Bool, "check at train epoch end (null: Lightning's rule)")}};
  return {std::move(spec), [](const YAML::Node& c) -> std::shared_ptr<Callback> {
    EarlyStoppingOptions o;
    o.monitor = c["monitor"].Scalar();
    o.min_delta = c["min_delta"].as<double>();
    o.patience = c["patience"].as<int64_t>();
    o.mode = lower_case(c["mode"].Scalar());
    o.strict = c["strict"].as<bool>();
    o.check_finite = c["check_finite"].as<bool>();
    o.stopping_threshold = optional_double(c["stopping_threshold"]);
    o.divergence_threshold = optional_double(c["divergence_threshold"]);
    o.check_on_train_epoch_end = optional_bool(c["check_on_train_epoch_end"]);
    return std::make_shared<EarlyStopping>(o);
  }};
}

CallbackClass learning_rate_monitor_class() {
  OptionSpec interval = nullable_option("logging_interval", ValueKind::String, "step or epoch (null: the scheduler's interval)");
  interval.choices = {"step", "epoch"};
  return {{"LearningRateMonitor", "logs each param group's learning rate as lr-<Optimizer>", {interval}},
          [](const YAML::Node& c) -> std::shared_ptr<Callback> {
            const YAML::Node given = c["logging_interval"];
            return std::make_shared<LearningRateMonitor>(is_null(given) ? std::nullopt
                                                                         : std::optional<std::string>(given.Scalar()));
          }};
}

CallbackClass model_summary_class() {
  return {{"ModelSummary", "prints the parameter table at the start of fit (replaces the default one)",
           {int_at_least("max_depth", 1, -1, "module depth to list (-1: all)")}},
          [](const YAML::Node& c) -> std::shared_ptr<Callback> {
            return std::make_shared<ModelSummary>(c["max_depth"].as<int>());
          }};
}

// The one list of configurable callback classes: resolve_class_section reads their specs, and
// an entry it has resolved is built by the class of the same (canonical) name.
const std::vector<CallbackClass>& configurable_callbacks() {
  static const std::vector<CallbackClass> classes{model_checkpoint_class(), early_stopping_class(),
                                                  learning_rate_monitor_class(), model_summary_class()};
  return classes;
}

std::shared_ptr<Callback> make_callback(const YAML::Node& resolved) {
  const std::string name = resolved["name"].Scalar();
  for (const CallbackClass& c : configurable_callbacks())
    if (c.spec.name == name) return c.build(resolved);
  throw ConfigError("callback class " + name + " is not configurable");  // resolve_class_section let it through
}

// One entry in the {name: Class, option: value} spelling. ConfigError for anything else.
YAML::Node normalized_entry(const YAML::Node& entry, const std::string& key) {
  YAML::Node out(YAML::NodeType::Map);
  if (entry.IsScalar()) {
    out["name"] = entry.Scalar();
    return out;
  }
  const std::string spellings = "give a class name (LearningRateMonitor), {name: EarlyStopping, monitor: val_loss}, "
                                "or {class_path: EarlyStopping, init_args: {monitor: val_loss}}";
  if (!entry.IsMap()) throw ConfigError("--" + key + "=" + yaml_to_text(entry) + " is not valid: " + spellings);
  if (!entry["class_path"]) {
    if (is_null(entry["name"])) throw ConfigError("--" + key + "=" + yaml_to_text(entry) + " names no callback class; " + spellings);
    return YAML::Clone(entry);
  }
  if (!entry["class_path"].IsScalar()) throw ConfigError("--" + key + ".class_path must be a class name; " + spellings);
  std::string name = entry["class_path"].Scalar();
  name = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);  // lightning.pytorch.callbacks.X -> X
  out["name"] = name;
  for (const auto& item : entry) {
    const std::string k = item.first.Scalar();
    if (k == "class_path") continue;
    if (k != "init_args") {
      throw ConfigError("--" + key + "." + k + " is not valid next to class_path: put the callback's options under init_args");
    }
    if (is_null(item.second)) continue;
    if (!item.second.IsMap()) throw ConfigError("--" + key + ".init_args must be a mapping of option: value");
    for (const auto& arg : item.second) out[arg.first.Scalar()] = YAML::Clone(arg.second);
  }
  return out;
}

// Entry i of the list, resolved against the callback classes (see resolve_class_section).
YAML::Node resolved_entry(const YAML::Node& entry, size_t i) {
  const std::string key = "trainer.callbacks[" + std::to_string(i) + "]";
  YAML::Node holder(YAML::NodeType::Map);
  holder[key] = normalized_entry(entry, key);
  resolve_class_section(key, callback_classes(), holder);
  return holder[key];
}

}  // namespace

const std::vector<ClassSpec>& callback_classes() {
  static const std::vector<ClassSpec> specs = specs_of(configurable_callbacks());
  return specs;
}

void resolve_callbacks_config(YAML::Node& config) {
  YAML::Node trainer = config["trainer"];
  if (!trainer || !trainer.IsMap() || is_null(trainer["callbacks"])) return;
  const YAML::Node list = trainer["callbacks"];
  if (!list.IsSequence()) {
    throw ConfigError("--trainer.callbacks=" + yaml_to_text(list) + " is not valid: expected a list like "
                      "[LearningRateMonitor, {name: EarlyStopping, monitor: val_loss}]");
  }
  YAML::Node resolved(YAML::NodeType::Sequence);
  for (size_t i = 0; i < list.size(); ++i) resolved.push_back(resolved_entry(list[i], i));
  trainer["callbacks"] = resolved;
}

std::vector<std::shared_ptr<Callback>> callbacks_from_config(const YAML::Node& list) {
  std::vector<std::shared_ptr<Callback>> out;
  if (is_null(list)) return out;
  YAML::Node holder(YAML::NodeType::Map);
  holder["trainer"]["callbacks"] = YAML::Clone(list);
  resolve_callbacks_config(holder);
  for (const auto& entry : holder["trainer"]["callbacks"]) out.push_back(make_callback(entry));
  return out;
}

}  // namespace tandem::trainer
