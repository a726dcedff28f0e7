// Strategy: how training is spread over the selected devices and nodes — how many processes
// run on each node and what each one drives. The registered strategies are single_device, ddp,
// ddp_spawn and dp. This file holds what planning needs (process counts and validity); the
// training behaviour is the Trainer's TrainingStrategy (DDP's Reducer is reducer.h here; DP's
// scatter/gather is still to come), and implemented() says whether a strategy can train yet.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/accelerators/named_registry.h"

namespace tandem {

// What a strategy is asked to run on.
struct StrategyContext {
  std::string accelerator;  // "cpu", "cuda", ...
  int num_devices = 1;      // devices per node, after parsing
  int num_nodes = 1;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // Processes this strategy runs on one node with `num_devices` devices.
  virtual int processes_per_node(int num_devices) const = 0;
  // Throws ConfigError when the strategy cannot run on this context.
  virtual void validate(const StrategyContext& /*context*/) const {}
  // False while the strategy is registered for planning but its training code has not landed.
  virtual bool implemented() const = 0;
  // How the processes are started when more than one is needed: "mpirun" or "none".
  virtual std::string launcher() const { return "none"; }
};

class StrategyRegistry : public NamedRegistry<Strategy> {
 public:
  StrategyRegistry() : NamedRegistry<Strategy>("strategy") {}
};

// The process-wide registry with single_device, ddp, ddp_spawn and dp in it.
StrategyRegistry& strategy_registry();

struct StrategyChoice {
  std::string name;
  std::unique_ptr<Strategy> strategy;
  std::vector<std::string> notes;
};

// Resolves `strategy=...` (case-insensitive). "auto": num_nodes > 1 -> ddp; one device ->
// single_device; more -> ddp. Validates num_nodes (> 0) and the strategy against the context.
// Throws ConfigError for unknown names (listing registered ones) and invalid combinations.
StrategyChoice select_strategy(const std::string& requested, const StrategyContext& context,
                               const StrategyRegistry& registry = strategy_registry());

// Throws ConfigError unless num_nodes is a positive integer.
void validate_num_nodes(int num_nodes);

}  // namespace tandem
