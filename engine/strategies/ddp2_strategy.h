// ddp2: dp inside a node, ddp across nodes. One process per node drives all of its node's
// devices (data_parallel_strategy.h: replicas, scatter, per-device threads, gradients summed on
// the root device); across nodes, the root devices' gradients are averaged through the world
// communicator before the optimizer step (MPI, or NCCL between root GPUs), so every node takes
// the same step. The DistributedSampler gives each process its node's share of the data, and
// each batch is split over that node's devices: effective batch = batch_size x num_nodes.
//
// Rank 0's weights and buffers are broadcast at setup and its buffers before every training
// step (as ddp), so replicas stay identical across nodes. summary() reports what each process
// sent across nodes per step, counted by the communicator as for ddp.
#pragma once
#include <memory>

#include "collectives/communicator.h"
#include "engine/strategies/data_parallel_strategy.h"
#include "engine/strategies/step_traffic_meter.h"

namespace tandem {

class DDP2Strategy : public DataParallelStrategy {
 public:
  std::string name() const override { return "ddp2"; }
  void validate(const StrategyContext& /*context*/) const override {}
  LaunchKind launch_kind() const override { return LaunchKind::Relaunch; }
  void launch(const ExecutionPlan& plan, const std::vector<std::string>& argv) override;

  void setup_environment(const StrategyEnvironment& env) override;
  // The same with a communicator of the caller's.
  void setup_environment(const StrategyEnvironment& env, std::shared_ptr<collectives::Communicator> comm);
  void setup_module(trainer::LightningModule& module) override;
  void before_training_step(trainer::LightningModule& module) override;
  void optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) override;

  int world_size() const override { return comm_->size(); }
  int global_rank() const override { return comm_->rank(); }
  int local_rank() const override { return 0; }  // one process per node
  int node_rank() const override { return comm_->rank(); }
  double reduce(double value, trainer::ReduceFx reduce_fx) const override;
  bool reduce_any(bool decision) const override;
  void barrier(const std::string& where) const override;
  int64_t broadcast_from_zero(int64_t value) const override;
  Tensor all_gather(const Tensor& tensor) const override;
  std::string summary() const override;
  std::optional<StepTraffic> step_traffic() const override { return step_traffic_.total(); }

 private:
  std::shared_ptr<collectives::Communicator> comm_;
  Device comm_device_ = Device::cpu();
  StepTrafficMeter step_traffic_;  // what crossed nodes (the devices of a node share memory)
};

}  // namespace tandem
