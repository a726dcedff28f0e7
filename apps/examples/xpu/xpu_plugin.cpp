// The XPU accelerator as a plugin: `tandem plan --plugin=libtandem_xpu_plugin.so
// --trainer.accelerator=xpu` (or any other subcommand) loads this library and calls the
// function below with the process-wide registry.
#include "apps/examples/xpu/xpu_accelerator.h"

extern "C" void tandem_register_accelerators(tandem::AcceleratorRegistry& registry) {
  xpu_example::register_xpu(registry);
}
