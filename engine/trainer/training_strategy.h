// TrainingStrategy: the seam where the Trainer's loops meet "how many processes and devices".
// The loops never move a batch, run backward, step an optimizer or reduce a logged value
// themselves; they ask the strategy. SingleDeviceTrainingStrategy does the plain thing on one
// device; DDP (issue 6) plugs in here with its Reducer (backward hooks, no_sync while
// accumulating, waiting for buckets before the step) and its communicator (sync_dist).
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
  // Waits for gradient reductions, calls before_step (hooks, then clipping), then steps.
  virtual void optimizer_step(optim::Optimizer& optimizer, const std::function<void()>& before_step) = 0;
  // sync_dist: the value reduced across ranks with the reduction ("mean", "sum", "max", "min").
  virtual double reduce(double value, ReduceFx reduce_fx) const { return value; }
  // Every rank agrees to stop when any rank wants to (EarlyStopping, NaN loss on one rank).
  virtual bool reduce_any(bool decision) const { return decision; }
  virtual void barrier(const std::string& /*where*/) const {}
  virtual void teardown() {}
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
  void optimizer_step(optim::Optimizer& optimizer, const std::function<void()>& before_step) override;

 private:
  Device device_;
  DType dtype_;
};

// Builds the strategy a plan asks for. Only single_device on the CPU exists so far; anything
// else (a strategy still to land, CUDA before its kernels, precisions other than 32-true and
// 64-true) is a ConfigError that says what is supported now.
std::unique_ptr<TrainingStrategy> make_training_strategy(const ExecutionPlan& plan);

}  // namespace tandem::trainer
