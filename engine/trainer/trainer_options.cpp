#include "engine/trainer/trainer_options.h"

#include <cctype>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "engine/accelerators/device_parsing.h"
#include "engine/accelerators/precision.h"
#include "engine/config/config_args.h"
#include "engine/config/config_schema.h"
#include "engine/config/trainer_section.h"
#include "engine/core/error.h"
#include "engine/trainer/callbacks/callback_config.h"

namespace tandem::trainer {

namespace {

std::string invalid(const std::string& option, const std::string& value) {
  return "trainer option " + option + "=" + value + " is not valid: ";
}

void check_limit(const BatchCount& limit, const std::string& option) {
  if (limit.is_count()) {
    TANDEM_CHECK(limit.count() >= 0, ConfigError,
                 invalid(option, limit.str()) + "expected a number of batches >= 0 (int) or a fraction in [0.0, 1.0] (float)");
  } else {
    const double f = limit.fraction();
    TANDEM_CHECK(f >= 0.0 && f <= 1.0, ConfigError,
                 invalid(option, limit.str()) + "a float is a fraction of the batches and must be in [0.0, 1.0]; "
                 "write an int (e.g. 10) for a number of batches");
  }
}

}  // namespace

BatchCount BatchCount::parse(const std::string& text, const std::string& option) {
  const bool looks_float = text.find_first_of(".eE") != std::string::npos || text == "inf";
  char* end = nullptr;
  if (looks_float) {
    const double v = std::strtod(text.c_str(), &end);
    if (!text.empty() && end && *end == '\0') return BatchCount(v);
  } else {
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && end && *end == '\0') return BatchCount(static_cast<int64_t>(v));
  }
  throw ConfigError(invalid(option, text) + "expected a number of batches (int, e.g. 10) or a fraction (float, e.g. 0.25)");
}

