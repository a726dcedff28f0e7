// ddp, horovod, ddp_spawn: one process per device, every process holding a full replica of the
// model; gradients are averaged by the Reducer during backward, so every rank takes the same
// optimizer step and the replicas stay identical (PyTorch DDP's contract).
//
//   setup_environment  the communicator (MPI for CPU and staged GPU buffers, NCCL for GPUs when
//                      built, a world of one for a single process)
//   setup_module       move to the device/dtype, broadcast rank 0's parameters and buffers,
//                      build the Reducer (buckets + gradient hooks)
//   before step        broadcast rank 0's buffers (BatchNorm running stats), as broadcast_buffers
//   backward           reducer.prepare_for_backward(will_step) then backward: with
//                      will_step=false (accumulating) the hooks stay quiet (no_sync)
//   optimizer_step     reducer.finalize() (wait for buckets, averaged grads in .grad), then the
//                      precision plugin and the caller's hooks, then the step
//   reduce/any/...     small collectives for sync_dist logging, stop decisions and all_gather
//   step_traffic       what the communicator sent from a step's first before_training_step to
//                      the end of its optimizer_step (summary(): bytes sent per step)
//
// The three differ only in how the processes start: ddp relaunches `tandem` under mpirun when
// started by hand; horovod is always started by mpirun/horovodrun (Horovod's model) and says so
// when it is not; ddp_spawn starts the other ranks itself (spawn_launcher.h).
#pragma once
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "engine/strategies/reducer.h"
#include "engine/strategies/step_traffic_meter.h"
#include "engine/strategies/strategy.h"

namespace tandem {

// The world communicator a strategy's environment asks for: the process_group_backend (auto:
// NCCL for a GPU when built, else MPI; a world of one needs none), the collective timeout, and
// the root device for NCCL; over the host's communicator when env.host_comm is set, else over
// MPI_COMM_WORLD. Throws ConfigError for a backend that cannot carry this job.
std::shared_ptr<collectives::Communicator> make_world_communicator(const StrategyEnvironment& env,
                                                                   const std::string& strategy);

class DDPStrategy : public Strategy {
 public:
  explicit DDPStrategy(ReducerOptions reducer_options = {}) : reducer_options_(reducer_options) {}
  ~DDPStrategy() override;

  std::string name() const override { return "ddp"; }
  int processes_per_node(int num_devices) const override { return num_devices; }
  LaunchKind launch_kind() const override { return LaunchKind::Relaunch; }
  void launch(const ExecutionPlan& plan, const std::vector<std::string>& argv) override;

  void setup_environment(const StrategyEnvironment& env) override;
  // The same with a communicator of the caller's (an embedding MPI code's, or a test's world).
  void setup_environment(const StrategyEnvironment& env, std::shared_ptr<collectives::Communicator> comm);
  void setup_module(trainer::LightningModule& module) override;

  int world_size() const override { return comm_->size(); }
  int global_rank() const override { return comm_->rank(); }
  int local_rank() const override { return comm_->local_rank(); }
  int node_rank() const override { return node_rank_; }

  void before_training_step(trainer::LightningModule& module) override;
  void backward(const Tensor& loss, double factor, bool will_step) override;
  void optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) override;
  double reduce(double value, trainer::ReduceFx reduce_fx) const override;
  bool reduce_any(bool decision) const override;
  void barrier(const std::string& where) const override;
  int64_t broadcast_from_zero(int64_t value) const override;
  Tensor all_gather(const Tensor& tensor) const override;
  std::string summary() const override;
  std::optional<StepTraffic> step_traffic() const override;

  collectives::Communicator& communicator() const { return *comm_; }
  const Reducer* reducer() const { return reducer_.get(); }

 protected:
  // Moves the module and broadcasts rank 0's parameters and buffers (the Reducer aside).
  void setup_replica(trainer::LightningModule& module);
  // Step traffic: the first call of a step takes the communicator's count, end_step adds what
  // was sent since. Derived strategies that override before_training_step or optimizer_step call
  // these (or the base versions).
  void begin_step_traffic();
  void end_step_traffic();
  // What this rank has sent so far, on comm_ and on any communicator of the strategy's own.
  virtual collectives::CommTraffic traffic_so_far() const;
  // Communication after the optimizer step that belongs to the step (bagua: weight averaging),
  // run by optimizer_step before the step's traffic is closed.
  virtual void after_optimizer_step_communication() {}

  std::shared_ptr<collectives::Communicator> comm_;
  Device comm_device_ = Device::cpu();  // where scalars and gathered tensors go for the communicator
  int node_rank_ = 0;
  ReducerOptions reducer_options_;
  std::unique_ptr<Reducer> reducer_;
  ReducerStats finished_stats_;  // of reducers from earlier stages, for summary()
  StepTrafficMeter step_traffic_;
};

// Horovod's model on Tandem's own collectives: one process per device, started by mpirun or
// horovodrun (never relaunched by Tandem), gradients averaged over the MPI communicator in
// fusion buffers (the Reducer's buckets, bucket_cap_mb as HOROVOD_FUSION_THRESHOLD).
class HorovodStrategy : public DDPStrategy {
 public:
  std::string name() const override { return "horovod"; }
  LaunchKind launch_kind() const override { return LaunchKind::External; }
  void launch(const ExecutionPlan& plan, const std::vector<std::string>& argv) override;
  void setup_environment(const StrategyEnvironment& env) override;
};

// ddp_spawn: ddp whose first process starts the others itself. Started without a launcher, the
// process that builds the Trainer spawns world_size - 1 copies of its own program with its own
// arguments (MPI_Comm_spawn, no mpirun needed; collectives/mpi/mpi_spawn.h) and trains as rank 0
// of the merged world; the copies find their rank in TANDEM_SPAWN_WORLD_SIZE plus Open MPI's
// variables (the "spawn" cluster environment). Unlike Lightning's, the caller's module is the one
// trained when fit returns: rank 0 is the caller. One node only; under mpirun it is ddp.
class DDPSpawnStrategy : public DDPStrategy {
 public:
  std::string name() const override { return "ddp_spawn"; }
  void validate(const StrategyContext& context) const override;
  LaunchKind launch_kind() const override { return LaunchKind::Spawn; }
  // Records the job to spawn; the processes start in setup_environment (with its timeout).
  void launch(const ExecutionPlan& plan, const std::vector<std::string>& argv) override;
  void setup_environment(const StrategyEnvironment& env) override;

 private:
  int to_spawn_ = 0;  // processes this one starts (world_size - 1), 0 when it starts none
};

}  // namespace tandem
