#include "engine/strategies/collective_values.h"

#include "tensor/autograd/grad_mode.h"

namespace tandem {

double reduce_value(collectives::Communicator& comm, Device device, double value, trainer::ReduceFx reduce_fx) {
  if (comm.size() == 1) return value;
  Tensor t = Tensor::scalar(value, DType::Float64).to(device);
  collectives::ReduceOp op = collectives::ReduceOp::Avg;
  switch (reduce_fx) {
    case trainer::ReduceFx::Mean: op = collectives::ReduceOp::Avg; break;
    case trainer::ReduceFx::Sum: op = collectives::ReduceOp::Sum; break;
    case trainer::ReduceFx::Max: op = collectives::ReduceOp::Max; break;
    case trainer::ReduceFx::Min: op = collectives::ReduceOp::Min; break;
  }
  comm.allreduce(t, op);
  return t.item();
}

bool reduce_any_rank(collectives::Communicator& comm, Device device, bool decision) {
  if (comm.size() == 1) return decision;
  Tensor t = Tensor::scalar(decision ? 1 : 0, DType::Int32).to(device);
  comm.allreduce(t, collectives::ReduceOp::Max);
  return t.item() != 0.0;
}

int64_t broadcast_value(collectives::Communicator& comm, Device device, int64_t value) {
  if (comm.size() == 1) return value;
  Tensor t = Tensor::scalar(double(value), DType::Int64).to(device);
  comm.broadcast(t, 0);
  return int64_t(t.item());
}

Tensor all_gather_tensor(collectives::Communicator& comm, Device device, const Tensor& tensor) {
  NoGradGuard no_grad;
  const Tensor local = tensor.detach().to(device).contiguous();
  Shape shape = local.shape();
  shape.insert(shape.begin(), comm.size());
  Tensor out = Tensor::empty(shape, local.dtype(), local.device());
  comm.allgather(local.reshape({local.numel()}), out.reshape({out.numel()}));
  return out.to(tensor.device());
}

}  // namespace tandem
