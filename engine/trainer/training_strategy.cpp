#include "engine/trainer/training_strategy.h"

#include <cmath>

#include "collectives/communicator_factory.h"
#include "engine/accelerators/precision.h"
#include "engine/core/error.h"
#include "engine/trainer/ddp_training_strategy.h"

namespace tandem::trainer {

data::Batch move_batch(const data::Batch& batch, Device device, DType dtype) {
  data::Batch out = batch.to(device);
  // 64-true runs the model in float64, so float inputs follow; class indices stay int64.
  if (out.input.defined() && is_floating(out.input.dtype()) && out.input.dtype() != dtype) {
    out.input = out.input.to(dtype);
  }
  if (out.target.defined() && is_floating(out.target.dtype()) && out.target.dtype() != dtype) {
    out.target = out.target.to(dtype);
  }
  return out;
}

void SingleDeviceTrainingStrategy::setup_module(LightningModule& module) {
  module.to(device_);
  module.to(dtype_);
}

data::Batch SingleDeviceTrainingStrategy::batch_to_device(const data::Batch& batch) const {
  return move_batch(batch, device_, dtype_);
}

void SingleDeviceTrainingStrategy::backward(const Tensor& loss, bool /*will_step*/) { loss.backward(); }

void SingleDeviceTrainingStrategy::optimizer_step(optim::Optimizer& optimizer,
                                                  const std::function<bool()>& before_step) {
  if (!before_step || before_step()) optimizer.step();
}

namespace {

// The dtype of the weights (and of float inputs) for a precision; mixed precision keeps
// float32 master weights and lowers matmuls and convolutions through autocast.
DType dtype_of(Precision precision, const std::string& accelerator) {
  switch (precision) {
    case Precision::Float32True: return DType::Float32;
    case Precision::Float64True: return DType::Float64;
    case Precision::Float16Mixed:
    case Precision::BFloat16Mixed:
      if (accelerator == "cuda") return DType::Float32;
      throw ConfigError("precision=" + precision_name(precision) + " trains on CUDA only: the CPU kernels compute in "
                        "float32 and float64; use --trainer.precision=32-true (or 64-true) on accelerator=" + accelerator);
  }
  return DType::Float32;
}

// "auto": nccl for CUDA when it was built in, else mpi; a world of one needs no transport.
collectives::CommBackend comm_backend_for(const ExecutionPlan& plan, const std::string& requested) {
  using collectives::CommBackend;
  const std::string name = requested.empty() ? "auto" : requested;
  if (name != "auto") {
    const CommBackend backend = collectives::parse_comm_backend(name);
    if (backend == CommBackend::Local && plan.world_size > 1) {
      throw ConfigError("process_group_backend=local is a world of one process, but the plan has world size " +
                        std::to_string(plan.world_size) + "; use mpi (CPU or GPU) or nccl (GPU)");
    }
    if (backend == CommBackend::Nccl && plan.accelerator != "cuda") {
      throw ConfigError("process_group_backend=nccl moves GPU buffers, but accelerator=" + plan.accelerator +
                        "; use mpi (Lightning's gloo role) for CPU training");
    }
    return backend;
  }
  if (plan.world_size == 1) return CommBackend::Local;
  if (plan.accelerator == "cuda" && collectives::comm_backend_compiled_in(CommBackend::Nccl)) return CommBackend::Nccl;
  return CommBackend::Mpi;
}

}  // namespace

std::unique_ptr<TrainingStrategy> make_training_strategy(const ExecutionPlan& plan, const StrategyRuntimeOptions& runtime) {
  if (!plan.strategy_implemented) {
    throw ConfigError("strategy=" + plan.strategy + " is planned but cannot train yet (it lands with its own "
                      "issue); train with --trainer.strategy=ddp or single_device, or run `tandem plan` to see "
                      "what the flags resolve to");
  }
  if (plan.launch) {
    throw ConfigError("the plan needs " + std::to_string(plan.world_size) + " processes (strategy=" + plan.strategy +
                      "), but this process was not started by a launcher; start it as: " + *plan.launch +
                      " (`tandem fit` relaunches itself this way)");
  }
  if (plan.accelerator != "cpu" && plan.accelerator != "cuda") {
    throw ConfigError("accelerator=" + plan.accelerator + " cannot train: a registered accelerator needs a kernel "
                      "backend of its own (Tandem has cpu and cuda); use --trainer.accelerator=cpu or cuda");
  }
  if (!(runtime.collective_timeout_s > 0) || !std::isfinite(runtime.collective_timeout_s)) {
    throw ConfigError("collective_timeout=" + std::to_string(runtime.collective_timeout_s) +
                      " is not valid: expected a number of seconds > 0 (default 600)");
  }
  const DType dtype = dtype_of(plan.precision, plan.accelerator);
  // This process's GPU: the plan's process device (the local rank's entry of the parsed devices).
  const Device device = plan.accelerator == "cuda"
                            ? Device::cuda(plan.process_device ? plan.process_device->index : 0)
                            : Device::cpu();
  if (plan.strategy == "single_device") {
    if (plan.world_size != 1) {
      throw ConfigError("strategy=single_device runs one process, but the launcher started " +
                        std::to_string(plan.world_size) + "; use --trainer.strategy=ddp");
    }
    return std::make_unique<SingleDeviceTrainingStrategy>(device, dtype);
  }
  if (plan.strategy == "ddp" || plan.strategy == "ddp_spawn") {
    collectives::CommOptions options;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(runtime.collective_timeout_s * 1000.0));
    // NCCL drives this rank's GPU (the plan's process device, e.g. cuda:3 for --trainer.devices=2,3).
    auto comm = collectives::make_communicator(comm_backend_for(plan, runtime.process_group_backend), options,
                                               device.is_cuda() ? device.index : -1);
    if (comm->size() != plan.world_size) {
      throw ConfigError("strategy=" + plan.strategy + " planned " + std::to_string(plan.world_size) +
                        " processes, but the " + comm->backend_name() + " communicator has " +
                        std::to_string(comm->size()) + "; launch with mpirun -np " + std::to_string(plan.world_size));
    }
    return std::make_unique<DDPTrainingStrategy>(plan.strategy, std::move(comm), device, dtype,
                                                 plan.cluster.node_rank < 0 ? 0 : plan.cluster.node_rank);
  }
  throw ConfigError("strategy=" + plan.strategy + " has no training implementation; use ddp or single_device");
}

}  // namespace tandem::trainer
