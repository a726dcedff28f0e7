#include "engine/trainer/ddp_training_strategy.h"

#include <cstdio>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"

namespace tandem::trainer {

using collectives::ReduceOp;

DDPTrainingStrategy::DDPTrainingStrategy(std::string name, std::shared_ptr<collectives::Communicator> comm,
                                         Device device, DType dtype, int node_rank, ReducerOptions reducer_options)
    : name_(std::move(name)), comm_(std::move(comm)), device_(device), dtype_(dtype), node_rank_(node_rank),
      reducer_options_(reducer_options) {
  TANDEM_CHECK(comm_ != nullptr, ValueError, "DDPTrainingStrategy: the communicator is null");
  // NCCL moves only tensors on this rank's GPU; MPI takes host tensors (and stages device ones).
  comm_device_ = comm_->backend_name() == "nccl" ? device_ : Device::cpu();
}

DDPTrainingStrategy::~DDPTrainingStrategy() = default;

void DDPTrainingStrategy::setup_module(LightningModule& module) {
  module.to(device_);
  module.to(dtype_);
  NoGradGuard no_grad;
  // Rank 0's initial weights everywhere (a seed that differs per rank must not matter).
  for (auto& [name, p] : module.named_parameters()) comm_->broadcast(p, 0);
  for (auto& [name, b] : module.named_buffers()) comm_->broadcast(b, 0);
  std::vector<Tensor> trainable;
  for (const Tensor& p : module.parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  if (reducer_) finished_stats_ += reducer_->stats();
  reducer_.reset();
  reducer_ = std::make_unique<Reducer>(std::move(trainable), comm_, reducer_options_);
}

void DDPTrainingStrategy::before_training_step(LightningModule& module) {
  if (comm_->size() == 1) return;
  NoGradGuard no_grad;
  for (auto& [name, b] : module.named_buffers()) comm_->broadcast(b, 0);
}

void DDPTrainingStrategy::backward(const Tensor& loss, bool will_step) {
  TANDEM_CHECK(reducer_ != nullptr, ValueError, "DDP: backward before setup_module; the Trainer sets the module up first");
  reducer_->prepare_for_backward(will_step);
  loss.backward();
}

void DDPTrainingStrategy::optimizer_step(optim::Optimizer& optimizer, const std::function<bool()>& before_step) {
  if (reducer_) reducer_->finalize();
  // Gradients are identical on every rank after the allreduce, so a skip decision is too.
  if (!before_step || before_step()) optimizer.step();
}

double DDPTrainingStrategy::reduce(double value, ReduceFx reduce_fx) const {
  if (comm_->size() == 1) return value;
  Tensor t = Tensor::scalar(value, DType::Float64).to(comm_device_);
  ReduceOp op = ReduceOp::Avg;
  switch (reduce_fx) {
    case ReduceFx::Mean: op = ReduceOp::Avg; break;
    case ReduceFx::Sum: op = ReduceOp::Sum; break;
    case ReduceFx::Max: op = ReduceOp::Max; break;
    case ReduceFx::Min: op = ReduceOp::Min; break;
  }
  comm_->allreduce(t, op);
  return t.item();
}

bool DDPTrainingStrategy::reduce_any(bool decision) const {
  if (comm_->size() == 1) return decision;
  Tensor t = Tensor::scalar(decision ? 1 : 0, DType::Int32).to(comm_device_);
  comm_->allreduce(t, ReduceOp::Max);
  return t.item() != 0.0;
}

void DDPTrainingStrategy::barrier(const std::string& where) const {
  if (comm_->size() > 1) comm_->barrier();
}

int64_t DDPTrainingStrategy::broadcast_from_zero(int64_t value) const {
  if (comm_->size() == 1) return value;
  Tensor t = Tensor::scalar(double(value), DType::Int64).to(comm_device_);
  comm_->broadcast(t, 0);
  return int64_t(t.item());
}

Tensor DDPTrainingStrategy::all_gather(const Tensor& tensor) const {
  NoGradGuard no_grad;
  const Tensor local = tensor.detach().to(comm_device_).contiguous();
  Shape shape = local.shape();
  shape.insert(shape.begin(), comm_->size());
  Tensor out = Tensor::empty(shape, local.dtype(), local.device());
  comm_->allgather(local.reshape({local.numel()}), out.reshape({out.numel()}));
  return out.to(tensor.device());
}

std::string DDPTrainingStrategy::summary() const {
  ReducerStats s = finished_stats_;
  if (reducer_) s += reducer_->stats();
  char line[256];
  std::snprintf(line, sizeof line,
                "%s: %d ranks over %s, %zu gradient bucket(s); %lld synchronized steps, exposed communication "
                "%.3f ms/step, %lld of %lld bucket allreduces started during backward",
                name_.c_str(), comm_->size(), comm_->backend_name().c_str(), reducer_ ? reducer_->buckets().size() : size_t(0),
                static_cast<long long>(s.reductions), s.mean_exposed_ms(),
                static_cast<long long>(s.buckets_launched_in_backward), static_cast<long long>(s.bucket_launches));
  return line;
}

void DDPTrainingStrategy::teardown() {}

}  // namespace tandem::trainer
