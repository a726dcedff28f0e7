// Turning a DevicesSpec into concrete device indices, exactly per Lightning's devices table:
//
//   devices   type  parsed        meaning
//   3         int   [0, 1, 2]     first 3 devices
//   -1        int   [0, 1, ...]   all available devices
//   [0]       list  [0]           device 0
//   [1, 3]    list  [1, 3]        devices 1 and 3 (order kept)
//   "3"       str   [0, 1, 2]     first 3 devices
//   "1, 3"    str   [1, 3]        devices 1 and 3
//   "-1"      str   [0, 1, ...]   all available devices
//   "auto"    str   [0, 1, ...]   all available devices
//
// 0, "0" and [] select nothing and are errors (use accelerator=cpu for CPU); duplicates,
// indices the machine does not have, negatives other than -1 and non-integers are errors that
// say what was asked, what the machine has, and which forms are accepted.
#pragma once
#include <string>
#include <vector>

#include "engine/accelerators/devices_spec.h"

namespace tandem {

// Describes the machine for error messages, e.g. "this machine has 2 visible CUDA devices
// (CUDA_VISIBLE_DEVICES=2,3)".
struct IndexedDeviceContext {
  std::string accelerator;    // "cuda", "xpu": used in messages
  int available = 0;          // how many devices the accelerator sees
  std::string machine_note;   // extra words about what the machine has; may be empty
};

// The forms accepted by parse_indexed_devices, for error messages and docs.
extern const char* const kIndexedDeviceForms;

// Parses per the table above. Throws ConfigError on anything else.
std::vector<int> parse_indexed_devices(const DevicesSpec& spec, const IndexedDeviceContext& ctx);

// CPU: devices is the number of processes: an int > 0, its string, or "auto" (= 1).
// Returns the process count. Throws ConfigError otherwise.
int parse_cpu_process_count(const DevicesSpec& spec);

// "1, 3," -> {"1", "3", ""}: the parts between separators, surrounding spaces removed.
std::vector<std::string> split_trimmed(const std::string& text, char separator);

// Parses a whole string as a base-10 int (surrounding spaces allowed); false if it is not one.
bool parse_int_strict(const std::string& text, int* out);

}  // namespace tandem
