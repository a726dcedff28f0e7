// Precision: Lightning's names and their short forms.
//
//   "32-true"    32, "32"   fp32 everywhere (the default)
//   "16-mixed"   16, "16"   fp16 compute, fp32 master weights, dynamic loss scaling
//   "bf16-mixed" "bf16"     bf16 compute, fp32 master weights
//   "64-true"    64, "64"   fp64 everywhere, CPU only
//
// On CPU, 16-mixed falls back to bf16-mixed with a warning (as Lightning does): fp16 has no
// fast path on CPUs and bf16 keeps fp32's range.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "engine/accelerators/accelerator.h"

namespace tandem {

enum class Precision { Float32True, Float16Mixed, BFloat16Mixed, Float64True };

// A precision as the user wrote it. Lightning takes 16, 32 and 64 as ints as well as strings,
// so this converts from both: `options.precision = 16` means "16" (with a plain std::string
// member it would compile, and become the one character '\x10').
class PrecisionSpec {
 public:
  PrecisionSpec(const char* text) : text_(text) {}                 // NOLINT: implicit on purpose
  PrecisionSpec(std::string text) : text_(std::move(text)) {}      // NOLINT
  PrecisionSpec(int bits) : text_(std::to_string(bits)) {}         // NOLINT
  const std::string& str() const { return text_; }
  bool operator==(const PrecisionSpec& other) const { return text_ == other.text_; }

 private:
  std::string text_;
};

// The canonical name, e.g. "16-mixed".
std::string precision_name(Precision p);

// Parses any accepted form; throws ConfigError listing the allowed values otherwise.
Precision parse_precision(const PrecisionSpec& value);

struct PrecisionChoice {
  Precision precision;
  std::optional<std::string> note;  // set when the precision was changed, starts "warning:"
};

// Applies the accelerator's limits: 16-mixed on a host accelerator (cpu) becomes bf16-mixed
// (with a note), 64-true on any other is a ConfigError.
PrecisionChoice resolve_precision(Precision requested, const Accelerator& accelerator);

}  // namespace tandem
