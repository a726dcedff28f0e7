// NcclCommunicator: the Communicator over NCCL, for GPU tensors, bootstrapped by MPI.
//
// Bootstrap (collective over the MPI communicator given): rank 0 calls ncclGetUniqueId, the id
// is broadcast with MPI, every rank calls ncclCommInitRank on the CUDA device it drives. The
// device is the caller's choice (the Trainer's plan picks it from the local rank, which MPI
// derives with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)); NCCL needs one GPU per rank.
//
// Streams: NCCL runs on a stream of its own. Each operation first makes that stream wait for
// the work already queued on the compute stream (an event, no host sync), then records a "done"
// event after the NCCL call. is_completed() queries that event; wait(timeout) polls it together
// with ncclCommGetAsyncError until it completes or the deadline passes, then makes the compute
// stream wait for the done event, so kernels queued after wait() see the result. On a timeout
// or an asynchronous NCCL error the communicator is aborted (ncclCommAbort: the other ranks'
// pending operations fail too instead of hanging) and CommError names the operation.
//
// Tensors must live on this communicator's device (host tensors: use the mpi backend).
// reduce_scatter and allgather with counts that do not divide by the world size (the
// Communicator's chunk rule allows that) go through allreduce + copy and grouped broadcasts.
#pragma once
#include <memory>
#include <string>

#include "collectives/communicator.h"

namespace tandem::collectives {

class MpiCommunicator;

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap`: every rank constructs together. device_index: the CUDA device
  // this rank drives.
  NcclCommunicator(MpiCommunicator& bootstrap, int device_index, CommOptions options = {});
  ~NcclCommunicator() override;

  int rank() const override;
  int size() const override;
  int local_rank() const override;
  int local_size() const override;
  std::string backend_name() const override { return "nccl"; }
  int device_index() const;

  using Communicator::allreduce_async;
  WorkHandle allreduce_async(const Tensor& input, const Tensor& output, ReduceOp op) override;
  WorkHandle reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) override;
  WorkHandle allgather_async(const Tensor& input, const Tensor& output) override;
  WorkHandle broadcast_async(const Tensor& tensor, int root) override;
  WorkHandle barrier_async() override;
  WorkHandle send_async(const Tensor& tensor, int dst, int tag) override;
  WorkHandle recv_async(const Tensor& tensor, int src, int tag) override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tandem::collectives
