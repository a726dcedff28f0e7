// Strategy: how training is spread over the selected devices and nodes, as one object per run.
// The registry maps a name to one class; planning builds one instance, and the Trainer trains
// with that same instance (Lightning's shape):
//
//   plan      processes_per_node, validate, validate_precision, launch_kind   (pure, `tandem plan`)
//   launch    launch(): relaunch under mpirun, spawn the other ranks, or refuse (a job that
//             must be started by a launcher)
//   setup     setup_environment (devices, communicator), setup_module (move, replicate, Reducer)
//   steps     run_training_step (one call per training batch: to the device, training_step,
//             backward, and the optimizer step at a step boundary, with the fit loop's hooks
//             between them), batch_to_device, training_step / validation_step / test_step /
//             predict_step (under the precision plugin's autocast), backward, optimizer_step,
//             clip_grad_norm
//   optimizer setup_optimizer, optimizer_state / load_optimizer_state (what checkpoints hold),
//             optimizer_state_bytes
//   collect   reduce (sync_dist), reduce_any, barrier, broadcast_from_zero, all_gather
//   state     state_dict / load_state_dict (the precision plugin's loss scaler)
//   plugins   the precision plugin (precision_plugin.h) and the step executor: eager, or a CUDA
//             graph (CudaGraphStep, engine/strategies/cuda_graph_step.h); dp runs its replicas
//             inside training_step and backward
//
// Registered classes: single_device (single_device_strategy.h), ddp, ddp_spawn, horovod
// (ddp_strategy.h), ddp_sharded (ddp_sharded_strategy.h), dp (data_parallel_strategy.h), ddp2
// (ddp2_strategy.h), bagua (bagua/bagua_strategy.h). A user's class registered under a new name trains the same way
// (apps/examples/custom_strategy).
//
// Strategies see the LightningModule interface (its steps and hooks), never the Trainer.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/named_registry.h"
#include "collectives/communicator_factory.h"
#include "engine/accelerators/accelerator.h"
#include "engine/accelerators/precision.h"
#include "engine/data/batch.h"
#include "engine/module/lightning_module.h"
#include "engine/optim/optimizer.h"
#include "engine/strategies/cluster_environment.h"
#include "engine/strategies/optimizer_requirement.h"
#include "engine/strategies/precision_plugin.h"
#include "engine/strategies/training_step_hooks.h"

namespace tandem::trainer { class CudaGraphStep; }

namespace tandem {

struct ExecutionPlan;

// What a strategy is asked to run on, at planning time.
struct StrategyContext {
  std::string accelerator;  // "cpu", "cuda", ...
  int num_devices = 1;      // devices per node, after parsing
  int num_nodes = 1;
};

// How a job of several processes comes to exist.
enum class LaunchKind {
  None,      // one process; nothing to launch
  Relaunch,  // started by hand, the program re-runs itself under mpirun (ddp, ddp2)
  External,  // must be started by mpirun / horovodrun; never relaunched (horovod)
  Spawn,     // the starting process spawns the other ranks and is rank 0 (ddp_spawn)
};

// What setup_environment needs, from the plan and the trainer options.
struct StrategyEnvironment {
  std::shared_ptr<Accelerator> accelerator;      // the run's live accelerator
  std::vector<AcceleratorDevice> devices;        // this process's devices, root first
  std::vector<Device> tensor_devices;            // the same, as tensor devices
  Precision precision = Precision::Float32True;
  int world_size = 1;                            // processes in the job
  int num_nodes = 1;
  ClusterEnvironment cluster;
  std::string process_group_backend = "auto";    // auto | mpi | nccl | local
  double collective_timeout_s = 600.0;
  // Set when the host program handed its MPI communicator (TrainerOptions::communicator): the
  // strategy's communicator is made over it (duplicated) instead of over MPI_COMM_WORLD.
  std::optional<collectives::HostComm> host_comm;
};

// What a strategy's communicator sent during training steps: from the first
// before_training_step of an optimizer step to the end of that optimizer_step, summed over the
// steps counted (collectives::ring_bytes_sent's rule).
struct StepTraffic {
  collectives::CommTraffic sent;
  int64_t steps = 0;
  double bytes_per_step() const { return steps ? double(sent.total_bytes()) / double(steps) : 0.0; }
};

class Strategy {
 public:
  Strategy();
  virtual ~Strategy();

