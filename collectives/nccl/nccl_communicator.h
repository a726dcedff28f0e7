// NcclCommunicator: the Communicator over NCCL, for GPU tensors, bootstrapped by MPI.
//
// Bootstrap (collective over the MPI communicator given): rank 0 calls ncclGetUniqueId, the id
// is broadcast with MPI, every rank calls ncclCommInitRank on the CUDA device it drives. The
// device is the caller's choice (the Trainer's plan picks it from the local rank, which MPI
// derives with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)); NCCL needs one GPU per rank.
//
// Streams: NCCL runs on a stream of its own. Each operation first makes that stream wait for
// the work already queued on the compute stream (an event, no host sync), then records a "done"
// event after the NCCL call. is_completed() queries that event. wait(timeout) does not block the
// host: it makes the compute stream wait for the done event (kernels queued after wait() see the
// result; a host read such as item() or to(cpu) waits for it) and hands the event and deadline
// to the communicator's watchdog thread, which polls events and ncclCommGetAsyncError every
// millisecond. On a missed deadline or an asynchronous NCCL error the watchdog aborts the
// communicator (ncclCommAbort: this rank's kernels return and the other ranks' pending
// operations fail too instead of hanging), and the next call throws CommError naming the
// operation. barrier() is the exception: its wait blocks the host until every rank arrived.
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
  bool needs_device_tensors() const override { return true; }
  int device_index() const;

  TANDEM_COMMUNICATOR_OVERRIDES
  // One ncclGroupStart/End around all the sends and receives (ungrouped, each would hold the
  // stream until matched).
  WorkHandle exchange_async(const std::vector<PeerTransfer>& transfers) override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tandem::collectives
