// The four strategies registered today. Their descriptions say honestly what exists: the
// planning rules are here; the training code of ddp/ddp_spawn is the Trainer's
// DDPTrainingStrategy (engine/trainer/ddp_training_strategy.h); dp's is still to come.
#include "engine/core/error.h"
#include "engine/strategies/strategy.h"

namespace tandem {

namespace {

class SingleDeviceStrategy : public Strategy {
 public:
  std::string name() const override { return "single_device"; }
  int processes_per_node(int) const override { return 1; }
  void validate(const StrategyContext& c) const override {
    if (c.num_devices != 1 || c.num_nodes != 1) {
      throw ConfigError("strategy=single_device runs one process on one device, but " +
                        std::to_string(c.num_devices) + " device(s) x " +
                        std::to_string(c.num_nodes) + " node(s) were asked for; use "
                        "--trainer.strategy=ddp (or auto), or --trainer.devices=1 --trainer.num_nodes=1");
    }
  }
  bool implemented() const override { return true; }  // the Trainer's plain loop
};

// One process per device on every node; gradients averaged across all of them.
class DDPStrategy : public Strategy {
 public:
  explicit DDPStrategy(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  int processes_per_node(int num_devices) const override { return num_devices; }
  bool implemented() const override { return true; }  // DDPTrainingStrategy + Reducer
  std::string launcher() const override { return "mpirun"; }

 private:
  std::string name_;
};

// One process drives every device of its node: the batch is split across them and outputs
// gathered on the first (root) device.
class DataParallelStrategy : public Strategy {
 public:
  std::string name() const override { return "dp"; }
  int processes_per_node(int) const override { return 1; }
  void validate(const StrategyContext& c) const override {
    if (c.accelerator != "cuda") {
      throw ConfigError("strategy=dp splits each batch across several GPUs inside one process; "
                        "it needs accelerator=cuda, not " + c.accelerator + " (on CPU, devices "
                        "counts processes: use --trainer.strategy=ddp)");
    }
    if (c.num_nodes != 1) {
      throw ConfigError("strategy=dp runs on one node, but num_nodes=" +
                        std::to_string(c.num_nodes) + "; use --trainer.strategy=ddp across nodes");
    }
  }
  bool implemented() const override { return false; }  // scatter/gather: DP issue
};

}  // namespace

StrategyRegistry& strategy_registry() {
  static StrategyRegistry* registry = [] {
    auto* r = new StrategyRegistry();
    r->add("single_device", "one process on one device (the Trainer's plain loop)",
           [](const InitParams&) { return std::make_unique<SingleDeviceStrategy>(); });
    r->add("ddp", "one process per device, launched by mpirun/srun, gradients averaged in buckets "
                  "overlapped with backward",
           [](const InitParams&) { return std::make_unique<DDPStrategy>("ddp"); });
    r->add("ddp_spawn", "like ddp; here the processes are also started through mpirun, since a "
                        "C++ program has no spawn-and-pickle",
           [](const InitParams&) { return std::make_unique<DDPStrategy>("ddp_spawn"); });
    r->add("dp", "one process, batch split across the GPUs of one node, outputs gathered on the "
                 "root device (planning only for now: training lands with the DP issue)",
           [](const InitParams&) { return std::make_unique<DataParallelStrategy>(); });
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

StrategyChoice select_strategy(const std::string& requested, const StrategyContext& context,
                               const StrategyRegistry& registry) {
  validate_num_nodes(context.num_nodes);
  StrategyChoice choice;
  std::string name = lower_case(requested);
  if (name == "auto") {
    if (context.num_nodes > 1) {
      name = "ddp";
      choice.notes.push_back("strategy=auto picked ddp: num_nodes=" + std::to_string(context.num_nodes));
    } else if (context.num_devices == 1) {
      name = "single_device";
    } else {
      name = "ddp";
      choice.notes.push_back("strategy=auto picked ddp: " + std::to_string(context.num_devices) +
                             " devices");
    }
  } else if (!registry.contains(name)) {
    throw ConfigError("unknown strategy '" + requested + "'; choose auto or a registered strategy: " +
                      registry.joined_names());
  }
  choice.name = name;
  choice.strategy = registry.create(name);
  choice.strategy->validate(context);
  return choice;
}

}  // namespace tandem
