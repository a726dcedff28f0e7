// A user program with its own strategy: it registers the micro-batch example as "microbatch",
// then hands its command line to Tandem's, which trains with --trainer.strategy=microbatch with no
// other change (Lightning's StrategyRegistry.register + LightningCLI):
//
//   microbatch_cli fit --trainer.strategy=microbatch --trainer.accelerator=cpu --trainer.max_epochs=1
#include "apps/examples/custom_strategy/microbatch_strategy.h"
#include "apps/tandem/subcommands.h"

int main(int argc, char** argv) {
  microbatch_example::register_microbatch(tandem::strategy_registry());
  return tandem::cli::run_cli(argc > 0 ? argv[0] : "microbatch_cli", std::vector<std::string>(argv + 1, argv + argc));
}
