// The registry of built-in strategies and the `strategy=` resolution. Each name maps to the
// one class that plans, launches and trains it.
#include "base/error.h"
#include "engine/strategies/bagua/bagua_strategy.h"
#include "engine/strategies/data_parallel_strategy.h"
#include "engine/strategies/ddp2_strategy.h"
#include "engine/strategies/ddp_sharded_strategy.h"
#include "engine/strategies/ddp_strategy.h"
#include "engine/strategies/single_device_strategy.h"

namespace tandem {

StrategyRegistry& strategy_registry() {
  static StrategyRegistry* registry = [] {
    auto* r = new StrategyRegistry();
    r->add("single_device", "one process on one device (the plain loop; the only one a CUDA graph can capture)",
           [](const InitParams&) { return std::make_unique<SingleDeviceStrategy>(); });
    r->add("ddp", "one process per device (mpirun/srun, or relaunched through mpirun), gradients averaged in "
                  "buckets overlapped with backward; effective batch = batch x devices x num_nodes",
           [](const InitParams&) { return std::make_unique<DDPStrategy>(); });
    r->add("ddp_sharded", "ddp whose ranks each keep the optimizer state of 1/N of the parameters (ZeRO stage 1): "
                          "gradients reduce-scattered, each rank steps its part, weights allgathered; effective "
                          "batch = batch x devices x num_nodes",
           [](const InitParams&) { return std::make_unique<DDPShardedStrategy>(); });
    r->add("ddp_spawn", "like ddp, but the first process spawns the others (MPI_Comm_spawn, no mpirun) and trains "
                        "as rank 0, so the caller's model is the trained one; one node",
           [](const InitParams&) { return std::make_unique<DDPSpawnStrategy>(); });
    r->add("horovod", "one process per device started by mpirun/horovodrun (never relaunched), gradients averaged "
                      "over MPI in fusion buckets; effective batch = batch x devices x num_nodes",
           [](const InitParams&) { return std::make_unique<HorovodStrategy>(); });
    r->add("dp", "one process, each batch split across its devices (GPUs, or CPU devices on threads), gradients "
                 "summed on the root device; effective batch = batch x num_nodes",
           [](const InitParams&) { return std::make_unique<DataParallelStrategy>(); });
    r->add("ddp2", "dp inside each node (one process per node over its devices), ddp across nodes (root "
                   "gradients averaged); effective batch = batch x num_nodes",
           [](const InitParams&) { return std::make_unique<DDP2Strategy>(); });
    r->add("bagua", "ddp's processes and batch with Bagua's communication algorithms: --trainer.strategy.algorithm="
                    "gradient_allreduce (default), bytegrad, decentralized, low_precision_decentralized, qadam, async "
                    "(docs/STRATEGIES.md)",
           [](const InitParams& p) { return std::make_unique<BaguaStrategy>(p); }, bagua_strategy_options());
    return r;
  }();
  return *registry;
}

void validate_num_nodes(int num_nodes) {
  if (num_nodes < 1) {
    throw ConfigError("num_nodes=" + std::to_string(num_nodes) + " is not allowed; num_nodes is "
                      "the number of machines and must be a positive integer (default 1)");
  }
}

std::unique_ptr<Strategy> check_strategy_request(const std::string& requested, const StrategyRegistry& registry,
                                                 const InitParams& options) {
  const std::string name = lower_case(requested);
  if (name == "auto") {
    if (!options.empty()) {
      throw ConfigError("strategy=auto takes no options (given " + options.begin()->first + "=" +
                        options.begin()->second + "); name the strategy they belong to, e.g. --trainer.strategy=bagua");
    }
    return nullptr;
  }
  if (!registry.contains(name)) {
    throw ConfigError("unknown strategy '" + requested + "'" + registry.did_you_mean(name) +
                      "; choose auto or a registered strategy: " +
                      registry.joined_names());
  }
  return registry.create(name, options);
}

StrategyChoice select_strategy(const std::string& requested, const StrategyContext& context,
                               const StrategyRegistry& registry, const InitParams& options) {
  validate_num_nodes(context.num_nodes);
  StrategyChoice choice;
  std::string name = lower_case(requested);
  choice.strategy = check_strategy_request(requested, registry, options);
  if (name == "auto") {
    if (context.num_nodes > 1) {
      name = "ddp";
      choice.notes.push_back("strategy=auto picked ddp: num_nodes=" + std::to_string(context.num_nodes));
    } else if (context.num_devices == 1) {
      name = "single_device";
    } else {
      name = "ddp";
      choice.notes.push_back("strategy=auto picked ddp: " + std::to_string(context.num_devices) + " devices");
    }
    choice.strategy = registry.create(name, options);
  }
  choice.name = name;
  choice.strategy->validate(context);
  return choice;
}

}  // namespace tandem
