// The XPU accelerator as a plugin: `tandem plan --plugin=libtandem_xpu_plugin.so
// --trainer.accelerator=xpu` loads this library and calls the function below.
#include "tests/accelerators/xpu_accelerator.h"

extern "C" void tandem_register_accelerators(tandem::AcceleratorRegistry& registry) {
  xpu_example::register_xpu(registry);
}
