// Fuzz target: the accelerator `devices=` parser (engine/accelerators/device_parsing.cpp).
// Input: the first byte is how many devices the machine has (0..8), the rest is the devices
// text as a user writes it. The text is parsed as a string ("1, 3"), as a list's items
// ([1, 3], split at commas) and, when it is an integer, as an int, for an indexed accelerator
// and for accelerator=cpu. Allowed outcome besides success: ConfigError. A success must honour
// the parser's contract: distinct, in-range indices, at least one; a positive process count.
#include <cstdint>
#include <set>
#include <string>

#include "base/error.h"
#include "engine/accelerators/device_parsing.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using tandem::DevicesSpec;

void check_indexed(const DevicesSpec& spec, const tandem::IndexedDeviceContext& ctx) {
  std::vector<int> indices;
  try {
    indices = tandem::parse_indexed_devices(spec, ctx);
  } catch (const tandem::ConfigError&) {
    return;
  }
  if (indices.empty()) tandem::fuzz::finding("devices=" + spec.str() + " parsed to no device");
  std::set<int> seen;
  for (int index : indices) {
    if (index < 0 || index >= ctx.available || !seen.insert(index).second)
      tandem::fuzz::finding("devices=" + spec.str() + " parsed to index " + std::to_string(index) + " with " +
                            std::to_string(ctx.available) + " devices (out of range or repeated)");
  }
}

void check_cpu(const DevicesSpec& spec) {
  try {
    if (tandem::parse_cpu_process_count(spec) <= 0)
      tandem::fuzz::finding("devices=" + spec.str() + " parsed to a process count below 1");
  } catch (const tandem::ConfigError&) {
  }
}

void check(const DevicesSpec& spec, const tandem::IndexedDeviceContext& ctx) {
  check_indexed(spec, ctx);
  check_cpu(spec);
  (void)spec.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const tandem::IndexedDeviceContext ctx{"cuda", data[0] % 9, "fuzzed machine"};
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  check(DevicesSpec(text), ctx);
  check(DevicesSpec::list_of_text(tandem::split_trimmed(text, ',')), ctx);
  int number = 0;
  if (tandem::parse_int_strict(text, &number)) check(DevicesSpec(number), ctx);
  return 0;
}
