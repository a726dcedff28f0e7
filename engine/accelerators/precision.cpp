#include "engine/accelerators/precision.h"

#include "base/error.h"
#include "base/named_registry.h"

namespace tandem {

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::Float32True: return "32-true";
    case Precision::Float16Mixed: return "16-mixed";
    case Precision::BFloat16Mixed: return "bf16-mixed";
    case Precision::Float64True: return "64-true";
  }
  return "?";
}

Precision parse_precision(const PrecisionSpec& value) {
  const std::string& text = value.str();
  std::string t = lower_case(text);
  const size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
  t = b == std::string::npos ? "" : t.substr(b, e - b + 1);
  if (t == "32-true" || t == "32") return Precision::Float32True;
  if (t == "16-mixed" || t == "16") return Precision::Float16Mixed;
  if (t == "bf16-mixed" || t == "bf16") return Precision::BFloat16Mixed;
  if (t == "64-true" || t == "64") return Precision::Float64True;
  throw ConfigError("precision='" + text + "' is not supported; allowed: \"32-true\" (or 32), "
                    "\"16-mixed\" (or 16), \"bf16-mixed\" (or \"bf16\"), \"64-true\" (or 64, CPU only)");
}

PrecisionChoice resolve_precision(Precision requested, const Accelerator& accelerator) {
  if (requested == Precision::Float16Mixed && accelerator.computes_on_host()) {
    return {Precision::BFloat16Mixed,
            "warning: precision=16-mixed is not supported on CPU; using bf16-mixed instead "
            "(pass --trainer.precision=bf16-mixed to silence this)"};
  }
  if (requested == Precision::Float64True && !accelerator.computes_on_host()) {
    throw ConfigError("precision=64-true is supported on CPU only, not on accelerator=" +
                      accelerator.name() + "; use 32-true, 16-mixed or bf16-mixed there, or "
                      "--trainer.accelerator=cpu");
  }
  return {requested, std::nullopt};
}

}  // namespace tandem
