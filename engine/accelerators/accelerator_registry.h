// AcceleratorRegistry: accelerators by name, so `--trainer.accelerator=<name>` works for any
// registered class without code changes. "cpu" and "cuda" are registered when the registry is
// first used (not by static initializers, which a static library may drop); user programs and
// plugins add their own:
//
//   tandem::accelerator_registry().add("xpu", "XPU accelerator ...",
//       [](const tandem::InitParams& p) { return std::make_unique<XPUAccelerator>(p); });
//
// A plugin shared library (`tandem plan --plugin=libxpu.so`) exports
//   extern "C" void tandem_register_accelerators(tandem::AcceleratorRegistry& registry);
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/named_registry.h"
#include "engine/accelerators/accelerator.h"

namespace tandem {

class AcceleratorRegistry : public NamedRegistry<Accelerator> {
 public:
  AcceleratorRegistry() : NamedRegistry<Accelerator>("accelerator") {}
};

// The process-wide registry, with "cpu" and "cuda" already in it.
AcceleratorRegistry& accelerator_registry();

// The symbol a plugin exports, and its type.
inline constexpr const char* kAcceleratorPluginSymbol = "tandem_register_accelerators";
using AcceleratorPluginFn = void (*)(AcceleratorRegistry&);

// Loads a shared library and calls its tandem_register_accelerators. Throws ConfigError when
// the file cannot be loaded or does not export the function. The library stays loaded.
void load_accelerator_plugin(const std::string& path, AcceleratorRegistry& registry = accelerator_registry());

// The outcome of resolving `accelerator=...`.
struct AcceleratorChoice {
  std::string name;                          // registry name: "cpu", "cuda", "xpu"
  std::unique_ptr<Accelerator> accelerator;
  std::vector<std::string> notes;            // what was picked and why; warnings start "warning:"
};

// Resolves "auto", "gpu" (= cuda) or a registered name, case-insensitively.
// "auto" picks cuda when a CUDA device is usable, else cpu, and says why in notes.
// Throws ConfigError for unknown names (listing registered ones) and for accelerators that are
// registered but not available here (listing the ones that are).
AcceleratorChoice select_accelerator(const std::string& requested,
                                     const AcceleratorRegistry& registry = accelerator_registry());

}  // namespace tandem