  // ---- planning: pure ----
  virtual std::string name() const = 0;
  // Processes this strategy runs on one node with `num_devices` devices.
  virtual int processes_per_node(int num_devices) const = 0;
  // Throws ConfigError when the strategy cannot run on this context.
  virtual void validate(const StrategyContext& /*context*/) const {}
  // Throws ConfigError for a precision this strategy refuses (dp: 16-mixed).
  virtual void validate_precision(Precision /*precision*/) const {}
  virtual LaunchKind launch_kind() const { return LaunchKind::None; }

  // ---- launch: called by `tandem fit` (and by the Trainer for Spawn) when plan.launch is set ----
  // argv: this program's command line. Relaunch replaces the process (never returns); Spawn
  // returns and its setup_environment starts the other ranks; External (and the base class)
  // throws ConfigError saying how to start the job.
  virtual void launch(const ExecutionPlan& plan, const std::vector<std::string>& argv);

  // ---- setup ----
  // Once per run, on this process: devices, precision plugin, communicator.
  virtual void setup_environment(const StrategyEnvironment& env);
  // Moves the module to root_device()/compute_dtype() (ddp: broadcasts rank 0's weights and
  // installs the Reducer's hooks; dp: builds the replicas). Called at the start of every stage.
  virtual void setup_module(trainer::LightningModule& module);
  virtual void teardown() {}

  // ---- who and where ----
  virtual int world_size() const { return 1; }
  virtual int global_rank() const { return 0; }
  virtual int local_rank() const { return 0; }
  virtual int node_rank() const { return 0; }
  bool is_global_zero() const { return global_rank() == 0; }
  // Devices this process computes on (dp/ddp2: several); the first is the root.
  int devices_per_process() const { return static_cast<int>(devices_.size()); }
  Device root_device() const { return devices_.front(); }
  // Float64 for 64-true, else Float32 (mixed precision keeps float32 weights).
  DType compute_dtype() const { return precision_.compute_dtype(); }
  PrecisionPlugin& precision_plugin() { return precision_; }
  const PrecisionPlugin& precision_plugin() const { return precision_; }
  // True when one step can be captured into a CUDA graph (one GPU in one process).
  virtual bool can_capture_step() const { return false; }

  // ---- the step executor ----
  // Before a fit's first training step: cuda_graph captures the steps' forward and backward into
  // a CUDA graph (CudaGraphStep; what training_step logs then goes through `logs`, deferred);
  // otherwise they run eagerly.
  void setup_step_executor(bool cuda_graph, trainer::MetricsSink& logs);
  // After fit (and before the device is torn down): the graph, its memory and its static tensors
  // go; its counters stay readable.
  void release_step_executor();
  // The CUDA graph executor of the current (or last) fit; null when steps run eagerly.
  const trainer::CudaGraphStep* cuda_graph_step() const { return cuda_graph_.get(); }

