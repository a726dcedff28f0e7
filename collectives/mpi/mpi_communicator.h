// MpiCommunicator: the Communicator over MPI, for CPU training and as the bootstrap of NCCL.
//
// Ownership (embedding in an MPI application):
// - MPI must be initialized before construction: by the application, or by
//   init_comm_runtime / make_communicator (collectives/communicator_factory.h), in which case
//   Tandem also finalizes it at exit. Tandem never calls MPI_Init twice, and never finalizes an
//   MPI it did not initialize.
// - The constructor duplicates the given communicator (MPI_Comm_dup, collective over it: every
//   rank constructs together) and the destructor frees only the duplicates. The caller's
//   communicator is never freed, and Tandem's messages never match the application's.
// - Destroy communicators before MPI_Finalize.
// Host tensors go straight to MPI. CUDA tensors go to MPI as device pointers when the library
// is CUDA-aware (after the device's compute stream is synchronized, since MPI does not know it),
// else through pinned host tensors: one device-to-host DMA before, one host-to-device DMA after.
// Reductions (allreduce, reduce_scatter) always stage: Open MPI's nonblocking reductions do not
// take device pointers even when it is CUDA-aware.
// TANDEM_MPI_CUDA_AWARE=auto|0|1 (collectives/mpi_cuda_aware.h) chooses; 1 makes construction
// throw CommError when the library is not CUDA-aware.
// Every operation is nonblocking MPI polled to a deadline (see mpi_work.h).
#pragma once
#include <mpi.h>

#include <memory>

#include "collectives/communicator.h"
#include "collectives/mpi/mpi_comm_state.h"
#include "collectives/mpi/persistent_allreduce.h"

namespace tandem::collectives {

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, CommOptions options = {});
  ~MpiCommunicator() override;

  int rank() const override { return state_->rank; }
  int size() const override { return state_->size; }
  int local_rank() const override { return state_->local_rank; }
  int local_size() const override { return state_->local_size; }
  std::string backend_name() const override { return "mpi"; }
  // MPI_Query_thread says MPI_THREAD_MULTIPLE (what Tandem asks for when it initializes MPI; a
  // host program that initialized MPI itself chose its own level).
  bool allows_concurrent_threads() const override;

  TANDEM_COMMUNICATOR_OVERRIDES

  // Set after a timeout or MPI error: the message of the first failure.
  bool failed() const { return !state_->failure.empty(); }
  const std::string& failure() const { return state_->failure; }
  // Tandem's duplicate (valid until destruction); for interop, not for freeing.
  MPI_Comm mpi_comm() const { return state_->comm; }
  // True when CUDA tensors go to MPI as device pointers (CUDA-aware MPI), false when they are
  // staged through pinned host memory. Reductions stage either way.
  bool passes_device_pointers() const { return device_pointers_; }

 private:
  void check_usable(const std::string& what) const;
  WorkHandle start(std::string description, bool collective, int peer, const char* call, int rc,
                   MPI_Request request, std::shared_ptr<void> buffers, std::function<void()> finish);
  void sync_options();

  std::shared_ptr<mpi::MpiCommState> state_;
  bool device_pointers_ = false;
  mpi::PersistentAllreduces persistent_;  // large in-place allreduces of host buffers
};

}  // namespace tandem::collectives
