// TrainingStrategy: the seam where the Trainer's loops meet "how many processes and devices".
// The loops never move a batch, run backward, step an optimizer or reduce a logged value
// themselves; they ask the strategy. SingleDeviceTrainingStrategy does the plain thing on one
// device; DDPTrainingStrategy (ddp_training_strategy.h) adds its Reducer (backward hooks,
// no_sync while accumulating, waiting for buckets before the step) and its communicator
// (sync_dist, all_gather, barriers).
//
// (engine/strategies' `Strategy` answers planning questions: processes per node, validity.
// This class does the work at training time; make_training_strategy picks one from a plan.)
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "engine/data/batch.h"
#include "engine/optim/optimizer.h"
#include "engine/strategies/execution_plan.h"
#include "engine/tensor/tensor.h"
#include "engine/trainer/lightning_module.h"

namespace tandem::trainer {

class TrainingStrategy {
 public:
  virtual ~TrainingStrategy() = default;
  virtual std::string name() const = 0;

  virtual int world_size() const { return 1; }
  virtual int global_rank() const { return 0; }
  virtual int local_rank() const { return 0; }
  virtual int node_rank() const { return 0; }
  bool is_global_zero() const { return global_rank() == 0; }

  // Where the module and batches live, and the floating dtype of the precision
  // (Float64 for 64-true, else Float32).
  virtual Device root_device() const = 0;
  virtual DType compute_dtype() const = 0;

  // Moves the module to root_device()/compute_dtype() (and, for DDP, broadcasts rank 0's
  // parameters and installs gradient hooks).
  virtual void setup_module(LightningModule& module) = 0;
  // Floating inputs are cast to compute_dtype(); targets keep their dtype.
  virtual data::Batch batch_to_device(const data::Batch& batch) const = 0;
  // will_step: false while accumulating (DDP skips the allreduce then, as no_sync).
  virtual void backward(const Tensor& loss, bool will_step) = 0;
  // Waits for gradient reductions, calls before_step (unscaling, hooks, clipping), then steps
  // unless before_step returned false (16-mixed found an inf or NaN gradient: skip the step).
  virtual void optimizer_step(optim::Optimizer& optimizer, const std::function<bool()>& before_step) = 0;
  // sync_dist: the value reduced across ranks with the reduction ("mean", "sum", "max", "min").
  virtual double reduce(double value, ReduceFx reduce_fx) const { return value; }
  // Every rank agrees to stop when any rank wants to (EarlyStopping, NaN loss on one rank).
  virtual bool reduce_any(bool decision) const { return decision; }
  virtual void barrier(const std::string& /*where*/) const {}
  // Rank 0's value on every rank (the logger's version number, decisions made on rank 0).
  virtual int64_t broadcast_from_zero(int64_t value) const { return value; }
  // A tensor from every rank stacked along a new first dim: [world_size, *shape], in rank
  // order (Lightning's all_gather). The tensor must have the same shape on every rank.
  virtual Tensor all_gather(const Tensor& tensor) const { return tensor.detach().unsqueeze(0).clone(); }
  // Before each training_step (DDP: broadcast rank 0's buffers, as PyTorch's broadcast_buffers).
  virtual void before_training_step(LightningModule& /*module*/) {}
  // A line for the end-of-fit summary (DDP: buckets and exposed communication per step).
  virtual std::string summary() const { return ""; }
  virtual void teardown() {}
};

// The batch moved to `device`; floating inputs and targets cast to `dtype` (64-true runs the
// model in float64), class indices keep their dtype.
data::Batch move_batch(const data::Batch& batch, Device device, DType dtype);

// The options make_training_strategy needs beyond the plan.
struct StrategyRuntimeOptions {
  std::string process_group_backend = "auto";  // auto | mpi | nccl | local
  double collective_timeout_s = 600.0;         // a collective that takes longer fails the job
};

class SingleDeviceTrainingStrategy : public TrainingStrategy {
 public:
  SingleDeviceTrainingStrategy(Device device, DType dtype) : device_(device), dtype_(dtype) {}
  std::string name() const override { return "single_device"; }
  Device root_device() const override { return device_; }
  DType compute_dtype() const override { return dtype_; }
  void setup_module(LightningModule& module) override;
  data::Batch batch_to_device(const data::Batch& batch) const override;
  void backward(const Tensor& loss, bool will_step) override;
  void optimizer_step(optim::Optimizer& optimizer, const std::function<bool()>& before_step) override;

 private:
  Device device_;
  DType dtype_;
};

// Builds the strategy a plan asks for: single_device, or ddp/ddp_spawn over a communicator
// (MPI when launched by mpirun/srun with several processes, a world of one otherwise). What
// cannot train yet (dp, CUDA before its kernels, mixed precision) is a ConfigError that says
// what is supported now; a plan that still needs launching says how to launch it.
std::unique_ptr<TrainingStrategy> make_training_strategy(const ExecutionPlan& plan,
                                                         const StrategyRuntimeOptions& runtime = {});

}  // namespace tandem::trainer
