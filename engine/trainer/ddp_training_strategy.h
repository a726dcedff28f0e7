// DDPTrainingStrategy: one process per device, every process holding a full replica of the
// model; gradients are averaged by the Reducer during backward, so every rank takes the same
// optimizer step and the replicas stay identical (PyTorch DDP's contract).
//
//   setup_module     move to the device/dtype, broadcast rank 0's parameters and buffers,
//                    build the Reducer (buckets + gradient hooks)
//   before step      broadcast rank 0's buffers (BatchNorm running stats), as broadcast_buffers
//   backward         reducer.prepare_for_backward(will_step) then loss.backward(): with
//                    will_step=false (accumulating) the hooks stay quiet (no_sync)
//   optimizer_step   reducer.finalize() (wait for buckets, averaged grads in .grad), then the
//                    caller's before_step (hooks, clipping on the averaged grads), then step
//   reduce/any/...   small collectives for sync_dist logging, stop decisions and all_gather
//
// The communicator decides the transport: MPI for CPU (and staged GPU buffers), NCCL for GPUs
// when built, a world of one when the job has a single process.
#pragma once
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "engine/strategies/reducer.h"
#include "engine/trainer/training_strategy.h"

namespace tandem::trainer {

class DDPTrainingStrategy : public TrainingStrategy {
 public:
  DDPTrainingStrategy(std::string name, std::shared_ptr<collectives::Communicator> comm, Device device, DType dtype,
                      int node_rank = 0, ReducerOptions reducer_options = {});
  ~DDPTrainingStrategy() override;

  std::string name() const override { return name_; }
  int world_size() const override { return comm_->size(); }
  int global_rank() const override { return comm_->rank(); }
  int local_rank() const override { return comm_->local_rank(); }
  int node_rank() const override { return node_rank_; }
  Device root_device() const override { return device_; }
  DType compute_dtype() const override { return dtype_; }

  void setup_module(LightningModule& module) override;
  data::Batch batch_to_device(const data::Batch& batch) const override { return move_batch(batch, device_, dtype_); }
  void before_training_step(LightningModule& module) override;
  void backward(const Tensor& loss, bool will_step) override;
  void optimizer_step(optim::Optimizer& optimizer, const std::function<bool()>& before_step) override;
  double reduce(double value, ReduceFx reduce_fx) const override;
  bool reduce_any(bool decision) const override;
  void barrier(const std::string& where) const override;
  int64_t broadcast_from_zero(int64_t value) const override;
  Tensor all_gather(const Tensor& tensor) const override;
  std::string summary() const override;
  void teardown() override;

  collectives::Communicator& communicator() const { return *comm_; }
  const Reducer* reducer() const { return reducer_.get(); }

 private:
  std::string name_;
  std::shared_ptr<collectives::Communicator> comm_;
  Device device_;
  Device comm_device_;  // where scalars and gathered tensors go for the communicator
  DType dtype_;
  int node_rank_;
  ReducerOptions reducer_options_;
  std::unique_ptr<Reducer> reducer_;
  ReducerStats finished_stats_;  // of reducers from earlier stages, for summary()
};

}  // namespace tandem::trainer
