#include "engine/trainer/trainer_options.h"

#include <cstdlib>
#include <sstream>

#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/trainer/trainer_option_table.h"

namespace tandem::trainer {

namespace {

std::string invalid(const std::string& option, const std::string& value) {
  return "trainer option " + option + "=" + value + " is not valid: ";
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
  for (const TrainerOptionRow& row : trainer_option_table()) {
    if (!row.problem) continue;
    const std::string wrong = row.problem(o);
    TANDEM_CHECK(wrong.empty(), ConfigError, invalid(row.spec.name, row.text(o)) + wrong);
  }
  // What involves more than one option, or none of the table's.
  if (!o.check_val_every_n_epoch) {
    TANDEM_CHECK(o.val_check_interval.is_count(), ConfigError,
                 invalid("val_check_interval", o.val_check_interval.str()) + "with check_val_every_n_epoch=null "
                 "it counts training batches across epochs and must be an int");
  }
  for (const auto& cb : o.callbacks) {
    TANDEM_CHECK(cb != nullptr, ConfigError, "trainer option callbacks holds a null callback; pass constructed callbacks");
  }
}

HardwareOptions hardware_options(const TrainerOptions& o) { return o; }

TrainerOptions trainer_options_from_config(const YAML::Node& config) {
  TrainerOptions o;
  for (const TrainerOptionRow& row : trainer_option_table()) {
    if (row.read) row.read(o, get_config_value(config, "trainer." + row.spec.name));
  }
  validate_trainer_options(o);
  return o;
}

}  // namespace tandem::trainer
