#include "engine/accelerators/accelerator_registry.h"

#include <dlfcn.h>

#include "base/error.h"
#include "engine/accelerators/cpu_accelerator.h"
#include "engine/accelerators/cuda_accelerator.h"

namespace tandem {

namespace {

std::string trim_lower(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return lower_case(s.substr(b, e - b + 1));
}

std::string available_names(const AcceleratorRegistry& registry) {
  std::string out;
  for (const auto& name : registry.names()) {
    bool ok = false;
    try {
      ok = registry.create(name)->is_available();
    } catch (const Error&) {
      ok = false;  // an accelerator that cannot even be built is not available
    }
    if (ok) out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace

AcceleratorRegistry& accelerator_registry() {
  static AcceleratorRegistry* registry = [] {
    auto* r = new AcceleratorRegistry();  // never destroyed: plugins may hold factories into it
    r->add("cpu", "CPU; devices is the number of processes",
           [](const InitParams&) { return std::make_unique<CPUAccelerator>(); });
    r->add("cuda", "NVIDIA GPUs through the CUDA runtime (alias: gpu); devices are GPU indices",
           [](const InitParams&) { return std::make_unique<CUDAAccelerator>(); });
    return r;
  }();
  return *registry;
}

void load_accelerator_plugin(const std::string& path, AcceleratorRegistry& registry) {
  // RTLD_GLOBAL so the plugin's typeinfo merges with ours (dynamic_cast across the boundary).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    throw ConfigError("--plugin=" + path + ": cannot load the shared library (" + dlerror() +
                      "); give the path of a .so built against Tandem's headers");
  }
  auto fn = reinterpret_cast<AcceleratorPluginFn>(dlsym(handle, kAcceleratorPluginSymbol));
  if (!fn) {
    throw ConfigError("--plugin=" + path + ": the library does not export extern \"C\" void " +
                      kAcceleratorPluginSymbol + "(tandem::AcceleratorRegistry&); add it so it "
                      "can register its accelerators");
  }
  fn(registry);
}

AcceleratorChoice select_accelerator(const std::string& requested, const AcceleratorRegistry& registry) {
  AcceleratorChoice choice;
  std::string name = trim_lower(requested);
  if (name == "gpu") name = "cuda";  // "gpu" means CUDA here: there is no MPS or ROCm backend
  if (name == "auto") {
    auto cuda = registry.create("cuda");
    if (cuda->is_available()) {
      choice.name = "cuda";
      choice.accelerator = std::move(cuda);
      choice.notes.push_back("accelerator=auto picked cuda: " + choice.accelerator->availability_note());
    } else {
      choice.name = "cpu";
      choice.notes.push_back("accelerator=auto picked cpu: no usable CUDA device (" +
                             cuda->availability_note() + ")");
      choice.accelerator = registry.create("cpu");
    }
    return choice;
  }
  if (!registry.contains(name)) {
    throw ConfigError("unknown accelerator '" + requested + "'" + registry.did_you_mean(name) +
                      "; choose auto, gpu (= cuda), or a registered accelerator: " + registry.joined_names() +
                      " (custom accelerators are registered by your program or --plugin=lib.so)");
  }
  choice.name = name;
  choice.accelerator = registry.create(name);
  if (!choice.accelerator->is_available()) {
    throw ConfigError("accelerator=" + requested + " is not available here: " +
                      choice.accelerator->availability_note() + "; accelerators available: " +
                      available_names(registry) + " (or use accelerator=auto)");
  }
  // Lightning's "GPU available but not used": any accelerator other than cuda leaves them idle.
  if (name != "cuda" && registry.contains("cuda")) {
    auto cuda = registry.create("cuda");
    if (cuda->is_available()) {
      choice.notes.push_back("warning: " + cuda->availability_note() + " but accelerator=" + name +
                             " does not use them; pass --trainer.accelerator=cuda to use them");
    }
  }
  return choice;
}

}  // namespace tandem
