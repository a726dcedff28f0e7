// ExecutionPlan: the answer to "what will run where" for a set of trainer flags, computed
// without touching MPI or training anything. It holds the run's live Accelerator and Strategy,
// built once here: `tandem plan` prints what they say, and the Trainer trains with the same two
// objects, so the plan is what actually runs.
//
// Order of resolution: accelerator (auto/gpu/name) -> devices (parsed by that accelerator,
// optionally narrowed to free GPUs) -> strategy (auto rules, validity) -> precision (CPU
// fallbacks) -> cluster environment (launcher variables; devices x num_nodes must match the
// launcher's world size) -> the device this process drives.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/accelerators/accelerator.h"
#include "engine/accelerators/accelerator_registry.h"
#include "engine/accelerators/devices_spec.h"
#include "engine/accelerators/precision.h"
#include "engine/strategies/cluster_environment.h"
#include "engine/strategies/strategy.h"

namespace tandem {

// The trainer's hardware options as the user gave them (Lightning's defaults).
struct HardwareOptions {
  std::string accelerator = "auto";
  DevicesSpec devices = "auto";
  std::string strategy = "auto";
  // The strategy's own options (bagua: algorithm, hierarchical, ...); the registry refuses keys
  // the strategy does not declare.
  InitParams strategy_options;
  int num_nodes = 1;
  PrecisionSpec precision = "32-true";
  // Lightning's auto_select_gpus: with accelerator=cuda and devices=k (or -1/"auto"), take the
  // first k GPUs that are free now (find_usable_cuda_devices) instead of the first k.
  bool auto_select_gpus = false;
  // The job's processes as given (a host communicator's, host_comm_cluster()) instead of the
  // launcher's variables; a given cluster is never relaunched.
  std::optional<ClusterEnvironment> cluster;
};

struct ExecutionPlan {
  std::string accelerator;                      // "cpu", "cuda", ...
  std::vector<AcceleratorDevice> devices;       // per node; cpu repeats "cpu" once per process
  std::string strategy;
  int num_nodes = 1;
  int processes_per_node = 1;
  int world_size = 1;                           // processes in the whole job
  Precision precision = Precision::Float32True;
  ClusterEnvironment cluster;
  std::optional<AcceleratorDevice> process_device;  // what this process drives, when known
  std::optional<std::string> launch;            // how to start the job when it needs launching
  std::vector<std::string> notes;               // choices made and warnings, for the log
  // The objects that train: built once by plan_execution, used by the Trainer as they are.
  std::shared_ptr<Accelerator> live_accelerator;
  std::shared_ptr<Strategy> live_strategy;

  // One JSON object: accelerator, devices, num_devices, strategy, num_nodes, world_size,
  // precision, cluster_environment, launch, then the details (ranks, notes, ...).
  std::string to_json(int indent = -1) const;
};

// `program` is the command line a launcher should run in each process (e.g. "tandem fit
// --trainer.devices=2"); it only appears in `launch`.
// Throws ConfigError for every invalid combination, DeviceError when GPUs are too busy.
ExecutionPlan plan_execution(const HardwareOptions& options,
                             const std::string& program = "<your training program>",
                             const EnvLookup& env = process_environment(),
                             const AcceleratorRegistry& accelerators = accelerator_registry(),
                             const StrategyRegistry& strategies = strategy_registry());

}  // namespace tandem
