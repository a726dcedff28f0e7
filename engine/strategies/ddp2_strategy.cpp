#include "engine/strategies/ddp2_strategy.h"

#include "base/error.h"
#include "engine/strategies/collective_values.h"
#include "engine/strategies/ddp_strategy.h"
#include "engine/strategies/execution_plan.h"
#include "engine/strategies/mpirun_launcher.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem {

void DDP2Strategy::launch(const ExecutionPlan& plan, const std::vector<std::string>& argv) {
  relaunch_with_mpirun(plan, argv);
}

void DDP2Strategy::setup_environment(const StrategyEnvironment& env) {
  setup_environment(env, make_world_communicator(env, name()));
}

void DDP2Strategy::setup_environment(const StrategyEnvironment& env, std::shared_ptr<collectives::Communicator> comm) {
  TANDEM_CHECK(comm != nullptr, ValueError, "strategy=ddp2: the communicator is null");
  Strategy::setup_environment(env);
  if (comm->size() != env.world_size) {
    throw ConfigError("strategy=ddp2 planned one process per node x num_nodes=" + std::to_string(env.num_nodes) + " = " +
                      std::to_string(env.world_size) + " processes, but the " + comm->backend_name() + " communicator has " +
                      std::to_string(comm->size()) + "; launch one process per node (mpirun -np " +
                      std::to_string(env.world_size) + " -npernode 1)");
  }
  comm_ = std::move(comm);
  comm_device_ = comm_->buffer_device(root_device());
}

void DDP2Strategy::setup_module(trainer::LightningModule& module) {
  TANDEM_CHECK(comm_ != nullptr, ValueError, "strategy=ddp2: setup_module before setup_environment");
  DataParallelStrategy::setup_module(module);
  {
    NoGradGuard no_grad;
    // Node 0's initial weights everywhere; the replicas then copy their root.
    for (auto& [name, p] : module.named_parameters()) comm_->broadcast(p, 0);
    for (auto& [name, b] : module.named_buffers()) comm_->broadcast(b, 0);
  }
  refresh_replicas(module);
}

void DDP2Strategy::before_training_step(trainer::LightningModule& module) {
  step_traffic_.begin(comm_->traffic());
  if (comm_->size() == 1) return;
  NoGradGuard no_grad;
  for (auto& [name, b] : module.named_buffers()) comm_->broadcast(b, 0);
}

void DDP2Strategy::optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) {
  if (comm_->size() > 1) {
    NoGradGuard no_grad;
    // Each root holds its node's gradient (summed over its devices, accumulated over the
    // micro-batches); their mean is the gradient of the whole job's batch. Parameters in a fixed
    // order; one without a gradient on this node contributes zeros.
    for (const Tensor& p : root_->parameters()) {
      if (!p.requires_grad()) continue;
      Tensor g = p.grad();
      if (!g.defined()) {
        g = Tensor::zeros(p.shape(), p.dtype(), p.device());
        Tensor(p).set_grad(g);
      }
      Tensor moved = g.to(comm_device_).contiguous();
      comm_->allreduce(moved, collectives::ReduceOp::Avg);
      if (!moved.same_impl(g)) g.copy_(moved);
    }
  }
  Strategy::optimizer_step(optimizer, before_step);
  step_traffic_.end(comm_->traffic());
}

std::string DDP2Strategy::summary() const {
  return name() + ": " + std::to_string(comm_->size()) + " node(s) over " + comm_->backend_name() +
         ", one process per node" + step_traffic_.summary();
}

double DDP2Strategy::reduce(double value, trainer::ReduceFx reduce_fx) const {
  return reduce_value(*comm_, comm_device_, value, reduce_fx);
}

bool DDP2Strategy::reduce_any(bool decision) const { return reduce_any_rank(*comm_, comm_device_, decision); }

void DDP2Strategy::barrier(const std::string& /*where*/) const {
  if (comm_->size() > 1) comm_->barrier();
}

int64_t DDP2Strategy::broadcast_from_zero(int64_t value) const { return broadcast_value(*comm_, comm_device_, value); }

Tensor DDP2Strategy::all_gather(const Tensor& tensor) const { return all_gather_tensor(*comm_, comm_device_, tensor); }

}  // namespace tandem