  // ---- steps ----
  // The batch on the root device; floating inputs and targets cast to compute_dtype().
  virtual data::Batch batch_to_device(const data::Batch& batch) const;
  // One training batch, the fit loop's one call per batch: the host batch to the device (into the
  // CUDA graph's static tensors when it keeps them), hooks.on_batch_start, before_training_step,
  // training_step, the finite-loss check, backward of loss * step.loss_factor, and at a step
  // boundary (step.will_step) optimizer_step and zero_grad, with the loop's hooks between them
  // (training_step_hooks.h). The steps run eagerly or through the step executor.
  TrainingStepResult run_training_step(trainer::LightningModule& module, optim::Optimizer& optimizer,
                                       const data::Batch& host_batch, const TrainingStepRequest& step,
                                       TrainingStepHooks& hooks);
  // Before each training_step (ddp: broadcast rank 0's buffers).
  virtual void before_training_step(trainer::LightningModule& /*module*/) {}
  // training_step under autocast, then training_step_end when the module defines it; returns
  // the loss (undefined when training_step returned none).
  virtual Tensor training_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx);
  virtual void validation_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx);
  virtual void test_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx);
  virtual Tensor predict_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx);
  // Backward of loss * factor (factor: 1 / accumulate_grad_batches), scaled by the precision
  // plugin. will_step: false while accumulating (ddp skips the allreduce then, as no_sync).
  virtual void backward(const Tensor& loss, double factor, bool will_step);
  // Waits for gradient reductions, unscales (16-mixed), calls before_step(skipping) (hooks,
  // clipping), then steps unless an inf/NaN gradient makes the precision plugin skip it.
  virtual void optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool skipping)>& before_step);
  // clip_grad_norm_ (L2) over `params`' gradients as the optimizer will use them; returns the
  // total norm before clipping. A strategy whose ranks hold parts of the gradients (ddp_sharded)
  // takes the norm over all of them.
  virtual double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

  // ---- the optimizer ----
  // The optimizer class this strategy's communication is written for (bagua's qadam: QAdam);
  // nullopt: any. The config refuses another --optimizer before anything runs.
  virtual std::optional<OptimizerRequirement> required_optimizer() const { return std::nullopt; }
  // Once per fit, after configure_optimizers and before a checkpoint is restored. Throws
  // ConfigError for an optimizer this strategy cannot drive.
  virtual void setup_optimizer(optim::Optimizer& /*optimizer*/) {}
  // The optimizer's whole state, as a checkpoint stores it (collective for ddp_sharded: every
  // rank calls it, each getting the full state).
  virtual optim::OptimizerStateDict optimizer_state(const optim::Optimizer& optimizer) const;
  virtual void load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerStateDict& state);
  // Bytes of optimizer state this process holds.
  virtual int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const;

  // ---- collectives for logging and decisions ----
  virtual double reduce(double value, trainer::ReduceFx /*reduce_fx*/) const { return value; }
  virtual bool reduce_any(bool decision) const { return decision; }
  virtual void barrier(const std::string& /*where*/) const {}
  virtual int64_t broadcast_from_zero(int64_t value) const { return value; }
  // [world_size, *shape] in rank order (Lightning's all_gather).
  virtual Tensor all_gather(const Tensor& tensor) const { return tensor.detach().unsqueeze(0).clone(); }

  // ---- state ----
  virtual nlohmann::json state_dict() const;
  virtual void load_state_dict(const nlohmann::json& state);
  // A line for the end-of-fit summary; empty when there is nothing to say.
  virtual std::string summary() const { return ""; }
  // What this process's communicator sent during training steps; nullopt without one.
  virtual std::optional<StepTraffic> step_traffic() const { return std::nullopt; }
  // How the effective batch comes about, for the fit banner.
  virtual std::string describe_batch(int64_t batch_size, int64_t accumulate) const;

 protected:
  // Runs the step of `module` on `batch` in the current thread (autocast on).
  Tensor call_training_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx);
  // backward(loss, ...) between the loop's before- and after-backward hooks.
  void backward_with_hooks(const Tensor& loss, const TrainingStepRequest& step, TrainingStepHooks& hooks);

  StrategyEnvironment env_;
  std::vector<Device> devices_{Device::cpu()};
  PrecisionPlugin precision_;
  std::unique_ptr<trainer::CudaGraphStep> cuda_graph_;
};

class StrategyRegistry : public NamedRegistry<Strategy> {
 public:
  StrategyRegistry() : NamedRegistry<Strategy>("strategy") {}
};

// The process-wide registry with the built-in strategies in it.
StrategyRegistry& strategy_registry();

struct StrategyChoice {
  std::string name;
  std::unique_ptr<Strategy> strategy;
  std::vector<std::string> notes;
};

// Resolves `strategy=...` (case-insensitive). "auto": num_nodes > 1 -> ddp; one device ->
// single_device; more -> ddp. Validates num_nodes (> 0) and the strategy against the context.
// Throws ConfigError for unknown names (listing registered ones), options the strategy does not
// take (naming those it does) and invalid combinations.
StrategyChoice select_strategy(const std::string& requested, const StrategyContext& context,
                               const StrategyRegistry& registry = strategy_registry(),
                               const InitParams& options = {});

// Throws ConfigError unless num_nodes is a positive integer.
void validate_num_nodes(int num_nodes);

// The checks of select_strategy that need no machine: "auto" takes no options, any other name
// is registered and takes `options`. Builds the strategy to check its options (null for auto);
// what --print_config runs, so it accepts what plan and fit accept.
std::unique_ptr<Strategy> check_strategy_request(const std::string& requested,
                                                 const StrategyRegistry& registry = strategy_registry(),
                                                 const InitParams& options = {});

// The batch moved to `device`; floating inputs and targets cast to `dtype`.
data::Batch move_batch(const data::Batch& batch, Device device, DType dtype);

}  // namespace tandem
