// single_device: one process on one device, the plain loop (the Strategy base's behaviour).
// The one strategy whose step can be captured into a CUDA graph (cuda_graph=true on a GPU).
#pragma once
#include "base/error.h"
#include "engine/strategies/strategy.h"

namespace tandem {

class SingleDeviceStrategy : public Strategy {
 public:
  std::string name() const override { return "single_device"; }
  int processes_per_node(int) const override { return 1; }
  void validate(const StrategyContext& c) const override {
    if (c.num_devices != 1 || c.num_nodes != 1) {
      throw ConfigError("strategy=single_device runs one process on one device, but " + std::to_string(c.num_devices) +
                        " device(s) x " + std::to_string(c.num_nodes) + " node(s) were asked for; use "
                        "--trainer.strategy=ddp (or auto), or --trainer.devices=1 --trainer.num_nodes=1");
    }
  }
  void setup_environment(const StrategyEnvironment& env) override {
    if (env.world_size != 1) {
      throw ConfigError("strategy=single_device runs one process, but the launcher started " +
                        std::to_string(env.world_size) + "; use --trainer.strategy=ddp");
    }
    Strategy::setup_environment(env);
  }
  bool can_capture_step() const override { return root_device().is_cuda(); }
};

}  // namespace tandem
