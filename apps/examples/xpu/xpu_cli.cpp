// A user program with its own accelerator: it registers the XPU example as "xpu", then hands
// its command line to Tandem's, which accepts --trainer.accelerator=xpu with no other change
// (Lightning's register_accelerators + LightningCLI):
//
//   xpu_cli plan --trainer.accelerator=xpu --trainer.devices "1, 3"
#include "apps/examples/xpu/xpu_accelerator.h"
#include "apps/tandem/subcommands.h"

int main(int argc, char** argv) {
  xpu_example::register_xpu(tandem::accelerator_registry());
  return tandem::cli::run_cli(argc > 0 ? argv[0] : "xpu_cli", std::vector<std::string>(argv + 1, argv + argc));
}