std::string BatchCount::str() const {
  if (is_count()) return std::to_string(count());
  std::ostringstream s;
  s << fraction();
  std::string out = s.str();
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

void validate_trainer_options(const TrainerOptions& o) {
  if (o.max_epochs) {
    TANDEM_CHECK(*o.max_epochs >= -1, ConfigError,
                 invalid("max_epochs", std::to_string(*o.max_epochs)) + "expected -1 (no limit) or a number of epochs >= 0");
  }
  TANDEM_CHECK(o.max_steps >= -1, ConfigError,
               invalid("max_steps", std::to_string(o.max_steps)) + "expected -1 (no limit) or a number of optimizer steps >= 0");
  check_limit(o.limit_train_batches, "limit_train_batches");
  check_limit(o.limit_val_batches, "limit_val_batches");
  check_limit(o.limit_test_batches, "limit_test_batches");
  check_limit(o.limit_predict_batches, "limit_predict_batches");
  if (o.val_check_interval.is_count()) {
    TANDEM_CHECK(o.val_check_interval.count() >= 1, ConfigError,
                 invalid("val_check_interval", o.val_check_interval.str()) + "an int is a number of training batches and must be >= 1");
  } else {
    const double f = o.val_check_interval.fraction();
    TANDEM_CHECK(f > 0.0 && f <= 1.0, ConfigError,
                 invalid("val_check_interval", o.val_check_interval.str()) + "a float is a fraction of the training epoch "
                 "and must be in (0.0, 1.0]; write an int (e.g. 100) to validate every that many batches");
  }
  if (o.check_val_every_n_epoch) {
    TANDEM_CHECK(*o.check_val_every_n_epoch >= 1, ConfigError,
                 invalid("check_val_every_n_epoch", std::to_string(*o.check_val_every_n_epoch)) +
                 "expected an int >= 1, or null to validate only by val_check_interval");
  } else {
    TANDEM_CHECK(o.val_check_interval.is_count(), ConfigError,
                 invalid("val_check_interval", o.val_check_interval.str()) + "with check_val_every_n_epoch=null "
                 "it counts training batches across epochs and must be an int");
  }
  TANDEM_CHECK(o.num_sanity_val_steps >= -1, ConfigError,
               invalid("num_sanity_val_steps", std::to_string(o.num_sanity_val_steps)) + "expected -1 (all) or a number of batches >= 0");
  TANDEM_CHECK(o.accumulate_grad_batches >= 1, ConfigError,
               invalid("accumulate_grad_batches", std::to_string(o.accumulate_grad_batches)) + "expected a number of batches >= 1");
  TANDEM_CHECK(o.process_group_backend == "auto" || o.process_group_backend == "mpi" || o.process_group_backend == "nccl" ||
                   o.process_group_backend == "local",
               ConfigError, invalid("process_group_backend", o.process_group_backend) + "expected auto, mpi, nccl or local");
  TANDEM_CHECK(std::isfinite(o.collective_timeout) && o.collective_timeout > 0.0, ConfigError,
               invalid("collective_timeout", std::to_string(o.collective_timeout)) + "expected a number of seconds > 0 (default 600)");
  if (o.step_timeout) {
    TANDEM_CHECK(std::isfinite(*o.step_timeout) && *o.step_timeout >= 0.0, ConfigError,
                 invalid("step_timeout", std::to_string(*o.step_timeout)) +
                     "expected a number of seconds > 0, 0 (off), or null (collective_timeout with several processes)");
  }
  TANDEM_CHECK(o.max_restarts >= 0, ConfigError,
               invalid("max_restarts", std::to_string(o.max_restarts)) + "expected a number of restarts >= 0");
  if (o.min_processes) {
    TANDEM_CHECK(*o.min_processes >= 1, ConfigError,
                 invalid("min_processes", std::to_string(*o.min_processes)) + "expected a number of processes >= 1, or null");
  }
  TANDEM_CHECK(o.elastic_batch == "per_rank" || o.elastic_batch == "global", ConfigError,
               invalid("elastic_batch", o.elastic_batch) + "expected per_rank or global");
  if (o.gradient_clip_val) {
    TANDEM_CHECK(std::isfinite(*o.gradient_clip_val) && *o.gradient_clip_val >= 0.0, ConfigError,
                 invalid("gradient_clip_val", std::to_string(*o.gradient_clip_val)) + "expected a finite number >= 0, or null for no clipping");
  }
  TANDEM_CHECK(o.gradient_clip_algorithm == "norm" || o.gradient_clip_algorithm == "value", ConfigError,
               invalid("gradient_clip_algorithm", o.gradient_clip_algorithm) + "expected 'norm' or 'value'");
  TANDEM_CHECK(o.log_every_n_steps >= 1, ConfigError,
               invalid("log_every_n_steps", std::to_string(o.log_every_n_steps)) + "expected a number of steps >= 1");
  TANDEM_CHECK(!o.default_root_dir.empty(), ConfigError,
               invalid("default_root_dir", "''") + "expected a directory (\".\" for the current one)");
  TANDEM_CHECK(o.fast_dev_run.batches >= 0, ConfigError,
               invalid("fast_dev_run", std::to_string(o.fast_dev_run.batches)) + "expected true, false or a number of batches >= 0");
  for (const auto& cb : o.callbacks) {
    TANDEM_CHECK(cb != nullptr, ConfigError, "trainer option callbacks holds a null callback; pass constructed callbacks");
  }
  parse_precision(o.precision);  // names the allowed values
  TANDEM_CHECK(o.num_nodes >= 1, ConfigError,
               invalid("num_nodes", std::to_string(o.num_nodes)) + "expected a positive number of machines");
}

HardwareOptions hardware_options(const TrainerOptions& o) { return o; }

TrainerOptions trainer_options_from_config(const YAML::Node& config) {
  TrainerOptions o;
  static_cast<HardwareOptions&>(o) = hardware_options_from_config(config);

  auto value = [&](const std::string& key) { return get_config_value(config, "trainer." + key); };
  auto is_null = [&](const std::string& key) {
    const YAML::Node v = value(key);
    return !v || v.IsNull() || (v.IsScalar() && (v.Scalar() == "null" || v.Scalar() == "~" || v.Scalar().empty()));
  };
  auto scalar = [&](const std::string& key) {
    const YAML::Node v = value(key);
    TANDEM_CHECK(v && v.IsScalar(), ConfigError, "--trainer." + key + "=" + yaml_to_text(v) + " is not valid: expected a single value");
    return v.Scalar();
  };
  auto as_int = [&](const std::string& key) {
    const std::string s = scalar(key);
    char* end = nullptr;
    const long long n = std::strtoll(s.c_str(), &end, 10);
    TANDEM_CHECK(!s.empty() && *end == '\0', ConfigError, "--trainer." + key + "=" + s + " is not valid: expected an integer");
    return static_cast<int64_t>(n);
  };
  auto as_bool = [&](const std::string& key) {
    const std::string s = scalar(key);
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
    throw ConfigError("--trainer." + key + "=" + s + " is not valid: expected true or false");
  };

  if (!is_null("max_epochs")) o.max_epochs = as_int("max_epochs");
  o.max_steps = as_int("max_steps");
  for (const char* stage : {"train", "val", "test", "predict"}) {
    const std::string key = std::string("limit_") + stage + "_batches";
    const BatchCount limit = BatchCount::parse(scalar(key), key);
    if (std::string(stage) == "train") o.limit_train_batches = limit;
    else if (std::string(stage) == "val") o.limit_val_batches = limit;
    else if (std::string(stage) == "test") o.limit_test_batches = limit;
    else o.limit_predict_batches = limit;
  }
  o.val_check_interval = BatchCount::parse(scalar("val_check_interval"), "val_check_interval");
  if (is_null("check_val_every_n_epoch")) o.check_val_every_n_epoch.reset();
  else o.check_val_every_n_epoch = as_int("check_val_every_n_epoch");
  o.num_sanity_val_steps = as_int("num_sanity_val_steps");
  o.accumulate_grad_batches = as_int("accumulate_grad_batches");
  if (!is_null("gradient_clip_val")) {
    const std::string s = scalar("gradient_clip_val");
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    TANDEM_CHECK(!s.empty() && *end == '\0', ConfigError, "--trainer.gradient_clip_val=" + s + " is not valid: expected a number");
    o.gradient_clip_val = v;
  }
  o.gradient_clip_algorithm = scalar("gradient_clip_algorithm");
  o.log_every_n_steps = as_int("log_every_n_steps");
  if (!is_null("default_root_dir")) o.default_root_dir = scalar("default_root_dir");
  o.enable_checkpointing = as_bool("enable_checkpointing");
  o.enable_progress_bar = as_bool("enable_progress_bar");
  o.enable_model_summary = as_bool("enable_model_summary");
  const std::string fast = scalar("fast_dev_run");
  if (fast == "true" || fast == "True") o.fast_dev_run = true;
  else if (fast == "false" || fast == "False") o.fast_dev_run = false;
  else o.fast_dev_run = as_int("fast_dev_run");
  o.allow_tf32 = as_bool("allow_tf32");
  o.cuda_graph = as_bool("cuda_graph");
  o.callbacks = callbacks_from_config(value("callbacks"));
  o.process_group_backend = scalar("process_group_backend");
  for (char& c : o.process_group_backend) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  {
    const std::string s = scalar("collective_timeout");
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    TANDEM_CHECK(!s.empty() && *end == '\0', ConfigError, "--trainer.collective_timeout=" + s + " is not valid: expected a number of seconds");
    o.collective_timeout = v;
  }
  if (!is_null("step_timeout")) {
    const std::string s = scalar("step_timeout");
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    TANDEM_CHECK(!s.empty() && *end == '\0', ConfigError, "--trainer.step_timeout=" + s + " is not valid: expected a number of seconds");
    o.step_timeout = v;
  }
  o.max_restarts = as_int("max_restarts");
  if (!is_null("min_processes")) o.min_processes = as_int("min_processes");
  o.elastic_batch = scalar("elastic_batch");
  validate_trainer_options(o);
  return o;
}

}  // namespace tandem::trainer
